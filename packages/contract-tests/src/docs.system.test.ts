// The contract as the server serves it, and the reference page in a real browser: all four
// operations and the error model shown, and no request leaving the server.
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { get, type IncomingHttpHeaders } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { brotliDecompressSync, gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { chromiumUnavailable, launchChromium } from './browser/chromium.ts';
import { SPEC_FILE } from './spec-check.ts';
import { embeddedServer, type Target } from './targets.ts';

// UPDATE_SCREENSHOTS=1 refreshes the README's picture; otherwise the screenshot goes to a temporary folder.
const SCREENSHOT = process.env.UPDATE_SCREENSHOTS
  ? fileURLToPath(new URL('../../../docs/api-reference.png', import.meta.url))
  : join(tmpdir(), `ua-api-reference-${process.pid}.png`);

let target: Target;
beforeAll(async () => {
  target = await embeddedServer();
});
afterAll(async () => {
  await target?.close();
  // The temporary screenshot is not left behind (a refreshed README picture is).
  if (!process.env.UPDATE_SCREENSHOTS) rmSync(SCREENSHOT, { force: true });
});

describe('the contract, served', () => {
  it('serves /openapi.yaml as the repository holds it, and /openapi.json as the same document', async () => {
    const yaml = await fetch(`${target.baseUrl}/openapi.yaml`);
    expect(yaml.headers.get('content-type')).toMatch(/^application\/yaml/);
    expect(await yaml.text()).toBe(readFileSync(SPEC_FILE, 'utf8'));
    const json = await fetch(`${target.baseUrl}/openapi.json`);
    expect(await json.json()).toEqual(parse(readFileSync(SPEC_FILE, 'utf8')));
  });
});

/** A GET as the bytes arrive (fetch would decompress them), with these request headers. */
function raw(
  path: string,
  headers: Record<string, string>,
): Promise<{ status: number; headers: IncomingHttpHeaders; body: Buffer }> {
  return new Promise((resolve, reject) => {
    get(`${target.baseUrl}${path}`, { headers }, (res) => {
      const chunks: Buffer[] = [];
      res.on('data', (chunk: Buffer) => chunks.push(chunk));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', reject);
    }).on('error', reject);
  });
}

describe('/docs/scalar.js (4.3 MB)', () => {
  it('is sent brotli- or gzip-compressed as the client accepts, far smaller, decompressing to the same bytes', async () => {
    const plain = await raw('/docs/scalar.js', { 'Accept-Encoding': 'identity' });
    expect(plain.status).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body.length).toBeGreaterThan(4_000_000);

    const br = await raw('/docs/scalar.js', { 'Accept-Encoding': 'gzip, deflate, br, zstd' }); // Chromium's
    expect(br.headers['content-encoding']).toBe('br');
    expect(br.body.length).toBeLessThan(plain.body.length / 3);
    expect(brotliDecompressSync(br.body).equals(plain.body)).toBe(true);

    const gzip = await raw('/docs/scalar.js', { 'Accept-Encoding': 'br;q=0, gzip' });
    expect(gzip.headers['content-encoding']).toBe('gzip');
    expect(gzip.body.length).toBeLessThan(plain.body.length / 3);
    expect(gunzipSync(gzip.body).equals(plain.body)).toBe(true);

    expect(
      (await raw('/docs/scalar.js', { 'Accept-Encoding': 'gzip;q=0.5, br;q=0.9' })).headers['content-encoding'],
    ).toBe('br');
    expect((await raw('/docs/scalar.js', {})).headers['content-encoding']).toBeUndefined();

    for (const answer of [plain, br, gzip]) {
      expect(answer.headers['content-type']).toBe('text/javascript; charset=utf-8');
      expect(answer.headers.vary).toBe('Accept-Encoding');
      expect(answer.headers['cache-control']).toBe('public, max-age=3600');
      expect(answer.headers.etag).toMatch(/^"[A-Za-z0-9_-]+"$/); // strong
    }
    // Each encoding is its own representation, with its own strong tag.
    expect(new Set([plain, br, gzip].map((a) => a.headers.etag)).size).toBe(3);
  });

  it('answers 304 without a body to If-None-Match with the tag the client holds', async () => {
    const first = await raw('/docs/scalar.js', { 'Accept-Encoding': 'br' });
    const tag = first.headers.etag!;
    const again = await raw('/docs/scalar.js', { 'Accept-Encoding': 'br', 'If-None-Match': tag });
    expect(again.status).toBe(304);
    expect(again.body.length).toBe(0);
    expect(again.headers.etag).toBe(tag);
    expect(again.headers.vary).toBe('Accept-Encoding');
    expect(again.headers['cache-control']).toBe('public, max-age=3600');

    expect((await raw('/docs/scalar.js', { 'Accept-Encoding': 'br', 'If-None-Match': `W/${tag}, "x"` })).status).toBe(
      304,
    );
    expect((await raw('/docs/scalar.js', { 'Accept-Encoding': 'br', 'If-None-Match': '"stale"' })).status).toBe(200);
    // A tag of another encoding is another representation: the client gets this one in full.
    const plain = await raw('/docs/scalar.js', { 'Accept-Encoding': 'identity', 'If-None-Match': tag });
    expect(plain.status).toBe(200);
    expect(plain.headers['content-encoding']).toBeUndefined();
  });

  it('leaves the Content-Security-Policy of /docs as it was', async () => {
    const page = await fetch(`${target.baseUrl}/docs`);
    expect(page.headers.get('content-security-policy')).toBe(
      "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; " +
        "font-src 'self' data:; connect-src 'self'; frame-ancestors 'none'",
    );
  });
});

const unavailable = chromiumUnavailable();
if (unavailable) console.warn(`\n[contract-tests] browser tests SKIPPED: ${unavailable}\n`);

describe.skipIf(unavailable !== undefined)('/docs in Chromium', () => {
  it('shows the four operations and the error model, offline: no request leaves the server', async () => {
    const browser = await launchChromium();
    try {
      const page = await browser.newPage({ viewport: { width: 1280, height: 900 } });
      const elsewhere: string[] = [];
      page.on('request', (request) => {
        const url = request.url();
        if (!url.startsWith(target.baseUrl) && !url.startsWith('data:') && !url.startsWith('blob:'))
          elsewhere.push(url);
      });
      const errors: string[] = [];
      page.on('pageerror', (error) => errors.push(error.message));
      page.on('console', (message) => void (message.type() === 'error' && errors.push(message.text())));
      const response = await page.goto(`${target.baseUrl}/docs`);
      expect(response?.status()).toBe(200);
      const shows = (text: string) =>
        // biome-ignore lint/performance/useDomNodeTextContent: what is shown, not what is in the DOM
        page.waitForFunction((t) => document.body.innerText.includes(t), text, { timeout: 20_000 });
      for (const text of ['Get one account', 'Create an account', 'Update an account profile', 'Delete an account'])
        await shows(text);
      // The error model: the Problem schema, with its stable codes.
      await page.getByText('Models', { exact: true }).first().click();
      await shows('Problem');
      await page.getByText('Problem', { exact: true }).first().click();
      await shows('requestId');
      await shows('invalid_json'); // the first of its stable codes
      mkdirSync(join(SCREENSHOT, '..'), { recursive: true });
      await page.screenshot({ path: SCREENSHOT });
      expect(elsewhere).toEqual([]);
      expect(errors).toEqual([]);
    } finally {
      await browser.close();
    }
  }, 180_000);
});
