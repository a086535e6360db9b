import { type Handler, Hono, type MiddlewareHandler } from 'hono';
import { traceRequests } from '../ops/tracing.ts';
import type { AppDeps, AppEnv } from './context.ts';
import { ApiError, describeError, isDatabaseUnavailable, renderProblem, serviceUnavailable } from './errors.ts';
import { accessLog } from './middleware/access-log.ts';
import { auditWrites } from './middleware/audit.ts';
import { requireScope, requireToken } from './middleware/auth.ts';
import { listedOriginsCors } from './middleware/cors.ts';
import { deadline } from './middleware/deadline.ts';
import { idempotencyKey, idempotent } from './middleware/idempotency.ts';
import { jsonBody } from './middleware/json-body.ts';
import { rateLimit } from './middleware/rate-limit.ts';
import { requestId } from './middleware/request-id.ts';
import type { Operation } from './operation.ts';
import { allowedMethods, operationPaths, operations } from './operations.ts';
import { registerConsole } from './routes/console.ts';
import { registerDocs } from './routes/docs.ts';
import { registerHealth } from './routes/health.ts';
import { registerMetrics } from './routes/metrics.ts';
import { compileValidators, type Validators } from './validation.ts';

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
 * Every other method on a path of the table: 405 with `Allow` (the mock answers the same). Not
 * hono/method-not-allowed: it reads every route, so POST /healthz would turn from 404 into 405.
 */
export function registerMethodNotAllowed(app: Hono<AppEnv>): void {
  for (const path of operationPaths()) {
    const allow = allowedMethods(path).join(', ');
    app.all(path, function methodNotAllowed(c) {
      throw new ApiError(405, 'method_not_allowed', `${c.req.method} is not allowed here; use ${allow}.`, {
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
function registerOperation(app: Hono<AppEnv>, op: Operation<unknown>): void {
  const chain: MiddlewareHandler<AppEnv>[] = [requireToken(), rateLimit(op.budget)];
  if (op.writes !== undefined) chain.push(auditWrites(op.writes));
  chain.push(requireScope(op.scope));
  if ('body' in op.request) chain.push(jsonBody(op.bulk?.bodyBytes));
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

/** Hands every request what the handlers and middleware read from the context. */
export function provideDeps(deps: AppDeps, validators: Validators): MiddlewareHandler<AppEnv> {
  return async function provideDepsMiddleware(c, next) {
    c.set('deps', deps);
    c.set('validators', validators);
    await next();
  };
}

/** Builds the HTTP application. Importing this module, or calling it, opens and starts nothing. */
export function createApp(deps: AppDeps): Hono<AppEnv> {
  const validators = compileValidators();
  const app = new Hono<AppEnv>();

  // Only when tracing is on (decided at start): otherwise no middleware, no cost.
  if (deps.tracer !== undefined) app.use(traceRequests(deps.tracer));
  app.use(provideDeps(deps, validators));
  app.use(requestId());
  app.use(accessLog());
  if (deps.corsOrigins && deps.corsOrigins.length > 0) {
    // Before authentication: a preflight carries no token.
    app.use('/api/*', listedOriginsCors(deps.corsOrigins, CORS));
  }
  if (deps.metrics) {
    const { collector } = deps.metrics;
    app.use(async function countRequests(c, next) {
      const started = performance.now();
      await next();
      // The route pattern, never the raw path: a bounded set of label values.
      collector.observeRequest(c.req.method, c.req.routePath, c.res.status, (performance.now() - started) / 1000);
    });
  }
  app.use('/api/*', async function noStore(c, next) {
    await next();
    c.res.headers.set('Cache-Control', 'no-store');
  });
  const timeoutMs = deps.requestTimeoutMs ?? DEFAULT_REQUEST_TIMEOUT_MS;
  // import's longer deadline; a long-poll's wait on top of the usual one.
  const timeouts = new Map(
    operations.map((op) => [op.path, Math.max(timeoutMs, op.bulk?.timeoutMs ?? 0, timeoutMs + (op.waitsMs ?? 0))]),
  );
  app.use(
    '/api/*',
    deadline((path) => timeouts.get(path) ?? timeoutMs),
  );

  registerHealth(app);
  registerMetrics(app);
  registerDocs(app);
  registerConsole(app);
  for (const op of operations) registerOperation(app, op);
  registerMethodNotAllowed(app);

  app.notFound(function notFound(c) {
    return renderProblem(c, new ApiError(404, 'not_found', `There is nothing at ${c.req.path}.`));
  });
  app.onError(function onError(error, c) {
    if (error instanceof ApiError) return renderProblem(c, error);
    if (isDatabaseUnavailable(error)) {
      (c.get('log') ?? deps.logger).warn({ err: describeError(error) }, 'database unavailable');
      return renderProblem(c, serviceUnavailable('The database is unavailable; try again shortly.'));
    }
    (c.get('log') ?? deps.logger).error({ err: describeError(error) }, 'unhandled error');
    return renderProblem(
      c,
      new ApiError(500, 'internal_error', 'An unexpected error occurred. Quote the requestId when reporting it.'),
    );
  });
  return app;
}
