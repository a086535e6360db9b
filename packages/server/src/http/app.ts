import { type ErrorHandler, type Handler, Hono, type MiddlewareHandler } from 'hono';
import { loadSpec } from '../contract/spec.ts';
import { compileValidators, type Validators } from '../contract/validation.ts';
import {
  ApiError,
  describeError,
  internalError,
  isDatabaseUnavailable,
  notFound as nothingAt,
  serviceUnavailable,
  writeConflict,
} from '../errors.ts';
import { isWriteCollision } from '../kernel/unit-of-work.ts';
import { type CompiledRoutes, compileOperations } from './compiled.ts';
import type { AppDeps, AppEnv } from './context.ts';
import type { Operation } from './define-operation.ts';
import { renderProblem } from './errors.ts';
import { auditWrites } from './middleware/audit.ts';
import { authenticate, checkScope, requireScope, requireScopeForBody, requireToken } from './middleware/auth.ts';
import { listedOriginsCors } from './middleware/cors.ts';
import { front } from './middleware/front.ts';
import { idempotencyKey, idempotent } from './middleware/idempotency.ts';
import { jsonBody } from './middleware/json-body.ts';
import { addRateLimitHeaders, countRequest, rateLimit } from './middleware/rate-limit.ts';
import { traceRequests } from './middleware/trace-requests.ts';
import { allowedMethods, operationPaths, operations } from './operations.ts';
import { registerConsole } from './routes/console.ts';
import { registerDocs } from './routes/docs.ts';
import { registerHealth } from './routes/health.ts';
import { registerJwks } from './routes/jwks.ts';
import { registerMetrics } from './routes/metrics.ts';

export type { AppDeps } from './context.ts';

export const DEFAULT_REQUEST_TIMEOUT_MS = 10_000;

/** What a browser may send to the API and read from its answers (the origins and methods: see listedOriginsCors). */
export const CORS = {
  allowHeaders: [
    'Authorization',
    'Content-Type',
    'Idempotency-Key',
    'If-Match',
    'X-Request-Id',
    'traceparent',
    'Prefer',
  ],
  exposeHeaders: [
    'X-Request-Id',
    'ETag',
    'Location',
    'RateLimit',
    'RateLimit-Policy',
    'Retry-After',
    'Idempotent-Replayed',
  ],
  maxAge: 600,
};

/**
 * Every other method on a known path: 405 with `Allow` (the mock answers the same). The known
 * paths are the table's and the spec's others (health, the contract, the docs page, metrics while
 * on): a path of the document answers 405, never 404, to a method it lacks. Not
 * hono/method-not-allowed: it reads every route (the docs page's assets, the console's).
 */
const HTTP_METHODS = new Set(['GET', 'PUT', 'POST', 'DELETE', 'OPTIONS', 'HEAD', 'PATCH', 'TRACE']);

export function registerMethodNotAllowed(app: Hono<AppEnv>, { metrics = true }: { metrics?: boolean } = {}): void {
  const known = new Map(operationPaths().map((path) => [path, allowedMethods(path)]));
  for (const [path, methods] of Object.entries(loadSpec().paths)) {
    if (known.has(path) || (path === '/metrics' && !metrics)) continue;
    const listed = Object.keys(methods)
      .map((m) => m.toUpperCase())
      .filter((m) => HTTP_METHODS.has(m));
    known.set(
      path,
      listed.flatMap((m) => (m === 'GET' ? ['GET', 'HEAD'] : [m])),
    );
  }
  for (const [path, methods] of known) {
    const allow = methods.join(', ');
    app.all(path, function methodNotAllowed(c) {
      throw new ApiError('method_not_allowed', `${c.req.method} is not allowed here; use ${allow}.`, {
        headers: { Allow: allow },
      });
    });
  }
}

/**
 * An operation's route, in the order every operation shares: who is calling, their budget, the
 * audit of a write, the scope, the body, the idempotency key's form, the operation's own checks,
 * the claim of the key (only a request that passed them takes one), then the work.
 */
function registerOperation(app: Hono<AppEnv>, op: Operation<unknown>, renderError: ErrorHandler<AppEnv>): void {
  if (op.writes === undefined && !('body' in op.request) && !op.idempotent) {
    registerRead(app, op, renderError);
    return;
  }
  const chain: MiddlewareHandler<AppEnv>[] = [requireToken(), rateLimit(op.budget)];
  if (op.writes !== undefined) chain.push(auditWrites(op.writes, op.unaudited));
  chain.push(requireScope(op.scope, op.alsoScope?.scope));
  if ('body' in op.request) chain.push(jsonBody(op.bulk?.bodyBytes));
  if (op.alsoScope !== undefined) chain.push(requireScopeForBody(op.scope, op.alsoScope));
  if (op.idempotent) chain.push(idempotencyKey());
  chain.push(async function parse(c, next) {
    c.set('input', op.parse(c));
    await next();
  });
  // A key is held as long as its request may run (import's longer deadline), so that a retry
  // meanwhile is answered 409 rather than run a second time.
  if (op.idempotent) chain.push(idempotent(op.bulk?.keptAnswerBytes, Math.max(60_000, op.bulk?.timeoutMs ?? 0)));
  const handler: Handler<AppEnv> = async (c) => op.handle(c, c.get('input'));
  Object.defineProperty(handler, 'name', { value: op.name });
  app.on(op.method, [op.path], ...chain, handler);
}

/**
 * A read (no write, no body, no key) in one handler: the chain above without a middleware frame
 * per step (issue 33), in the same order and with the same answers. An error after the count is
 * rendered here, as Hono would render it for the step that threw, so that it carries the rate
 * limit's fields as it did when the rate limit was a middleware around that step.
 */
function registerRead(app: Hono<AppEnv>, op: Operation<unknown>, renderError: ErrorHandler<AppEnv>): void {
  const handler: Handler<AppEnv> = async (c) => {
    await authenticate(c);
    const refused = await countRequest(c, op.budget);
    if (refused !== undefined) return refused;
    let response: Response;
    try {
      checkScope(c, op.scope);
      const input = op.parse(c);
      c.set('input', input);
      response = await op.handle(c, input);
    } catch (error) {
      if (!(error instanceof Error)) throw error;
      c.error = error;
      response = await renderError(error, c);
    }
    addRateLimitHeaders(c, response);
    return response;
  };
  Object.defineProperty(handler, 'name', { value: op.name });
  app.on(op.method, [op.path], handler);
}

/** Hands every request what the handlers and middleware read from the context. */
export function provideDeps(deps: AppDeps, validators: Validators): MiddlewareHandler<AppEnv> {
  return async function provideDepsMiddleware(c, next) {
    c.set('deps', deps);
    c.set('validators', validators);
    await next();
  };
}

/**
 * The application, and its compiled operations (compiled.ts) that serveApp answers with before
 * the app: none while tracing or CORS is on (their middleware runs on every API request).
 */
export type ServiceApp = Hono<AppEnv> & { readonly compiled?: CompiledRoutes };

/** Builds the HTTP application. Importing this module, or calling it, opens and starts nothing. */
export function createApp(deps: AppDeps): ServiceApp {
  const validators = compileValidators();
  const app = new Hono<AppEnv>();

  // Only when tracing is on (decided at start): otherwise no middleware, no cost.
  if (deps.tracer !== undefined) app.use(traceRequests(deps.tracer));
  const timeoutMs = deps.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  // import's longer deadline; a long-poll's wait on top of the usual one.
  const timeouts = new Map(
    operations.map((op) => [op.path, Math.max(timeoutMs, op.bulk?.timeoutMs ?? 0, timeoutMs + (op.waitsMs ?? 0))]),
  );
  const renderError = errorRenderer(deps);
  // The dependencies, request id, access log, CORS (before authentication: a preflight carries no
  // token), metrics, no-store and the deadline, in one step (see front.ts).
  app.use(
    front({
      deps,
      validators,
      ...(deps.corsOrigins && deps.corsOrigins.length > 0 ? { cors: listedOriginsCors(deps.corsOrigins, CORS) } : {}),
      ...(deps.metrics ? { metrics: deps.metrics.collector } : {}),
      timeoutFor: (path) => timeouts.get(path) ?? timeoutMs,
      onError: renderError,
    }),
  );

  registerHealth(app);
  registerJwks(app);
  registerMetrics(app);
  registerDocs(app);
  registerConsole(app);
  for (const op of operations) registerOperation(app, op, renderError);
  registerMethodNotAllowed(app, { metrics: deps.metrics !== undefined });

  app.notFound(function notFound(c) {
    return renderProblem(c, nothingAt(c.req.path));
  });
  app.onError(renderError);
  if (deps.tracer !== undefined || (deps.corsOrigins !== undefined && deps.corsOrigins.length > 0)) return app;
  const compiled = compileOperations(operations, {
    deps,
    validators,
    ...(deps.metrics ? { metrics: deps.metrics.collector } : {}),
    timeoutFor: (path) => timeouts.get(path) ?? timeoutMs,
    renderError,
  });
  return Object.assign(app, { compiled });
}

/** How the service answers an error: an ApiError as its problem; the database gone, 503; anything else, 500. */
export function errorRenderer(deps: AppDeps): ErrorHandler<AppEnv> {
  return function onError(error, c) {
    if (error instanceof ApiError) return renderProblem(c, error);
    // A deadlock or serialization failure the unit of work's retries did not get past (or one in
    // a write outside it): the transaction was rolled back, so a 409 the client may retry.
    if (isWriteCollision(error)) {
      (c.get('log') ?? deps.logger).warn({ err: describeError(error) }, 'write collided with concurrent writes');
      return renderProblem(c, writeConflict(error));
    }
    if (isDatabaseUnavailable(error)) {
      (c.get('log') ?? deps.logger).warn({ err: describeError(error) }, 'database unavailable');
      return renderProblem(c, serviceUnavailable('The database is unavailable; try again shortly.'));
    }
    (c.get('log') ?? deps.logger).error({ err: describeError(error) }, 'unhandled error');
    return renderProblem(c, internalError());
  };
}
