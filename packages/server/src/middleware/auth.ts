import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../context.ts';
import { ApiError } from '../errors.ts';
import type { Scope } from '../tokens.ts';

const unauthorized = () =>
  new ApiError(401, 'unauthorized', 'A valid API token is required in the Authorization header.', {
    headers: { 'WWW-Authenticate': 'Bearer realm="user-accounts"' },
  });

/** `Authorization: <token>` (as in the original interface) or `Authorization: Bearer <token>`. */
export function requireToken(): MiddlewareHandler<AppEnv> {
  return async function requireTokenMiddleware(c, next) {
    const header = c.req.header('authorization')?.trim() ?? '';
    const token = header.replace(/^bearer\s+/i, '');
    // Missing, malformed, unknown, expired, revoked: one answer, so a caller learns nothing more.
    const info = token === '' || token.length > 512 ? undefined : await c.get('deps').tokens.verify(token);
    if (info === undefined) throw unauthorized();
    c.set('token', info);
    await next();
  };
}

/** 403 for a valid token without the scope; runs after the rate limit, so refusals count too. */
export function requireScope(scope: Scope): MiddlewareHandler<AppEnv> {
  return async function requireScopeMiddleware(c, next) {
    if (!c.get('token').scopes.includes(scope)) {
      throw new ApiError(403, 'forbidden', `This token does not have the ${scope} scope.`);
    }
    await next();
  };
}
