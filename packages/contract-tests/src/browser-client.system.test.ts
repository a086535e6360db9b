// The client as frontend teams use it: a page built with Vite from the client's published build,
// in headless Chromium, doing create → get → update → delete against the real server (allowed by
// CORS_ORIGINS) and against the Prism mock; and refused by the browser when its origin is not listed.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { processes } from '@user-accounts/server/testing/processes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumUnavailable, launchChromium } from './browser/chromium.ts';
import { mockTarget, type Target } from './targets.ts';

const EXAMPLE = fileURLToPath(new URL('../../browser-example/', import.meta.url));
const CLIENT = fileURLToPath(new URL('../../client/', import.meta.url));
const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript' };
const procs = processes();
const unavailable = chromiumUnavailable();
if (unavailable) console.warn(`\n[contract-tests] browser client tests SKIPPED: ${unavailable}\n`);

describe.skipIf(unavailable !== undefined)('the client in a browser page built with Vite', () => {
  let page: Server;
  let origin: string;
  let mock: Target | undefined;

  beforeAll(async () => {
    // The client's published build first, then the page (what `pnpm --filter … build` runs).
    for (const [cwd, bin, args] of [
      [CLIENT, 'typescript/bin/tsc', ['-p', 'tsconfig.build.json']],
      [EXAMPLE, 'vite/bin/vite.js', ['build']],
    ] as const) {
      const built = spawnSync(process.execPath, [join(cwd, 'node_modules', bin), ...args], { cwd, encoding: 'utf8' });
      expect(built.status, built.stderr + built.stdout).toBe(0);
    }
    const dist = join(EXAMPLE, 'dist');
    page = createServer((request, response) => {
      const path = new URL(request.url ?? '/', 'http://x').pathname;
      const file = join(dist, path === '/' ? 'index.html' : path);
      try {
        const body = readFileSync(file);
        response.writeHead(200, { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(body);
      } catch {
        response.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => page.listen(0, '127.0.0.1', resolve));
    origin = `http://127.0.0.1:${(page.address() as AddressInfo).port}`;
  }, 120_000);
  afterAll(async () => {
    procs.cleanup();
    await mock?.close();
    await new Promise((resolve) => page?.close(resolve));
  });

  async function runPage(api: string, token: string): Promise<string[]> {
    const browser = await launchChromium();
    try {
      const tab = await browser.newPage();
      await tab.goto(`${origin}/?api=${encodeURIComponent(api)}&token=${encodeURIComponent(token)}`);
      await tab.waitForSelector('body[data-done]', { timeout: 30_000 });
      // The log as rendered, one line per answer, as the person at the page reads it.
      // biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText is the rendered text on purpose
      return (await tab.locator('#log').innerText()).trim().split('\n');
    } finally {
      await browser.close();
    }
  }

  async function serverWith(vars: Record<string, string>) {
    const dataDir = await procs.migratedDataDir();
    const server = procs.server({ DATA_DIR: dataDir, ...vars });
    await server.ready;
    return { baseUrl: server.baseUrl, token: readFileSync(join(dataDir, 'dev-token'), 'utf8').trim() };
  }

  it('against the server, with the page origin in CORS_ORIGINS: create 201, get, update, get the new name, delete', async () => {
    const server = await serverWith({ CORS_ORIGINS: `https://other.example.com,${origin}` });
    expect(await runPage(server.baseUrl, server.token)).toEqual([
      'create 201 user created',
      'get 200 From a browser',
      'update 200 user updated',
      'get 200 Renamed in a browser',
      'delete 200 user removed',
    ]);
  }, 180_000);

  it('against the server without CORS_ORIGINS (the default): the browser refuses to let the page read anything', async () => {
    const server = await serverWith({});
    const lines = await runPage(server.baseUrl, server.token);
    expect(lines).toHaveLength(1);
    // The browser hides why (CORS) and gives the page no answer: the client's TransportError.
    expect(lines[0]).toMatch(
      /^error TransportError: POST http:\/\/127\.0\.0\.1:\d+\/api\/1\/user\/create: no answer from the server \(Failed to fetch\)$/,
    );
  }, 180_000);

  it('against the Prism mock of the spec: the same calls get its documented examples', async () => {
    // The page's origin is allowed as MOCK_CORS_ORIGINS would allow it.
    mock = await mockTarget({ corsOrigins: [origin] }).start();
    // The token the page's own instructions give for the mock, as a developer copies it from there.
    const instructed = readFileSync(join(EXAMPLE, 'index.html'), 'utf8').match(/:4010&amp;token=([^<\s]+)/)?.[1];
    const lines = await runPage(mock.baseUrl, instructed ?? 'none in the page');
    expect(lines.map((l) => l.split(' ').slice(0, 2).join(' '))).toEqual([
      'create 201',
      'get 200',
      'update 200',
      'get 200',
      'delete 200',
    ]);
  }, 180_000);
});
