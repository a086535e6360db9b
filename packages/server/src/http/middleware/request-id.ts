import type { MiddlewareHandler } from 'hono';
import { uuidv7 } from '../../accounts/ids.ts';
import type { AppEnv } from '../context.ts';

const SANE = /^[A-Za-z0-9._:-]{1,128}$/;
// W3C Trace Context: version-traceid-parentid-flags, lower-case hex; all-zero ids are invalid.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The trace and parent span of a valid `traceparent`, or nothing (an invalid one is ignored, as the spec says). */
export function parseTraceparent(header: string | undefined): { traceId: string; parentId: string } | undefined {
  const m = header === undefined ? null : TRACEPARENT.exec(header.trim());
  if (m === null || m[1] === 'ff' || (m[1] === '00' && m[5] !== undefined)) return undefined;
  if (/^0+$/.test(m[2]!) || /^0+$/.test(m[3]!)) return undefined;
  return { traceId: m[2]!, parentId: m[3]! };
}

/** The caller's X-Request-Id when it is sane (no header injection, bounded), else a new one. */
export function requestIdFrom(given: string | undefined): string {
  return given !== undefined && SANE.test(given) ? given : uuidv7();
}

/**
 * Keeps the caller's X-Request-Id when it is sane, else makes one, and gives the request a logger
 * that puts it, and the caller's W3C trace, on every line. Not hono/request-id: it refuses the `.`
 * and `:` the spec allows (its rule is [\w=-], up to 255), and it sets no logger.
 */
export function requestId(): MiddlewareHandler<AppEnv> {
  return async function requestIdMiddleware(c, next) {
    const id = requestIdFrom(c.req.header('x-request-id'));
    c.set('requestId', id);
    c.set('log', c.get('deps').logger.child({ requestId: id, ...parseTraceparent(c.req.header('traceparent')) }));
    await next();
    c.res.headers.set('X-Request-Id', id);
    c.res.headers.set('X-Content-Type-Options', 'nosniff');
  };
}
