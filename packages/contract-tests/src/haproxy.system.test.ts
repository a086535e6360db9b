// The shipped deploy/haproxy.cfg in front of a server (issue 46, point 3): TLS with the bind line
// docs/deploy.md gives ("TLS at HAProxy"), taken from that page and given a self-signed
// certificate made here with openssl; and the operators' pages (/metrics, /console, /docs) on
// the internal frontend only, 404 on the public one.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdtempSync, readFileSync, readlinkSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { freePort } from '@user-accounts/cluster';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddedServer, type Target, TEST_METRICS_TOKEN } from './targets.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const HAPROXY = ['/usr/sbin/haproxy', '/usr/local/sbin/haproxy', '/usr/bin/haproxy'].find(
  (path) => spawnSync(path, ['-v']).status === 0,
);
const OPENSSL = spawnSync('openssl', ['version']).status === 0;
const skip = HAPROXY === undefined ? 'no haproxy' : OPENSSL ? undefined : 'no openssl';
if (skip !== undefined) console.warn(`\n[contract-tests] HAProxy's TLS and internal frontend: SKIPPED, ${skip}\n`);

/** The bind line docs/deploy.md gives for TLS, as the operator copies it. */
function documentedBindLine(): string {
  const page = readFileSync(join(ROOT, 'docs/deploy.md'), 'utf8');
  const section = page.slice(page.indexOf('## TLS at HAProxy'));
  const line = /```haproxy\n(.*)\n```/.exec(section)?.[1];
  if (line === undefined) throw new Error('docs/deploy.md, "TLS at HAProxy", has no haproxy block');
  return line;
}

interface Answer {
  status: number;
  body: string;
  headers: Record<string, string | string[] | undefined>;
}

/** An HTTPS request that trusts `ca` alone (the self-signed certificate). */
const https = (
  url: string,
  ca: string,
  init: { method?: string; headers?: Record<string, string>; body?: string } = {},
) =>
  new Promise<Answer>((resolve, reject) => {
    const req = request(url, { method: init.method ?? 'GET', headers: init.headers, ca }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        body += chunk;
      });
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body, headers: res.headers }));
    });
    req.on('error', reject);
    req.end(init.body);
  });

/** Root, with Debian's `haproxy` user: the shipped file's user, group and chroot can be checked. */
const haproxyUser = spawnSync('id', ['-u', 'haproxy'], { encoding: 'utf8' });
const unprivilegedCheck = process.getuid?.() === 0 && haproxyUser.status === 0;

describe.skipIf(skip !== undefined)('deploy/haproxy.cfg: TLS as docs/deploy.md says, operators’ pages inside', () => {
  let dir: string;
  let server: Target;
  let balancer: ChildProcess;
  let log = '';
  let cert: string;
  let publicUrl: string;
  let internalUrl: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'ua-haproxy-'));
    const made = spawnSync(
      'openssl',
      [
        ...['req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=localhost'],
        ...['-addext', 'subjectAltName=DNS:localhost,IP:127.0.0.1'],
        ...['-keyout', join(dir, 'key.pem'), '-out', join(dir, 'cert.pem')],
      ],
      { encoding: 'utf8' },
    );
    expect(made.status, made.stderr).toBe(0);
    cert = readFileSync(join(dir, 'cert.pem'), 'utf8');
    writeFileSync(join(dir, 'accounts.pem'), cert + readFileSync(join(dir, 'key.pem'), 'utf8'), { mode: 0o600 });

    // The shipped file with the page's bind line in frontend api, the certificate's path ours.
    const line = documentedBindLine();
    expect(line).toMatch(/^ {2}bind .* ssl crt \/etc\/haproxy\/certs\/accounts\.pem/);
    const shipped = readFileSync(join(ROOT, 'deploy/haproxy.cfg'), 'utf8');
    const bind = /^ {2}bind "\$\{UA_BIND-[^}]*\}"$/m;
    expect(shipped).toMatch(bind);
    const config = shipped.replace(bind, line.replace('/etc/haproxy/certs/accounts.pem', join(dir, 'accounts.pem')));
    writeFileSync(join(dir, 'haproxy.cfg'), config);
    cpSync(join(ROOT, 'deploy/haproxy-errors'), join(dir, 'haproxy-errors'), { recursive: true });

    server = await embeddedServer({ env: { METRICS_TOKEN: TEST_METRICS_TOKEN } });
    const app = new URL(server.baseUrl).host;
    const [port, internal] = [await freePort(), await freePort()];
    balancer = spawn(HAPROXY!, ['-db', '-f', join(dir, 'haproxy.cfg')], {
      env: {
        PATH: process.env.PATH ?? '',
        // As root (CI), the shipped file as Debian's service runs it: it drops to `haproxy`.
        ...(!unprivilegedCheck && { UA_RUN_AS_INVOKER: '1' }),
        UA_BIND: `127.0.0.1:${port}`,
        UA_INTERNAL_BIND: `127.0.0.1:${internal}`,
        UA_ADMIN_SOCKET: join(dir, 'admin.sock'),
        UA_APP1: app,
        UA_APP2: app,
        UA_APP3: app,
      },
    });
    balancer.stdout?.on('data', (chunk: Buffer) => {
      log += chunk.toString();
    });
    balancer.stderr?.on('data', (chunk: Buffer) => {
      log += chunk.toString();
    });
    publicUrl = `https://localhost:${port}`;
    internalUrl = `http://127.0.0.1:${internal}`;
    // Until HAProxy listens and finds the replica ready.
    for (let i = 0; ; i++) {
      const ready = await https(`${publicUrl}/readyz`, cert).catch(() => undefined);
      if (ready?.status === 200) break;
      if (i > 100) throw new Error(`HAProxy did not answer over TLS:\n${log}`);
      await new Promise((r) => setTimeout(r, 100));
    }
  }, 120_000);

  afterAll(async () => {
    balancer?.kill('SIGTERM');
    await server?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it.skipIf(!unprivilegedCheck)(
    'started by root, runs as the haproxy user inside /var/lib/haproxy, as Debian’s service starts it (issue 64)',
    () => {
      const status = readFileSync(`/proc/${balancer.pid}/status`, 'utf8');
      const uid = haproxyUser.stdout.trim();
      // Real, effective, saved and file-system uids: all haproxy's, none root's.
      expect(/^Uid:\s+(.*)$/m.exec(status)?.[1]?.split(/\s+/)).toEqual([uid, uid, uid, uid]);
      expect(readlinkSync(`/proc/${balancer.pid}/root`)).toBe('/var/lib/haproxy');
    },
  );

  it('serves the API over TLS with the documented bind line and a self-signed certificate', async () => {
    const created = await https(`${publicUrl}/api/1/user/create`, cert, {
      method: 'POST',
      headers: { Authorization: server.token, 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: 'tls@example.com', password: 'a passphrase over tls', name: 'Tess' }),
    });
    expect(created.status, created.body).toBe(201);
    // The replica learnt the request id HAProxy made.
    expect(created.headers['x-request-id']).toBeTruthy();
  });

  it('refuses a client that does not trust the certificate (no silent plain HTTP)', async () => {
    await expect(https(`${publicUrl}/readyz`, '')).rejects.toThrow();
    const plain = await fetch(`${publicUrl.replace('https://localhost', 'http://127.0.0.1')}/readyz`).catch(
      () => undefined,
    );
    expect(plain?.status ?? 400).toBeGreaterThanOrEqual(400);
  });

  it.each(['/metrics', '/console', '/console/', '/docs', '/docs/init.js'])(
    "%s: 404 problem+json on the public frontend, the replica's answer on the internal one",
    async (path) => {
      const outside = await https(`${publicUrl}${path}`, cert);
      expect(outside.status).toBe(404);
      expect(outside.headers['content-type']).toBe('application/problem+json');
      expect(JSON.parse(outside.body)).toMatchObject({ status: 404, code: 'not_found' });
      // As the replica answers it (the console's page is 503 where its files were not built).
      const inside = (await fetch(`${server.baseUrl}${path}`)).status;
      expect(inside).not.toBe(404);
      expect((await fetch(`${internalUrl}${path}`)).status).toBe(inside);
    },
  );

  it('the internal frontend takes the metrics token and the API (the console calls it)', async () => {
    const metrics = await fetch(`${internalUrl}/metrics`, {
      headers: { Authorization: `Bearer ${TEST_METRICS_TOKEN}` },
    });
    expect(metrics.status).toBe(200);
    const count = await fetch(`${internalUrl}/api/1/user/count`, { headers: { Authorization: server.token } });
    expect(count.status).toBe(200);
    // And the public one still serves what is not the operators': the contract.
    expect((await https(`${publicUrl}/openapi.json`, cert)).status).toBe(200);
  });
});
