import { JWKS_MAX_AGE_SECONDS } from '../../sessions/signing-keys.ts';
import type { App } from '../context.ts';

export const JWKS_PATH = '/.well-known/jwks.json';
const CACHE_CONTROL = `public, max-age=${JWKS_MAX_AGE_SECONDS}`;
const NONE = { keys: [], etag: '"none"' };

/** An If-None-Match list naming `etag` (weakly compared, RFC 9110 §13.1.2), or `*`. */
function matches(header: string | undefined, etag: string): boolean {
  if (header === undefined) return false;
  return header.split(',').some((tag) => {
    const t = tag.trim();
    return t === '*' || t.replace(/^W\//, '') === etag;
  });
}

/**
 * GET /.well-known/jwks.json: the public keys of sessions' access tokens (sessions/signing-keys.ts),
 * for verifiers; no token needed, cacheable for JWKS_MAX_AGE_SECONDS, 304 for its ETag.
 */
export function registerJwks(app: App): void {
  app.get(JWKS_PATH, async function getJwks(c) {
    const published = (await c.get('deps').accessTokens.publishedKeys?.()) ?? NONE;
    const headers = { 'Cache-Control': CACHE_CONTROL, ETag: published.etag };
    if (matches(c.req.header('if-none-match'), published.etag)) return c.body(null, 304, headers);
    return c.json({ keys: published.keys }, 200, headers);
  });
}
