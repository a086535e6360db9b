// /console as the server serves it, from a folder of the test's own: what a fresh clone without
// the console built answers, the page's CSP, and the assets (compressed, cached for good, and
// nothing outside assets/).
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';
import { brotliDecompressSync } from 'node:zlib';
import { Hono } from 'hono';
import { afterAll, describe, expect, it } from 'vitest';
import type { AppEnv } from '../context.ts';
import { CONSOLE_CSP, registerConsole } from './console.ts';

const folders: string[] = [];
afterAll(() => {
  for (const folder of folders) rmSync(folder, { recursive: true, force: true });
});

function consoleApp(files: Record<string, string>) {
  const dir = mkdtempSync(join(tmpdir(), 'ua-console-'));
  folders.push(dir);
  for (const [name, text] of Object.entries(files)) {
    mkdirSync(join(dir, name, '..'), { recursive: true });
    writeFileSync(join(dir, name), text);
  }
  const app = new Hono<AppEnv>();
  registerConsole(app, pathToFileURL(`${dir}/`));
  return app;
}

const SCRIPT = `console.log(${JSON.stringify('the console '.repeat(100))});`;
const built = () =>
  consoleApp({
    'index.html':
      '<!doctype html><title>Accounts console</title><script type="module" src="/console/assets/index-abc.js"></script>',
    'assets/index-abc.js': SCRIPT,
    'assets/notes.txt': 'not an asset type',
    'secret.js': 'outside assets/',
    'assets/.hidden.js': 'a dot file',
  });

describe('/console', () => {
  it('says how to build it when it is not built (503), under the same CSP', async () => {
    const response = await consoleApp({}).request('/console');
    expect(response.status).toBe(503);
    expect(await response.text()).toContain('./pnpmw --filter @user-accounts/console build');
    expect(response.headers.get('content-security-policy')).toBe(CONSOLE_CSP);
  });

  it('serves the page at /console and /console/ with a CSP of this origin only, never cached stale', async () => {
    for (const path of ['/console', '/console/']) {
      const response = await built().request(path);
      expect(response.status).toBe(200);
      expect(await response.text()).toContain('<title>Accounts console</title>');
      expect(response.headers.get('cache-control')).toBe('no-cache');
      expect(response.headers.get('referrer-policy')).toBe('no-referrer');
      const csp = response.headers.get('content-security-policy')!;
      expect(csp.split('; ')).toEqual(
        expect.arrayContaining([
          "default-src 'none'",
          "script-src 'self'",
          "connect-src 'self'",
          "frame-ancestors 'none'",
        ]),
      );
      expect(csp).not.toMatch(/unsafe|\*|https?:/);
    }
  });

  it('serves an asset compressed as asked, with a strong ETag, cached for good', async () => {
    const app = built();
    const br = await app.request('/console/assets/index-abc.js', { headers: { 'Accept-Encoding': 'gzip, br' } });
    expect(br.status).toBe(200);
    expect(br.headers.get('content-encoding')).toBe('br');
    expect(br.headers.get('content-type')).toBe('text/javascript; charset=utf-8');
    expect(br.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
    expect(brotliDecompressSync(Buffer.from(await br.arrayBuffer())).toString()).toBe(SCRIPT);
    const plain = await app.request('/console/assets/index-abc.js');
    expect(plain.headers.get('content-encoding')).toBeNull();
    expect(await plain.text()).toBe(SCRIPT);
    const again = await app.request('/console/assets/index-abc.js', {
      headers: { 'If-None-Match': plain.headers.get('etag')! },
    });
    expect(again.status).toBe(304);
  });

  it.each([
    ['a missing asset', '/console/assets/index-zzz.js'],
    ['a file of no asset type', '/console/assets/notes.txt'],
    ['a file outside assets/', '/console/assets/..%2Fsecret.js'],
    ['a dot file', '/console/assets/.hidden.js'],
  ])('answers %s with 404', async (_, path) => {
    expect((await built().request(path)).status).toBe(404);
  });
});
