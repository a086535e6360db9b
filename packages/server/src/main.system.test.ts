// The server as an operator runs it: `node src/main.ts`, configured by environment variables.
import { chmodSync, chownSync, existsSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { createServer } from 'node:net';
import { join } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { postgresUnavailable } from './testing/postgres.ts';
import { processes } from './testing/processes.ts';
import { copyMigratedPglite, migratedPostgresDatabase } from './testing/templates.ts';

const procs = processes();
afterAll(() => procs.cleanup());
const run = (env: Record<string, string>) => procs.server(env);
const dataDir = () => procs.dataDir();
const pgSkip = await postgresUnavailable();
if (pgSkip !== undefined) console.warn(`\n[main.test] a stop on PostgreSQL: SKIPPED, ${pgSkip}\n`);

describe('main', () => {
  it('mints a dev token once on a fresh embedded database, keeps data across a graceful restart', async () => {
    const dir = dataDir();
    const first = run({ DATA_DIR: dir });
    await first.ready;
    const token = readFileSync(join(dir, 'dev-token'), 'utf8').trim();
    expect(token).toMatch(/^ua_[A-Za-z0-9_-]{43}$/);
    expect(statSync(join(dir, 'dev-token')).mode & 0o777).toBe(0o600);
    expect(first.stderr()).toContain(token);
    expect(first.stdout()).not.toContain(token);

    const headers = { Authorization: token, 'Content-Type': 'application/json' };
    // A create in flight when SIGTERM arrives still completes.
    const pending = fetch(`${first.baseUrl}/api/1/user/create`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ email: 'kept@example.com', password: 'kept across restarts', name: 'Kept' }),
    });
    await new Promise((r) => setTimeout(r, 5));
    first.child.kill('SIGTERM');
    const created = await pending;
    expect(created.status).toBe(201);
    const { result } = (await created.json()) as { result: { _userId: string } };
    expect(await first.exited).toBe(0);
    expect(first.stdout()).toContain('"msg":"stopped"');
    // A clean stop is no cause for alarm: closing its own LISTEN is not losing it.
    expect(first.stdout()).not.toContain('"level":"warn"');

    const second = run({ DATA_DIR: dir });
    await second.ready;
    expect(second.stderr()).not.toContain(token);
    const got = await fetch(`${second.baseUrl}/api/1/user/get?_userId=${result._userId}`, { headers });
    expect(got.status).toBe(200);

    // The embedded database is single-process: a second server on the same folder must refuse.
    const intruder = run({ DATA_DIR: dir });
    expect(await intruder.exited).toBe(1);
    expect(intruder.stderr()).toMatch(/in use by another server/);

    second.child.kill('SIGINT');
    expect(await second.exited).toBe(0);
  }, 180_000);

  it('with SHUTDOWN_DRAIN_MS, keeps serving after SIGTERM while /readyz says 503 and no connection is kept alive, then exits', async () => {
    const server = run({ DATA_DIR: await procs.migratedDataDir(), SHUTDOWN_DRAIN_MS: '1500' });
    await server.ready;
    expect((await fetch(`${server.baseUrl}/readyz`)).headers.get('connection')).toBe('keep-alive');
    const signalled = Date.now();
    server.child.kill('SIGTERM');
    await new Promise((r) => setTimeout(r, 200));
    const ready = await fetch(`${server.baseUrl}/readyz`);
    expect(ready.status).toBe(503);
    expect(ready.headers.get('content-type')).toBe('application/problem+json');
    expect(((await ready.json()) as { code: string }).code).toBe('service_unavailable');
    const live = await fetch(`${server.baseUrl}/healthz`);
    expect(live.status).toBe(200);
    expect(live.headers.get('connection')).toBe('close');
    expect(await server.exited).toBe(0);
    expect(Date.now() - signalled).toBeGreaterThanOrEqual(1_500);
  }, 180_000);

  it("sizes libuv's thread pool for HASH_CONCURRENCY hashes and 4 more threads, not libuv's 4", async () => {
    // Found by review: with its default 4 threads, no more than 4 hashes ever ran at once.
    const threadsAfterAHash = async (concurrency: number) => {
      const dir = await procs.migratedDataDir();
      const server = run({ DATA_DIR: dir, HASH_CONCURRENCY: String(concurrency) });
      await server.ready;
      const token = readFileSync(join(dir, 'dev-token'), 'utf8').trim();
      const created = await fetch(`${server.baseUrl}/api/1/user/create`, {
        method: 'POST',
        headers: { Authorization: token, 'Content-Type': 'application/json' },
        body: JSON.stringify({ email: `pool${concurrency}@example.com`, password: 'a pool of threads', name: 'Pool' }),
      });
      expect(created.status).toBe(201);
      // The pool starts all its threads at its first use.
      const threads = readdirSync(`/proc/${server.child.pid}/task`).length;
      server.child.kill('SIGTERM');
      await server.exited;
      return threads;
    };
    expect((await threadsAfterAHash(16)) - (await threadsAfterAHash(1))).toBeGreaterThanOrEqual(15);
  }, 180_000);

  it('logs JSON lines when not in a terminal, and readable lines with LOG_FORMAT=pretty', async () => {
    const json = run({ DATA_DIR: await procs.migratedDataDir() });
    await json.ready;
    expect(JSON.parse(json.stdout().split('\n')[0]!)).toMatchObject({
      level: 'info',
      time: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
      msg: expect.stringMatching(/^listening on /),
    });
    const pretty = run({ DATA_DIR: await procs.migratedDataDir(), LOG_FORMAT: 'pretty' });
    await pretty.ready;
    const first = pretty.stdout().split('\n')[0]!;
    expect(() => JSON.parse(first)).toThrow();
    expect(first).toMatch(/INFO.*listening on http/);
  }, 180_000);

  it.each([
    [{ PORT: 'eighty' }, /PORT must be a whole number/],
    [{ PORT: '70000' }, /PORT must be a whole number/],
    [{ LOG_LEVEL: 'loud' }, /LOG_LEVEL must be one of/],
    [{ LOG_FORMAT: 'xml' }, /LOG_FORMAT must be json or pretty/],
    [{ METRICS_TOKEN: 'short' }, /METRICS_TOKEN must be 20 to 256/],
    [{ DATABASE_URL: 'mysql://x' }, /DATABASE_URL must be a postgres/],
    [{ API_TOKENS: 'short' }, /API_TOKENS entry 1 must be/],
    [{ AUTH_FAILURE_LIMIT: 'lots' }, /AUTH_FAILURE_LIMIT must look like 100\/10s/],
    // The test suites' cheap hashes are never a production server's.
    [
      { PASSWORD_HASH_PROFILE: 'test', DEPLOYMENT: 'production', DATABASE_URL: 'postgres://nobody@127.0.0.1:1/none' },
      /PASSWORD_HASH_PROFILE is test, which DEPLOYMENT=production refuses/,
    ],
  ])('refuses to start with %o, naming the variable', async (env, message) => {
    const server = run({ DATA_DIR: dataDir(), ...env });
    expect(await server.exited).toBe(1);
    expect(server.stderr()).toMatch(message);
    expect(server.stderr()).not.toContain('short'.repeat(2));
  });

  it('refuses a data folder that others can write, says how to fix it, and writes nothing there', async () => {
    const dir = dataDir();
    chmodSync(dir, 0o777);
    const server = run({ DATA_DIR: dir });
    expect(await server.exited).toBe(1);
    expect(server.stderr()).toContain(`the data folder ${dir} can be written by its group and other users (mode 0777)`);
    expect(server.stderr()).toContain(`run chmod 700 ${dir}`);
    expect(readdirSync(dir)).toEqual([]);

    chmodSync(dir, 0o700);
    await copyMigratedPglite(dir);
    const fixed = run({ DATA_DIR: dir });
    await fixed.ready;
    fixed.child.kill('SIGTERM');
    expect(await fixed.exited).toBe(0);
  }, 180_000);

  it('keeps its files private under umask 000, and refuses a dev-token or a folder another user could change', async () => {
    const dir = join(dataDir(), 'data'); // created by the server, as ./data is
    const previous = process.umask(0o000); // the child inherits it
    const first = run({ DATA_DIR: dir });
    process.umask(previous);
    await first.ready;
    // The moment the server is ready, the CLI's socket is there and was never wider than 0600.
    expect(statSync(join(dir, 'admin.sock')).mode & 0o777).toBe(0o600);
    // The database's socket (PGlite asks no password) is in a folder no other user may enter.
    expect(statSync(join(dir, 'db')).mode & 0o777).toBe(0o700);
    expect(statSync(dir).mode & 0o777).toBe(0o700);
    expect(statSync(join(dir, 'dev-token')).mode & 0o777).toBe(0o600);
    first.child.kill('SIGTERM');
    expect(await first.exited).toBe(0);

    const token = join(dir, 'dev-token');
    chmodSync(token, 0o666); // as a token planted by another user would be
    const planted = run({ DATA_DIR: dir });
    expect(await planted.exited).toBe(1);
    expect(planted.stderr()).toContain(
      `${token} holds an API token and can be read or written by its group and other users (mode 0666)`,
    );
    expect(planted.stderr()).toContain(`run chmod 600 ${token}`);
    chmodSync(token, 0o600);

    // The CLI will not hand its commands to a socket in a folder others can write either.
    chmodSync(dir, 0o757);
    const cli = await procs.cli(['token', 'list'], { DATA_DIR: dir });
    expect(cli.code).toBe(1);
    expect(cli.stderr).toContain(`can be written by other users (mode 0757)`);
    chmodSync(dir, 0o700);

    if (process.getuid?.() === 0) {
      // Only root can give a file away: a dev-token of another user is refused as well.
      chownSync(token, 65534, 65534);
      const foreign = run({ DATA_DIR: dir });
      expect(await foreign.exited).toBe(1);
      expect(foreign.stderr()).toContain(`${token} belongs to another user (uid 65534)`);
      chownSync(token, 0, 0);
      chownSync(dir, 65534, 65534);
      const foreignDir = run({ DATA_DIR: dir });
      expect(await foreignDir.exited).toBe(1);
      expect(foreignDir.stderr()).toContain(`the data folder ${dir} belongs to another user (uid 65534)`);
      chownSync(dir, 0, 0);
    }

    const again = run({ DATA_DIR: dir });
    await again.ready;
    again.child.kill('SIGTERM');
    expect(await again.exited).toBe(0);
  }, 180_000);

  it.skipIf(pgSkip !== undefined)(
    'stops on SIGTERM on PostgreSQL without a warning (closing its LISTEN is not losing it)',
    async () => {
      const own = await migratedPostgresDatabase();
      try {
        const server = run({
          DATABASE_URL: own.url,
          API_TOKENS: 'ua_main_test_token_0123456789abcdef',
          // Configured as a deployment is: without it the start warns (second factors answer 503).
          FACTOR_ENCRYPTION_KEY: `k1:${Buffer.alloc(32, 7).toString('base64')}`,
        });
        await server.ready;
        server.child.kill('SIGTERM');
        expect(await server.exited).toBe(0);
        expect(server.stdout()).toContain('"msg":"stopped"');
        expect(server.stdout()).not.toContain('"level":"warn"');
      } finally {
        await own.drop();
      }
    },
    180_000,
  );

  it('refuses a port in use before it creates its data folder or mints a token, and says so in words', async () => {
    const holder = createServer();
    await new Promise<void>((resolve) => holder.listen(0, '127.0.0.1', resolve));
    const port = (holder.address() as { port: number }).port;
    try {
      const dir = join(dataDir(), 'data'); // not there yet, as ./data on a first start
      const server = run({ DATA_DIR: dir, PORT: String(port) });
      expect(await server.exited).toBe(1);
      expect(server.stderr()).toContain(`user-accounts: port ${port} on 127.0.0.1 is in use`);
      expect(server.stderr()).toContain('PORT');
      expect(server.stderr()).not.toMatch(/ua_[A-Za-z0-9_-]{43}/);
      expect(existsSync(dir)).toBe(false);
    } finally {
      holder.close();
    }
  }, 180_000);
});
