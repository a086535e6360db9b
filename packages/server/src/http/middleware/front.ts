import type { Context, ErrorHandler, MiddlewareHandler } from 'hono';
import { matchedRoutes } from 'hono/route';
import type { Validators } from '../../contract/validation.ts';
import { ApiError } from '../../errors.ts';
import type { Metrics } from '../../ops/metrics.ts';
import type { AppDeps, AppEnv } from '../context.ts';
import { renderProblem } from '../errors.ts';
import { accessLogger, logAccess } from './access-log.ts';
import { withDeadline } from './deadline.ts';
import { parseTraceparent, type RequestFields, requestIdFrom, requestLog } from './request-id.ts';

export interface FrontOptions {
  deps: AppDeps;
  /** Absent in unit tests whose app provides them already. */
  validators?: Validators;
  /** listedOriginsCors, for /api/* (CORS_ORIGINS): a preflight it answers goes no further. */
  cors?: MiddlewareHandler<AppEnv>;
  /** Counts every request but a preflight, by route pattern (METRICS_TOKEN). */
  metrics?: Metrics;
  /** The deadline of an /api/* request (see deadline.ts); none when absent. */
  timeoutFor?: (path: string) => number;
  /** How the app renders an error: the deadline's 503 is rendered here, where it is thrown. */
  onError?: ErrorHandler<AppEnv>;
}

/** The paths of the API: Hono's `/api/*` (which takes `/api` too), on the decoded path. */
const API_PATH = /^\/api(?:\/|$)/;

const renderApiError: ErrorHandler<AppEnv> = (error, c) => {
  if (error instanceof ApiError) return renderProblem(c, error);
  throw error;
};

/**
 * What every request passes through before its route, in one step rather than six middleware
 * frames (issue 33: each `await next()` was a measurable part of a read's cost), in the order the
 * separate middlewares had: the dependencies; the request id and the request's logger
 * (request-id.ts); the access-log line (access-log.ts); CORS on /api/*, whose preflights are
 * neither counted nor marked no-store; the request metrics; `Cache-Control: no-store` on /api/*;
 * the deadline on /api/* (deadline.ts), whose 503 is rendered where it is thrown, as Hono renders
 * an error thrown by a middleware, so that the steps around it see the answer it made.
 */
export function front(options: FrontOptions): MiddlewareHandler<AppEnv> {
  const { deps, validators, cors, metrics, timeoutFor } = options;
  const onError = options.onError ?? renderApiError;
  const accessLog = accessLogger(deps.logger);
  return async function frontStep(c, next) {
    const started = performance.now();
    c.set('deps', deps);
    if (validators !== undefined) c.set('validators', validators);
    const requestId = requestIdFrom(c.req.header('x-request-id'));
    const trace = parseTraceparent(c.req.header('traceparent'));
    const fields: RequestFields = trace === undefined ? { requestId } : { requestId, ...trace };
    c.set('requestId', requestId);
    c.set('log', requestLog(deps.logger, fields));
    const api = API_PATH.test(c.req.path);

    let route: string | undefined;
    const rest = async (): Promise<void> => {
      if (api && timeoutFor !== undefined) {
        try {
          await withDeadline(c, timeoutFor(c.req.path), next);
        } catch (error) {
          if (!(error instanceof Error)) throw error;
          c.error = error;
          c.res = await onError(error, c);
        }
      } else {
        await next();
      }
      if (api) c.res.headers.set('Cache-Control', 'no-store');
      // The route pattern, never the raw path: a bounded set of label values.
      route = routeOf(c, api, frontStep);
      metrics?.observeRequest(c.req.method, route, c.res.status, (performance.now() - started) / 1000);
    };
    if (api && cors !== undefined) {
      const answer = await cors(c, rest);
      // As Hono's compose: an answer the middleware returns (a preflight's) is the request's.
      if (answer instanceof Response && !c.finalized) c.res = answer;
    } else {
      await rest();
    }

    await logAccess(c, started, fields, route ?? routeOf(c, api, frontStep), accessLog);
    c.res.headers.set('X-Request-Id', requestId);
    c.res.headers.set('X-Content-Type-Options', 'nosniff');
  };
}

/**
 * The route pattern that answered: when no route did (a 404, a preflight), the catch-all of the
 * last middleware that ran, `/api/*` under the API, as when these steps were separate middlewares.
 */
function routeOf(c: Context<AppEnv>, api: boolean, frontStep: MiddlewareHandler<AppEnv>): string {
  const route = matchedRoutes(c)[c.req.routeIndex];
  return api && route?.handler === frontStep ? '/api/*' : (route?.path ?? '');
}
