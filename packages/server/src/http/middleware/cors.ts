import type { MiddlewareHandler } from 'hono';
import { cors } from 'hono/cors';
import type { AppEnv } from '../context.ts';
import { allowedMethods, operationPaths } from '../operations.ts';

export interface CorsHeaders {
  allowHeaders: string[];
  exposeHeaders: string[];
  maxAge: number;
}

/**
 * CORS for the listed origins only. A preflight (OPTIONS with an Origin and an
 * Access-Control-Request-Method) is answered 204 only for a listed origin on a path of the
 * operation table, naming that path's methods; any other OPTIONS goes on to the routes, which
 * answer it as any other method (405 with Allow on an operation's path, 404 elsewhere), as they
 * would with CORS off. Other requests from a listed origin may read their answer; from any other
 * origin, the browser refuses it.
 */
export function listedOriginsCors(origins: Iterable<string>, headers: CorsHeaders): MiddlewareHandler<AppEnv> {
  const listed = new Set(origins);
  const paths = new Set(operationPaths());
  const corsHeaders = cors({
    ...headers,
    origin: (origin) => (listed.has(origin) ? origin : null),
    allowMethods: (_, c) => allowedMethods(c.req.path),
  });
  return async function listedOriginsCorsMiddleware(c, next) {
    const preflight =
      c.req.method === 'OPTIONS' &&
      c.req.header('access-control-request-method') !== undefined &&
      listed.has(c.req.header('origin') ?? '') &&
      paths.has(c.req.path);
    if (c.req.method === 'OPTIONS' && !preflight) return next();
    return corsHeaders(c, next);
  };
}
