import type { MiddlewareHandler } from 'hono';
import type { TokenInfo } from '../../auth/tokens.ts';
import type { AppEnv } from '../context.ts';
import { problemCode } from '../errors.ts';

/** What a balancer or orchestrator asks every replica every few seconds. */
const HEALTH_ROUTES = new Set(['/healthz', '/readyz']);

/**
 * One log line per request, with what an operator needs to find the caller (the token's id and
 * site, as in the audit trail) and why it failed (the problem `code`). Never the body, the query,
 * a header value or the token's digest: they may hold secrets, or stand in for one.
 */
export function accessLog(): MiddlewareHandler<AppEnv> {
  return async function accessLogMiddleware(c, next) {
    const started = performance.now();
    await next();
    const durationMs = Math.round((performance.now() - started) * 100) / 100;
    // Set by requireToken, which runs after us: absent when the request never got that far.
    const token = c.get('token') as TokenInfo | undefined;
    const code = c.res.status >= 400 ? await problemCode(c) : undefined;
    // A health check that succeeds is noise at info (two a second per replica behind HAProxy);
    // one that fails is news.
    const quiet = HEALTH_ROUTES.has(c.req.routePath) && c.res.status < 400;
    c.get('log')[quiet ? 'debug' : 'info'](
      {
        method: c.req.method,
        route: c.req.routePath,
        status: c.res.status,
        durationMs,
        ...(token === undefined ? {} : { tokenId: token.id, site: token.site }),
        ...(code === undefined ? {} : { code }),
      },
      'request',
    );
  };
}
