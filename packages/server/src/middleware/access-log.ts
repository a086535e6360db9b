import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../context.ts';

/** One log line per request. Never the body, the query or a header value: they may hold secrets. */
export function accessLog(): MiddlewareHandler<AppEnv> {
  return async function accessLogMiddleware(c, next) {
    const started = performance.now();
    await next();
    c.get('log').info(
      {
        method: c.req.method,
        route: c.req.routePath,
        status: c.res.status,
        durationMs: Math.round((performance.now() - started) * 100) / 100,
      },
      'request',
    );
  };
}
