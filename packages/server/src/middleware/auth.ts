import type { MiddlewareHandler } from 'hono';
import { ApiError } from '../errors.ts';
import type { AppEnv } from '../context.ts';

const unauthorized = () =>
  new ApiError(401, 'unauthorized', 'A valid API token is required in the Authorization header.', {
    headers: { 'WWW-Authenticate': 'Bearer realm="user-accounts"' },
  });

/** `Authorization: <token>` (as in the original interface) or `Authorization: Bearer <token>`. */
export function requireToken(): MiddlewareHandler<AppEnv> {
  return async function requireTokenMiddleware(c, next) {
    const header = c.req.header('authorization')?.trim() ?? '';
    const token = header.replace(/^bearer\s+/i, '');
    // Missing, malformed, unknown: one answer, so a caller learns nothing about which it was.
    if (token === '' || token.length > 512 || !(await c.get('deps').tokens.verify(token))) {
      throw unauthorized();
    }
    await next();
  };
}
