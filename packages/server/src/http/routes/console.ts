// /console: the accounts console (packages/console), a page of this server that is a client of
// the public API and nothing else. Its files are served from CONSOLE_DIR as Vite built them;
// the page's CSP allows only this origin, so the token it holds can be sent nowhere else.
import { existsSync, readFileSync } from 'node:fs';
import type { Context } from 'hono';
import { etag } from 'hono/etag';
import { CONSOLE_DIR } from '../../resources.ts';
import type { App, AppEnv } from '../context.ts';
import { precompressed, sendCompressed } from './docs.ts';

export const CONSOLE_CSP = [
  "default-src 'none'",
  "script-src 'self'",
  "style-src 'self'",
  "img-src 'self' data:",
  "connect-src 'self'",
  "base-uri 'none'",
  "form-action 'self'",
  "frame-ancestors 'none'",
].join('; ');

const PAGE_HEADERS = {
  'Content-Security-Policy': CONSOLE_CSP,
  'Referrer-Policy': 'no-referrer',
  'X-Content-Type-Options': 'nosniff',
  // The page names its assets by their hash: a new build is seen at the next load.
  'Cache-Control': 'no-cache',
};

// What a server started from a fresh clone without the console built says (`pnpm start` builds it first).
const NOT_BUILT = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>Accounts console: not built</title></head>
<body><main><h1>The console is not built</h1>
<p>Build it with <code>./pnpmw --filter @user-accounts/console build</code> and reload this page
(<code>./pnpmw start</code> builds it before it starts the server).</p></main></body></html>
`;

const TYPES: Record<string, string> = {
  js: 'text/javascript; charset=utf-8',
  css: 'text/css; charset=utf-8',
  svg: 'image/svg+xml',
  woff2: 'font/woff2',
};

/** `dir`: where the built console is (CONSOLE_DIR; a test's own folder). */
export function registerConsole(app: App, dir: URL = CONSOLE_DIR): void {
  // One compressor per asset: Vite names each by its content, so a name never changes its bytes.
  const assets = new Map<string, ReturnType<typeof precompressed>>();
  const page = (c: Context<AppEnv>) => {
    const index = new URL('index.html', dir);
    if (!existsSync(index)) return c.html(NOT_BUILT, 503, PAGE_HEADERS);
    return c.html(readFileSync(index, 'utf8'), 200, PAGE_HEADERS);
  };
  app.get('/console', page);
  app.get('/console/', page);
  app.get('/console/assets/:file{[A-Za-z0-9_.-]+}', etag(), async (c) => {
    const name = c.req.param('file');
    const type = TYPES[name.slice(name.lastIndexOf('.') + 1)];
    const file = new URL(`assets/${name}`, dir);
    if (type === undefined || name.startsWith('.') || !existsSync(file)) return c.notFound();
    let asset = assets.get(name);
    if (asset === undefined) {
      asset = precompressed(file);
      assets.set(name, asset);
    }
    return sendCompressed(c, asset, {
      'Content-Type': type,
      'Cache-Control': 'public, max-age=31536000, immutable',
      'X-Content-Type-Options': 'nosniff',
    });
  });
}
