// deploy/Containerfile built and run with podman: the release archive on a base made from Debian's
// packages (mmdebstrap, imported as localhost/ua-debian:bookworm) with Node's own binary (this
// Node's), then the CLI and the server from the image against PostgreSQL, on the host's network.
import { spawnSync } from 'node:child_process';
import { copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClient } from '@user-accounts/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPostgresDatabase, postgresUnavailable } from './targets.ts';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const VERSION = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
const DEBIAN = 'localhost/ua-debian:bookworm';
const IMAGE = `localhost/user-accounts-test:${process.pid}`;
const BASE = `localhost/ua-debian-node-test:${process.pid}`;

const podman = (args: string[]) => spawnSync('podman', args, { encoding: 'utf8', timeout: 120_000 });

/** Why the image cannot be built and run here, or undefined. */
async function unavailable(): Promise<string | undefined> {
  if (process.platform !== 'linux') return 'the image is linux only';
  if (podman(['--version']).error !== undefined) return 'podman not found (apt-get install podman)';
  if (podman(['image', 'exists', DEBIAN]).status !== 0)
    return `no ${DEBIAN} image (mmdebstrap --variant=minbase bookworm base.tar && podman import base.tar ${DEBIAN})`;
  const found = runFlags();
  if (typeof found === 'string') return found;
  flags = found;
  return postgresUnavailable();
}

/**
 * Flags `podman run` needs here: crun refuses a cgroup v1 host in hybrid mode, and a container
 * without CAP_SYS_RESOURCE cannot raise podman's default limits; runc with limits at or below
 * ours works on both.
 */
function runFlags(): string[] | string {
  const plain = podman(['run', '--rm', DEBIAN, 'true']);
  if (plain.status === 0) return [];
  const limited = ['--runtime', 'runc', '--ulimit', 'nofile=4096:4096', '--ulimit', 'nproc=4096:4096'];
  if (podman(['run', '--rm', ...limited, DEBIAN, 'true']).status === 0) return limited;
  return `podman cannot run a container here (${plain.stderr.trim()}; with runc neither)`;
}

let flags: string[] = [];
const skip = await unavailable();
if (skip !== undefined) console.warn(`\n[contract-tests] the container image: SKIPPED, ${skip}\n`);

// Made when the tests run (a skipped file leaves no folder behind); the describe's hook removes it.
let work = '';
const dirs: string[] = [];
const drops: (() => Promise<void>)[] = [];
const started: string[] = [];

describe.skipIf(skip !== undefined)('deploy/Containerfile, built from the release archive', () => {
  beforeAll(() => {
    work = mkdtempSync(join(tmpdir(), 'ua-container-test-'));
    dirs.push(work);
    const built = spawnSync(process.execPath, [join(REPO, 'packages/server/release.ts'), work], { encoding: 'utf8' });
    expect(built.status, built.stderr).toBe(0);
    expect(readdirSync(work)).toContain(`user-accounts-${VERSION}-linux-${process.arch}.tar.gz`);
    // The base: Debian's packages and Node's own binary, as node:24-bookworm-slim would give.
    const base = mkdtempSync(join(tmpdir(), 'ua-container-base-'));
    dirs.push(base);
    copyFileSync(process.execPath, join(base, 'node'));
    writeFileSync(join(base, 'Containerfile'), `FROM ${DEBIAN}\nCOPY node /usr/local/bin/node\n`);
    const node = podman(['build', ...flags.slice(0, 2), '-t', BASE, base]);
    expect(node.status, node.stderr).toBe(0);
    const image = podman([
      'build',
      ...flags.slice(0, 2),
      '-f',
      join(REPO, 'deploy', 'Containerfile'),
      '--build-arg',
      `BASE=${BASE}`,
      '--build-arg',
      `VERSION=${VERSION}`,
      '--build-arg',
      `ARCH=${process.arch}`,
      '-t',
      IMAGE,
      work,
    ]);
    expect(image.status, image.stderr).toBe(0);
  }, 120_000);
  afterAll(async () => {
    for (const id of started) podman(['rm', '--force', '--time', '5', id]);
    podman(['rmi', '--force', IMAGE, BASE]);
    for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    await Promise.all(drops.map((drop) => drop()));
  });

  it('runs the CLI and the server from the image on PostgreSQL, as a user of no privilege', async () => {
    const database = await freshPostgresDatabase();
    drops.push(database.drop);
    const run = (args: string[], env: Record<string, string> = {}) =>
      podman([
        'run',
        '--rm',
        ...flags,
        '--network',
        'host',
        ...Object.entries({ DATABASE_URL: database.url, ...env }).flatMap(([k, v]) => ['-e', `${k}=${v}`]),
        IMAGE,
        ...args,
      ]);
    expect(run(['--version']).stdout).toBe(`${VERSION}\n`);
    expect(run(['cli', 'migrate'], { DATABASE_URL: '' }).stderr).toMatch(
      /DEPLOYMENT is production, which needs DATABASE_URL/,
    );
    const migrated = run(['cli', 'migrate']);
    expect(migrated.status, migrated.stderr).toBe(0);
    const minted = run([
      'cli',
      'token',
      'create',
      '--site',
      'shop',
      '--scopes',
      'read,write,verify',
      '--label',
      'image',
    ]);
    expect(minted.status, minted.stderr).toBe(0);
    const token = /^ {2}(ua_[A-Za-z0-9_-]{43})$/m.exec(minted.stdout)?.[1];
    expect(token).toBeDefined();

    // The host's network: a port of our own on loopback.
    const port = String(20_000 + (process.pid % 20_000));
    const detached = podman([
      'run',
      '--detach',
      ...flags,
      '--network',
      'host',
      '-e',
      `DATABASE_URL=${database.url}`,
      '-e',
      `PORT=${port}`,
      '-e',
      'HOST=127.0.0.1',
      IMAGE,
    ]);
    expect(detached.status, detached.stderr).toBe(0);
    const id = detached.stdout.trim();
    started.push(id);
    const baseUrl = `http://127.0.0.1:${port}`;
    await expect
      .poll(async () => (await fetch(`${baseUrl}/readyz`).catch(() => undefined))?.status, { timeout: 20_000 })
      .toBe(200);
    const client = createClient({ baseUrl, token: token! });
    const made = await client.POST('/api/1/user/create', {
      body: { email: 'contained@example.com', password: 'a contained passphrase', name: 'Contained' },
    });
    expect(made.response.status).toBe(201);
    const verified = await client.POST('/api/1/user/verify', {
      body: { email: 'contained@example.com', password: 'a contained passphrase' },
    });
    expect(verified.response.status).toBe(200);
    expect(podman(['logs', id]).stdout).toMatch(/"version":"[^"]+".*listening on/);
    expect(podman(['top', id, 'user']).stdout).not.toMatch(/\broot\b/);
  }, 180_000);
});
