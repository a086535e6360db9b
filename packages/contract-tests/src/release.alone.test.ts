// The release archive as an operator uses it (docs/deploy.md): built by `./pnpmw release`,
// unpacked into an empty folder outside the repository (so nothing resolves from its
// node_modules), then the launcher runs the CLI and the server from there against PostgreSQL
// with the shipped env file, as the systemd unit does, on the Node.js the archive carries: PATH
// names an empty folder, so no `node` (nor anything else) is found there, as on a bare Debian.
// Its README and docs/ are checked link by link, inside the archive.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import {
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClient } from '@user-accounts/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPostgresDatabase, postgresUnavailable } from './targets.ts';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));
const VERSION = (JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { version: string }).version;
const skip = await postgresUnavailable();
if (skip !== undefined)
  console.warn(`\n[contract-tests] release archive, migrate and serve on PostgreSQL: SKIPPED, ${skip}\n`);
const tarMissing = spawnSync('tar', ['--version']).status !== 0 ? 'tar not found on PATH' : undefined;
if (tarMissing !== undefined) console.warn(`\n[contract-tests] release archive: SKIPPED, ${tarMissing}\n`);

const work = mkdtempSync(join(tmpdir(), 'ua-release-test-'));
const drops: (() => Promise<void>)[] = [];
const children: ChildProcess[] = [];
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
let home = '';
/** A PATH with nothing on it: no `node`, no `dirname`, as bare as a machine gets. */
const BARE_PATH = join(work, 'empty-bin');
mkdirSync(BARE_PATH);
/** The launcher, with the environment given and nothing else of ours. */
const launch = (args: string[], env: Record<string, string>) =>
  spawnSync(join(home, 'bin', 'user-accounts'), args, {
    env: { PATH: BARE_PATH, ...env },
    cwd: home,
    encoding: 'utf8',
  });

describe.skipIf(tarMissing !== undefined)('the release archive, unpacked into an empty folder', () => {
  beforeAll(() => {
    const built = spawnSync(process.execPath, [join(REPO, 'packages/server/release.ts'), join(work, 'out')], {
      encoding: 'utf8',
    });
    expect(built.status, built.stderr).toBe(0);
    const archive = `user-accounts-${VERSION}-${process.platform}-${process.arch}.tar.gz`;
    // The client's npm tarball beside it (client-install.system.test.ts publishes and installs one).
    expect(readdirSync(join(work, 'out')).sort()).toEqual([archive, `user-accounts-client-${VERSION}.tgz`].sort());
    const unpacked = spawnSync('tar', ['-xzf', join(work, 'out', archive), '-C', work], { encoding: 'utf8' });
    expect(unpacked.status, unpacked.stderr).toBe(0);
    home = join(work, archive.replace(/\.tar\.gz$/, ''));
  }, 240_000);
  afterAll(async () => {
    // Stopped before its database is dropped, and killed if it has not stopped within 10 s: a
    // server left running after the run (two were found spinning at 7% of a core each, long
    // after their runs ended) takes from every test after it.
    await Promise.all(
      children.map(async (child) => {
        if (child.exitCode !== null || child.signalCode !== null) return;
        const exited = once(child, 'exit');
        child.kill('SIGTERM');
        const stopped = await Promise.race([exited.then(() => true), sleep(10_000).then(() => false)]);
        if (!stopped) {
          child.kill('SIGKILL');
          await exited;
        }
      }),
    );
    rmSync(work, { recursive: true, force: true });
    await Promise.all(drops.map((drop) => drop()));
  });

  it('holds the bundle, exactly the packages it imports, the runtime, the launcher, deploy/, docs/ and the README', () => {
    expect(readdirSync(home).sort()).toEqual(
      [
        'CHANGELOG.md',
        'LICENSE',
        'README.md',
        'bin',
        'deploy',
        'dist',
        'docs',
        'node_modules',
        'package.json',
        'runtime',
      ].sort(),
    );
    // The native addons with this platform's build, and the embedded database: nothing else.
    const modules = readdirSync(join(home, 'node_modules')).flatMap((scope) =>
      readdirSync(join(home, 'node_modules', scope)).map((name) => `${scope}/${name}`),
    );
    expect(modules.sort()).toEqual(
      [
        '@electric-sql/pglite',
        '@node-rs/argon2',
        `@node-rs/argon2-${process.platform}-${process.arch}-gnu`,
        '@node-rs/bcrypt',
        `@node-rs/bcrypt-${process.platform}-${process.arch}-gnu`,
      ].sort(),
    );
    expect(readdirSync(join(home, 'deploy')).sort()).toEqual(
      ['haproxy-errors', 'haproxy.cfg', 'patroni', 'postgresql', 'user-accounts.env', 'user-accounts@.service'].sort(),
    );
    expect(readFileSync(join(home, 'deploy', 'user-accounts@.service'), 'utf8')).toContain(
      'ExecStart=/opt/user-accounts/bin/user-accounts serve',
    );
    expect(launch(['--version'], {}).stdout).toBe(`${VERSION}\n`);
  });

  it("stamps the root package.json's version into the client's tarball: the version is written in one place (issue 64)", () => {
    const packed = spawnSync(
      'tar',
      ['-xzOf', join(work, 'out', `user-accounts-client-${VERSION}.tgz`), 'package/package.json'],
      { encoding: 'utf8' },
    );
    expect(packed.status, packed.stderr).toBe(0);
    expect((JSON.parse(packed.stdout) as { version: string }).version).toBe(VERSION);
    // packages/client/package.json's own version is not read (it once had to be kept equal by hand).
    const own = JSON.parse(readFileSync(join(REPO, 'packages/client/package.json'), 'utf8')) as { version: string };
    expect(own.version).toBe('0.0.0');
  });

  it('leaves nothing behind when it fails: no archive, no tarball, no temporary folder; and exits 1 (issue 64)', () => {
    const out = join(work, 'failed-out');
    const temporary = join(work, 'failed-tmp');
    mkdirSync(temporary);
    // pnpm that cannot be run: the client's pack fails, as a version mismatch once made it fail.
    const failed = spawnSync(process.execPath, [join(REPO, 'packages/server/release.ts'), out], {
      encoding: 'utf8',
      env: { ...process.env, npm_execpath: join(work, 'no-such-pnpm.cjs'), TMPDIR: temporary },
    });
    expect(failed.status, failed.stdout).toBe(1);
    expect(failed.stderr).toContain('release: pnpm pack of the client failed');
    expect(existsSync(out) ? readdirSync(out) : []).toEqual([]);
    expect(readdirSync(temporary)).toEqual([]);
  });

  it('carries the Node.js it was tested with, which runs with nothing on PATH', () => {
    const which = spawnSync('/bin/sh', ['-c', 'command -v node'], { env: { PATH: BARE_PATH }, encoding: 'utf8' });
    expect(which.status, `node on ${BARE_PATH}: ${which.stdout}`).not.toBe(0);
    const runtime = spawnSync(join(home, 'runtime', 'node'), ['-p', 'process.version'], {
      env: { PATH: BARE_PATH },
      encoding: 'utf8',
    });
    expect(runtime.stdout).toBe(`${process.version}\n`);
    expect(statSync(join(home, 'runtime', 'node')).mode & 0o111).toBe(0o111);
    // The CLI runs on it: its help, with no node anywhere on PATH.
    const help = launch(['cli', '--help'], {});
    expect(help.status, help.stderr).toBe(0);
  });

  it('resolves every relative link of its README and docs/ inside the archive', () => {
    const pages = [
      'README.md',
      ...readdirSync(join(home, 'docs'))
        .filter((f) => f.endsWith('.md'))
        .map((f) => `docs/${f}`),
    ];
    expect(pages.length).toBeGreaterThan(10);
    const broken: string[] = [];
    for (const page of pages) {
      const text = readFileSync(join(home, page), 'utf8').replace(/^```[\s\S]*?^```$/gm, '');
      for (const [, target] of text.matchAll(/\]\(([^)\s]+)\)/g)) {
        if (/^[a-z][a-z0-9+.-]*:/i.test(target!) || target!.startsWith('#')) continue;
        const [path = '', anchor] = target!.split('#', 2);
        const file = join(home, dirname(page), path);
        if (relative(home, file).startsWith('..') || !existsSync(file)) {
          broken.push(`${page}: ${target} (no such file in the archive)`);
          continue;
        }
        if (anchor !== undefined && file.endsWith('.md') && !anchors(readFileSync(file, 'utf8')).has(anchor))
          broken.push(`${page}: ${target} (no such heading)`);
      }
    }
    expect(broken).toEqual([]);
    // The pointer the README had to a section nowhere in the archive ("Several replicas").
    expect(readFileSync(join(home, 'README.md'), 'utf8')).not.toContain("the repository's README");
  });

  it('says which Node it needs when the one it finds is older', () => {
    const old = launch(['serve'], { NODE: join(work, 'node-20') });
    writeFileSync(join(work, 'node-20'), '#!/bin/sh\necho 20.20.2\n', { mode: 0o755 });
    const found = launch(['serve'], { NODE: join(work, 'node-20') });
    expect(old.status).toBe(1);
    expect(old.stderr).toMatch(/needs Node\.js >=24\.18 and found no ".*node-20"/);
    expect(found.status).toBe(1);
    expect(found.stderr).toMatch(/needs Node\.js >=24\.18; ".*node-20" is 20\.20\.2/);
  });

  it('refuses the embedded database with the shipped env file, which says production', () => {
    const refused = launch(['cli', '--env-file', join(home, 'deploy', 'user-accounts.env'), 'migrate'], {});
    expect(refused.status).toBe(1);
    expect(refused.stderr).toMatch(/DEPLOYMENT is production, which needs DATABASE_URL/);
  });

  it.skipIf(skip !== undefined)(
    'migrates, mints a token and serves from there on PostgreSQL, with no node on PATH',
    async () => {
      const database = await freshPostgresDatabase();
      drops.push(database.drop);
      const envFile = join(work, 'user-accounts.env');
      writeFileSync(
        envFile,
        `${readFileSync(join(home, 'deploy', 'user-accounts.env'), 'utf8')}\nDATABASE_URL=${database.url}\n`,
      );
      const migrated = launch(['migrate', '--env-file', envFile], {});
      expect(migrated.status, migrated.stderr).toBe(0);
      const minted = launch(
        [
          'cli',
          '--env-file',
          envFile,
          'token',
          'create',
          '--site',
          'shop',
          '--scopes',
          'read,write,verify',
          '--label',
          'release',
        ],
        {},
      );
      expect(minted.status, minted.stderr).toBe(0);
      const token = /^ {2}(ua_[A-Za-z0-9_-]{43})$/m.exec(minted.stdout)?.[1];
      expect(token).toBeDefined();

      const child = spawn(join(home, 'bin', 'user-accounts'), ['serve', '--env-file', envFile], {
        env: { PATH: BARE_PATH, PORT: '0' },
        cwd: home,
      });
      children.push(child);
      let output = '';
      const baseUrl = await new Promise<string>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          output += chunk.toString();
          const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(output);
          if (match) resolve(match[1]!);
        });
        child.stderr.on('data', (chunk: Buffer) => {
          output += chunk.toString();
        });
        child.on('exit', (code) => reject(new Error(`exited with ${code}: ${output}`)));
      });
      expect(output).toContain(`"version":"${VERSION}"`);
      const client = createClient({ baseUrl, token: token! });
      const made = await client.POST('/api/1/user/create', {
        body: { email: 'released@example.com', password: 'a released passphrase', name: 'Released' },
      });
      expect(made.response.status).toBe(201);
      // A password is hashed by the native addon shipped in node_modules.
      const verified = await client.POST('/api/1/user/verify', {
        body: { email: 'released@example.com', password: 'a released passphrase' },
      });
      expect(verified.response.status).toBe(200);
    },
    180_000,
  );
});

/** The anchors GitHub makes of a Markdown page's headings: lower case, punctuation dropped, spaces as hyphens. */
function anchors(markdown: string): Set<string> {
  const seen = new Map<string, number>();
  const out = new Set<string>();
  for (const [, heading] of markdown.replace(/^```[\s\S]*?^```$/gm, '').matchAll(/^#{1,6}\s+(.+?)\s*#*$/gm)) {
    const slug = heading!
      .replace(/\[([^\]]*)\]\([^)]*\)/g, '$1')
      .toLowerCase()
      .replace(/[^\p{L}\p{N}\s_-]/gu, '')
      .replace(/\s/g, '-');
    const n = seen.get(slug) ?? 0;
    seen.set(slug, n + 1);
    out.add(n === 0 ? slug : `${slug}-${n}`);
  }
  return out;
}
