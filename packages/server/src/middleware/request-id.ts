import type { MiddlewareHandler } from 'hono';
import { uuidv7 } from '../ids.ts';
import type { AppEnv } from '../context.ts';

const SANE = /^[A-Za-z0-9._:-]{1,128}$/;

/** Keeps the caller's X-Request-Id when it is sane (no header injection, bounded), else makes one. */
export function requestId(): MiddlewareHandler<AppEnv> {
  return async function requestIdMiddleware(c, next) {
    const given = c.req.header('x-request-id');
    const id = given !== undefined && SANE.test(given) ? given : uuidv7();
    c.set('requestId', id);
    await next();
    c.res.headers.set('X-Request-Id', id);
    c.res.headers.set('X-Content-Type-Options', 'nosniff');
  };
}
