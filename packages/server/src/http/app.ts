import { type ErrorHandler, Hono, type MiddlewareHandler } from 'hono';
import { loadSpec } from '../contract/spec.ts';
import { compileValidators, type Validators } from '../contract/validation.ts';
import { ApiError, notFound as nothingAt } from '../errors.ts';
import type { AppDeps, AppEnv } from './context.ts';
import { asApiError, renderProblem } from './errors.ts';
import { listedOriginsCors } from './middleware/cors.ts';
import { front } from './middleware/front.ts';
import { traceRequests } from './middleware/trace-requests.ts';
import { allowedMethods, operationPaths, operations } from './operations.ts';
import { compileTable, type NodeRoutes } from './pipeline.ts';
import { registerConsole } from './routes/console.ts';
import { registerDocs } from './routes/docs.ts';
import { registerHealth } from './routes/health.ts';
import { registerJwks } from './routes/jwks.ts';
import { registerMetrics } from './routes/metrics.ts';
import { registerSsoMetadata } from './routes/sso-metadata.ts';

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
  for (const [specPath, methods] of Object.entries(loadSpec().paths)) {
    // A path parameter of the document (`/sso/{connectionId}/metadata`) is one of Hono's.
    const path = specPath.replace(/\{([^}]+)\}/g, ':$1');
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

/** Hands every request what the handlers and middleware read from the context. */
export function provideDeps(deps: AppDeps, validators: Validators): MiddlewareHandler<AppEnv> {
  return async function provideDepsMiddleware(c, next) {
    c.set('deps', deps);
    c.set('validators', validators);
    await next();
  };
}

/**
 * The application: Hono's router for what lies outside the operation table, and `operations`, the
 * table's pipeline (pipeline.ts), which serveApp asks first; the app's fetch asks it too, so that
 * a request made with `app.request()` (tests) or a target only URL parsing makes a table path of
 * is served by the same pipeline.
 */
export type ServiceApp = Hono<AppEnv> & { readonly operations: NodeRoutes };

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
  const timeoutFor = (path: string) => timeouts.get(path) ?? timeoutMs;
  const cors = deps.corsOrigins !== undefined && deps.corsOrigins.length > 0 ? deps.corsOrigins : undefined;
  const renderError = errorRenderer(deps);
  // The paths outside the table: the dependencies, request id, access log, CORS (a preflight,
  // which carries no token, is answered here), metrics, no-store and the deadline, in one step
  // (see front.ts).
  app.use(
    front({
      deps,
      validators,
      ...(cors !== undefined ? { cors: listedOriginsCors(cors, CORS) } : {}),
      ...(deps.metrics ? { metrics: deps.metrics.collector } : {}),
      timeoutFor,
      onError: renderError,
    }),
  );

  registerHealth(app);
  registerJwks(app);
  registerSsoMetadata(app);
  registerMetrics(app);
  registerDocs(app);
  registerConsole(app);
  registerMethodNotAllowed(app, { metrics: deps.metrics !== undefined });

  app.notFound(function notFound(c) {
    return renderProblem(c, nothingAt(c.req.path));
  });
  app.onError(renderError);

  const table = compileTable(operations, {
    deps,
    validators,
    ...(deps.metrics ? { metrics: deps.metrics.collector } : {}),
    timeoutFor,
    ...(cors !== undefined ? { cors: { origins: new Set(cors), exposeHeaders: CORS.exposeHeaders } } : {}),
    ...(deps.tracer !== undefined ? { tracer: deps.tracer } : {}),
  });
  const routed = app.fetch;
  // app.request() calls this.fetch: the table's rows answer there as on the server.
  app.fetch = (request, ...rest) => table.fetch(request) ?? routed(request, ...rest);
  return Object.assign(app, { operations: table.node });
}

/** How the service answers an error outside the table: see asApiError (errors.ts). */
export function errorRenderer(deps: AppDeps): ErrorHandler<AppEnv> {
  return function onError(error, c) {
    return renderProblem(c, asApiError(error, c.get('log') ?? deps.logger));
  };
}
