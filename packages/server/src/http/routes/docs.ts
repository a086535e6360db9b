// The contract as the server holds it (/openapi.yaml, /openapi.json) and a browsable reference
// (/docs) that works offline: every asset comes from this server, and the page's CSP forbids
// anything else, so no font, script or beacon is fetched from elsewhere.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { promisify } from 'node:util';
import { brotliCompress, constants, gzip } from 'node:zlib';
import type { Context } from 'hono';
import { accepts } from 'hono/accepts';
import { etag } from 'hono/etag';
import { loadSpec } from '../../contract/spec.ts';
import { SCALAR_JS, SPEC_PATH } from '../../resources.ts';
import type { App } from '../context.ts';

const PAGE = `<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>user-accounts API reference</title>
<link rel="icon" href="data:,">
</head>
<body>
<div id="app"></div>
<script src="/docs/scalar.js"></script>
<script src="/docs/init.js"></script>
</body>
</html>
`;

// Scalar's options: our own spec, no fonts from its CDN, no telemetry, no links out to its services.
// Its Test Request goes to this page's own origin: the spec's servers (a local server on :3000,
// the mock on :4010) are other origins, which the CSP's connect-src refuses, and seldom the
// server that is serving this page.
const INIT = `Scalar.createApiReference('#app', {
  url: '/openapi.json',
  servers: [{ url: location.origin, description: 'This server' }],
  withDefaultFonts: false,
  telemetry: false,
  hideClientButton: true,
  showDeveloperTools: 'never',
  agent: { disabled: true },
  mcp: { disabled: true },
});
// Scalar's token field shows a made-up token as its placeholder (base64 of a joke), which reads
// like a real one that could be pasted: say what goes there instead.
new MutationObserver(() => {
  for (const input of document.querySelectorAll('input[placeholder="QUxMIFlPVVIgQkFTRSBBUkUgQkVMT05HIFRPIFVT"]')) {
    input.placeholder = 'your API token: ua_…, on a dev server the one in data/dev-token';
  }
}).observe(document.documentElement, { subtree: true, childList: true });
`;

const CSP = [
  "default-src 'self'",
  "script-src 'self'",
  "style-src 'self' 'unsafe-inline'", // Scalar injects its styles at run time
  "img-src 'self' data:",
  "font-src 'self' data:",
  "connect-src 'self'",
  "frame-ancestors 'none'",
].join('; ');

export type Encoding = 'br' | 'gzip' | 'identity';

const compressors = {
  // Quality 5: 1.09 MB in 0.3 s here; quality 11 saves another 0.15 MB but takes 20 s.
  br: (bytes: Buffer) =>
    promisify(brotliCompress)(bytes, {
      params: {
        [constants.BROTLI_PARAM_QUALITY]: 5,
        [constants.BROTLI_PARAM_MODE]: constants.BROTLI_MODE_TEXT,
        [constants.BROTLI_PARAM_SIZE_HINT]: bytes.length,
      },
    }),
  gzip: (bytes: Buffer) => promisify(gzip)(bytes, { level: 6 }),
};

type Variant = { body: Uint8Array<ArrayBuffer>; etag: string };

/**
 * A large file that never changes while the server runs, in each encoding a client may ask for:
 * compressed at its first request (on libuv's threads, not the event loop) and kept. Each
 * encoding is its own representation, so each has its own strong ETag.
 */
export function precompressed(path: URL): (encoding: Encoding) => Promise<Variant> {
  const variants = new Map<Encoding, Promise<Variant>>();
  let raw: { bytes: Buffer; hash: string } | undefined;
  return (encoding) => {
    let variant = variants.get(encoding);
    if (variant === undefined) {
      if (raw === undefined) {
        const bytes = readFileSync(path);
        raw = { bytes, hash: createHash('sha256').update(bytes).digest('base64url').slice(0, 27) };
      }
      const { bytes, hash } = raw;
      const etag = encoding === 'identity' ? `"${hash}"` : `"${hash}-${encoding}"`;
      variant = (encoding === 'identity' ? Promise.resolve(bytes) : compressors[encoding](bytes)).then((body) => ({
        // Node's buffers sit on plain ArrayBuffers; the cast saves a copy of each.
        body: new Uint8Array(body.buffer as ArrayBuffer, body.byteOffset, body.byteLength),
        etag,
      }));
      variants.set(encoding, variant);
      variant.catch(() => variants.delete(encoding));
    }
    return variant;
  };
}

/** brotli over gzip when the client takes both at the same weight; identity when it takes neither. */
export function preferredEncoding(accepted: { type: string; q: number }[]): Encoding {
  const weight = (name: string) =>
    accepted.find((a) => a.type.toLowerCase() === name)?.q ?? accepted.find((a) => a.type === '*')?.q ?? 0;
  const best = (['br', 'gzip'] as const).reduce<'br' | 'gzip' | undefined>(
    (chosen, name) => (weight(name) > 0 && (chosen === undefined || weight(name) > weight(chosen)) ? name : chosen),
    undefined,
  );
  return best ?? 'identity';
}

/**
 * A precompressed asset in the encoding the client prefers, with its ETag (the route's etag()
 * middleware answers 304 to a matching If-None-Match) and these headers.
 */
export async function sendCompressed(
  c: Context,
  asset: (encoding: Encoding) => Promise<Variant>,
  headers: Record<string, string>,
): Promise<Response> {
  const encoding = accepts(c, {
    header: 'Accept-Encoding',
    supports: ['br', 'gzip'],
    default: 'identity',
    match: preferredEncoding,
  }) as Encoding;
  const { body, etag: tag } = await asset(encoding);
  const all: Record<string, string> = { ...headers, ETag: tag, Vary: 'Accept-Encoding' };
  if (encoding !== 'identity') all['Content-Encoding'] = encoding;
  return c.body(body, 200, all);
}

export function registerDocs(app: App): void {
  const scalar = precompressed(SCALAR_JS);
  const yaml = () => readFileSync(SPEC_PATH, 'utf8');

  app.get('/openapi.yaml', (c) => c.body(yaml(), 200, { 'Content-Type': 'application/yaml; charset=utf-8' }));
  app.get('/openapi.json', (c) => c.json(loadSpec(), 200));
  app.get('/docs', (c) => c.html(PAGE, 200, { 'Content-Security-Policy': CSP }));
  app.get('/docs/init.js', (c) => c.body(INIT, 200, { 'Content-Type': 'text/javascript; charset=utf-8' }));
  // 4.3 MB as it is, about 1.1 MB compressed; a browser that has it asks again with If-None-Match (304).
  app.get('/docs/scalar.js', etag(), (c) =>
    sendCompressed(c, scalar, {
      'Content-Type': 'text/javascript; charset=utf-8',
      'Cache-Control': 'public, max-age=3600',
    }),
  );
}
