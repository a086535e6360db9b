// Passkeys in a real browser (issue 29, point 6): the browser example, built with Vite from the
// client's published build, registers a passkey for a new account and logs in with it without
// naming the account, in headless Chromium whose authenticator is the DevTools protocol's virtual
// one (WebAuthn.addVirtualAuthenticator: CTAP2, internal, resident keys, user verification, touched
// at once), end to end against the real server, whose relying party is set by `cli site set`
// through the running server's admin socket. A page on an origin the relying party does not list
// gets its registration refused.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { extname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClient } from '@user-accounts/client';
import { processes } from '@user-accounts/server/testing/processes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumUnavailable, launchChromium } from './browser/chromium.ts';

const EXAMPLE = fileURLToPath(new URL('../../browser-example/', import.meta.url));
const CLIENT = fileURLToPath(new URL('../../client/', import.meta.url));
const TYPES: Record<string, string> = { '.html': 'text/html', '.js': 'text/javascript' };
const procs = processes();
const unavailable = chromiumUnavailable();
if (unavailable) console.warn(`\n[contract-tests] passkey browser tests SKIPPED: ${unavailable}\n`);

/** Serves the built page; its origin is http://localhost:PORT (WebAuthn takes no IP address). */
async function servePage(dist: string): Promise<{ server: Server; origin: string }> {
  const server = createServer((request, response) => {
    const path = new URL(request.url ?? '/', 'http://x').pathname;
    const file = join(dist, path === '/' ? 'index.html' : path);
    try {
      const body = readFileSync(file);
      response.writeHead(200, { 'Content-Type': TYPES[extname(file)] ?? 'application/octet-stream' }).end(body);
    } catch {
      response.writeHead(404).end();
    }
  });
  await new Promise<void>((resolve) => server.listen(0, 'localhost', resolve));
  return { server, origin: `http://localhost:${(server.address() as AddressInfo).port}` };
}

describe.skipIf(unavailable !== undefined)('passkeys in Chromium with a virtual authenticator', () => {
  const pages: Server[] = [];
  let listed: string;
  let unlisted: string;
  let api: { baseUrl: string; token: string };

  beforeAll(async () => {
    for (const [cwd, bin, args] of [
      [CLIENT, 'typescript/bin/tsc', ['-p', 'tsconfig.build.json']],
      [EXAMPLE, 'vite/bin/vite.js', ['build']],
    ] as const) {
      const built = spawnSync(process.execPath, [join(cwd, 'node_modules', bin), ...args], { cwd, encoding: 'utf8' });
      expect(built.status, built.stderr + built.stdout).toBe(0);
    }
    const dist = join(EXAMPLE, 'dist');
    for (const page of [await servePage(dist), await servePage(dist)]) pages.push(page.server);
    listed = `http://localhost:${(pages[0]!.address() as AddressInfo).port}`;
    unlisted = `http://localhost:${(pages[1]!.address() as AddressInfo).port}`;

    const dataDir = await procs.migratedDataDir();
    const server = procs.server({ DATA_DIR: dataDir, CORS_ORIGINS: `${listed},${unlisted}` });
    await server.ready;
    api = { baseUrl: server.baseUrl, token: readFileSync(join(dataDir, 'dev-token'), 'utf8').trim() };
    // The operator's command, run through the running server (its embedded database is its own).
    const set = await procs.cli(
      ['site', 'set', '--site', 'default', '--rp-id', 'localhost', '--origins', listed, '--rp-name', 'Example'],
      { DATA_DIR: dataDir },
    );
    expect(set.code, set.stderr).toBe(0);
  }, 180_000);
  afterAll(async () => {
    procs.cleanup();
    for (const page of pages) await new Promise((resolve) => page.close(resolve));
  });

  /** Runs the example's passkey flow on `origin` with a fresh virtual authenticator: the page's log and the authenticator's credentials. */
  async function runFlow(origin: string) {
    const browser = await launchChromium();
    try {
      const tab = await browser.newPage();
      const cdp = await tab.context().newCDPSession(tab);
      await cdp.send('WebAuthn.enable');
      const { authenticatorId } = await cdp.send('WebAuthn.addVirtualAuthenticator', {
        options: {
          protocol: 'ctap2',
          transport: 'internal',
          hasResidentKey: true,
          hasUserVerification: true,
          isUserVerified: true,
          automaticPresenceSimulation: true,
        },
      });
      const query = new URLSearchParams({ api: api.baseUrl, token: api.token, flow: 'passkey' });
      await tab.goto(`${origin}/?${query}`);
      await tab.waitForSelector('body[data-done]', { timeout: 30_000 });
      // biome-ignore lint/performance/useDomNodeTextContent: Playwright's innerText is the rendered text on purpose
      const lines = (await tab.locator('#log').innerText()).trim().split('\n');
      const { credentials } = await cdp.send('WebAuthn.getCredentials', { authenticatorId });
      return { lines, credentials };
    } finally {
      await browser.close();
    }
  }

  it('registers a passkey for a new account and logs in with it, the browser offering it unasked (discoverable)', async () => {
    const { lines, credentials } = await runFlow(listed);
    expect(lines).toEqual([
      'create 201 user created',
      'passkey options 200 ok',
      'passkey register 201 factor enabled',
      'login options 200 ok',
      'passkey login 200 passkey verified, the same account',
    ]);
    // One resident credential for the relying party, used once after its registration.
    expect(credentials).toHaveLength(1);
    expect(credentials[0]).toMatchObject({ isResidentCredential: true, rpId: 'localhost', signCount: 2 });
    // The account lists it as a passkey factor, used.
    const client = createClient({ baseUrl: api.baseUrl, token: api.token });
    const userId = Buffer.from(credentials[0]!.userHandle!, 'base64').toString('hex');
    const id = `${userId.slice(0, 8)}-${userId.slice(8, 12)}-${userId.slice(12, 16)}-${userId.slice(16, 20)}-${userId.slice(20)}`;
    const factors = await client.GET('/api/1/user/factor/list', { params: { query: { _userId: id } } });
    expect(factors.data?.result.factors).toEqual([
      expect.objectContaining({ type: 'passkey', label: 'This browser', lastUsedAt: expect.any(String) }),
    ]);
  }, 180_000);

  it('refuses the registration from a page whose origin the relying party does not list', async () => {
    const { lines } = await runFlow(unlisted);
    expect(lines.slice(0, 3)).toEqual([
      'create 201 user created',
      'passkey options 200 ok',
      'passkey register 422 invalid_credentials',
    ]);
  }, 180_000);
});
