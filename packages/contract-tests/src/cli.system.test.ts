// The operator CLI as an operator runs it, against running servers: tokens minted, listed and
// revoked (refused by every server within 1 s), and the audit trail.

import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createClient } from '@user-accounts/client';
import { processes } from '@user-accounts/server/testing/processes';
import { mintToken } from '@user-accounts/server/tokens';
import postgres from 'postgres';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { GHOST } from './harness.ts';
import { freshPostgresDatabase, migratedPostgresDatabase, postgresUnavailable, TEST_HASHES } from './targets.ts';

const procs = processes();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});
afterAll(() => procs.cleanup());

const tokenIn = (stdout: string) => /^ {2}(ua_[A-Za-z0-9_-]{43})$/m.exec(stdout)?.[1];
const statusOf = async (baseUrl: string, token: string) =>
  (await createClient({ baseUrl, token }).GET('/api/1/user/get', { params: { query: { _userId: GHOST } } })).response
    .status;

// The servers and CLIs started here find their database migrated (a copy of this run's template)
// wherever migrating is not the question, and hash new passwords at the test profile's cost: what
// is checked is the CLI's work, not a hash's cost. The tests of `cli migrate` on an empty database
// and of a folder no server made keep theirs empty.
describe('cli on the embedded database, while the server runs', () => {
  it('creates a token the server accepts, lists it, revokes it for the next request, and tails the audit trail', async () => {
    const dir = await procs.migratedDataDir();
    const env = { DATA_DIR: dir, ...TEST_HASHES };
    const server = procs.server(env);
    await server.ready;

    const created = await procs.cli(
      ['token', 'create', '--site', 'shop', '--scopes', 'read,write', '--label', 'web app', '--expires', '90d'],
      env,
    );
    expect(created.code, created.stderr).toBe(0);
    const token = tokenIn(created.stdout)!;
    expect(token).toBeDefined();
    expect(await statusOf(server.baseUrl, token)).toBe(404);

    const client = createClient({ baseUrl: server.baseUrl, token });
    const { data } = await client.POST('/api/1/user/create', {
      body: { email: 'cli@example.com', password: 'a long passphrase', name: 'Cli' },
    });

    const list = await procs.cli(['token', 'list', '--json'], env);
    const rows = JSON.parse(list.stdout) as {
      id: string;
      site: string;
      label: string;
      scopes: string[];
      prefix: string;
      expiresAt: string | null;
      revokedAt: string | null;
    }[];
    const row = rows.find((r) => r.label === 'web app')!;
    expect(row).toMatchObject({ site: 'shop', scopes: ['read', 'write'], revokedAt: null });
    expect(token.startsWith(row.prefix)).toBe(true);
    expect(new Date(row.expiresAt!).getTime()).toBeGreaterThan(Date.now() + 89 * 86_400_000);
    expect(list.stdout).not.toContain(token);
    const table = await procs.cli(['token', 'list'], env);
    expect(table.stdout).toMatch(/ID\s+SITE\s+LABEL\s+SCOPES\s+PREFIX\s+CREATED\s+LAST USED\s+EXPIRES\s+REVOKED/);

    // By the prefix as the table shows it, ellipsis and all: what an operator copies.
    expect(table.stdout).toContain(`${row.prefix}…`);
    const revoked = await procs.cli(['token', 'revoke', `${row.prefix}…`], env);
    expect(revoked.code, revoked.stderr).toBe(0);
    expect(revoked.stdout).toContain(`Revoked token ${row.id}.`);
    expect(await statusOf(server.baseUrl, token)).toBe(401);

    const audit = await procs.cli(['audit', 'tail', '--json'], env);
    const entries = JSON.parse(audit.stdout) as {
      operation: string;
      userId: string;
      tokenId: string;
      site: string;
      outcome: string;
    }[];
    expect(entries.at(-1)).toMatchObject({
      operation: 'create',
      userId: data!.result._userId,
      tokenId: row.id,
      site: 'shop',
      outcome: 'user created',
      tokenLabel: 'web app',
    });
    expect(audit.stdout).not.toContain('cli@example.com');
    // As an operator reads it: who acted by the token's label, not its id (issue 46, point 5).
    const tail = await procs.cli(['audit', 'tail', '--site', 'shop'], env);
    expect(tail.code, tail.stderr).toBe(0);
    const [header, ...lines] = tail.stdout.trimEnd().split('\n');
    expect(header).toMatch(/^AT\s+SITE\s+BY\s+OPERATION\s/);
    expect(lines.at(-1)).toMatch(/\sshop\s+web app\s+create\s/);
    expect(tail.stdout).not.toContain(row.id);
  }, 180_000);

  // Issue 46, point 5: who acted is a person, and the link is the running server's.
  it('console --as NAME: a token labelled with the person, named in the audit trail; the link is the server’s own address', async () => {
    const dir = await procs.migratedDataDir();
    const env = { DATA_DIR: dir, ...TEST_HASHES };
    const server = procs.server(env);
    await server.ready;
    const minted = await procs.cli(['console', '--site', 'shop', '--as', 'Ann Example'], env);
    expect(minted.code, minted.stderr).toBe(0);
    expect(minted.stdout).toContain('"Ann Example"');
    // The server's port (a free one, not 3000 nor the CLI's PORT): the command ran in that server.
    const link = /^ {2}(http:\/\/\S+)$/m.exec(minted.stdout)?.[1];
    expect(link?.startsWith(`${server.baseUrl}/console#token=ua_`), minted.stdout).toBe(true);
    const token = new URL(link!).hash.slice('#token='.length);

    const client = createClient({ baseUrl: server.baseUrl, token });
    const { data } = await client.POST('/api/1/user/create', {
      body: { email: 'ann@example.com', password: 'a long passphrase', name: 'Customer' },
    });
    const trail = await client.GET('/api/1/audit', { params: { query: { _userId: data!.result._userId } } });
    expect(trail.data!.result.entries[0]).toMatchObject({ operation: 'create', tokenLabel: 'Ann Example' });
    const list = JSON.parse((await procs.cli(['token', 'list', '--site', 'shop', '--json'], env)).stdout) as {
      label: string;
    }[];
    expect(list.map((t) => t.label)).toEqual(['Ann Example']);

    // Without --as: "console", and the CLI says how to name the person.
    const anonymous = await procs.cli(['console', '--site', 'shop'], env);
    expect(anonymous.stdout).toContain('--as "FULL NAME" names who acts');
    const refused = await procs.cli(['console', '--site', 'shop', '--as', ''], env);
    expect(refused.code).toBe(2);

    // The site's display name is the issuer authenticator apps show, not its internal name.
    const named = await procs.cli(['site', 'set', '--site', 'shop', '--display-name', 'Example Shop'], env);
    expect(named.code, named.stderr).toBe(0);
    const totp = await client.POST('/api/1/user/factor/totp', { body: { _userId: data!.result._userId } });
    const uri = new URL(totp.data!.result.uri);
    expect(uri.searchParams.get('issuer')).toBe('Example Shop');
    expect(decodeURIComponent(uri.pathname)).toContain('Example Shop:ann@example.com');
    expect((await procs.cli(['site', 'set', '--site', 'shop', '--display-name', 'A: B'], env)).code).toBe(2);
  }, 180_000);

  // Issue 28: a site's metadata schema, set and cleared by the CLI through the running server's
  // admin socket (the CLI's own process reads the file), held by the next write at once.
  it('sets a site’s metadata schema from a file and clears it, and the running server holds writes to it at once', async () => {
    const dir = await procs.migratedDataDir();
    const env = { DATA_DIR: dir, ...TEST_HASHES };
    const server = procs.server(env);
    await server.ready;
    const created = await procs.cli(
      ['token', 'create', '--site', 'plans', '--scopes', 'read,write', '--label', 'plans app'],
      env,
    );
    expect(created.code, created.stderr).toBe(0);
    const client = createClient({ baseUrl: server.baseUrl, token: tokenIn(created.stdout)! });
    const create = async (plan: string) =>
      client.POST('/api/1/user/create', {
        body: {
          email: `${plan}.${Date.now()}@example.com`,
          password: 'a long passphrase',
          name: 'Plan',
          metadata: { plan },
        },
      });
    expect((await create('gold')).response.status).toBe(201);

    const file = join(dir, 'plans.schema.json');
    writeFileSync(file, JSON.stringify({ type: 'object', properties: { plan: { enum: ['free', 'pro'] } } }));
    const set = await procs.cli(['metadata-schema', 'set', '--site', 'plans', file], env);
    expect(set.code, set.stderr).toBe(0);
    expect(set.stdout).toBe(
      'Set the metadata schema of site plans; 1 of its 1 accounts do not match it: each must, at its next write of metadata.\n',
    );
    const refused = await create('gold');
    expect(refused.response.status).toBe(400);
    expect(refused.error).toMatchObject({ code: 'invalid_metadata', errors: [{ pointer: '/metadata/plan' }] });
    expect((await create('pro')).response.status).toBe(201);

    const cleared = await procs.cli(['metadata-schema', 'clear', '--site', 'plans'], env);
    expect(cleared.code, cleared.stderr).toBe(0);
    expect((await create('gold')).response.status).toBe(201);
  }, 180_000);

  it('sets sign-in providers through the running server, their secrets read from a file or PROVIDER_CLIENT_SECRET and never shown; provider/list answers them', async () => {
    const dir = await procs.migratedDataDir();
    const env = { DATA_DIR: dir, ...TEST_HASHES };
    const server = procs.server(env);
    await server.ready;
    const fileSecret = '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opens';
    const envSecret = 'gh-secret-from-the-environment-0123456789';
    const file = join(dir, 'google.secret');
    writeFileSync(file, `${fileSecret}\n`, { mode: 0o600 });
    const redirect = ['--redirect-uris', 'https://shop.example.com/auth/callback'];
    const google = await procs.cli(
      [
        'provider',
        'set',
        '--site',
        'shop',
        '--name',
        'google',
        '--client-id',
        'g-id',
        '--client-secret-file',
        file,
        ...redirect,
      ],
      env,
    );
    expect(google.code, google.stderr).toBe(0);
    expect(google.stdout).toContain(
      'Added provider google of site shop (OpenID Connect, issuer https://accounts.google.com).',
    );
    const github = await procs.cli(
      ['provider', 'set', '--site', 'shop', '--name', 'github', '--client-id', 'Iv1.x', ...redirect],
      {
        ...env,
        PROVIDER_CLIENT_SECRET: envSecret,
      },
    );
    expect(github.code, github.stderr).toBe(0);
    const refused = await procs.cli(
      [
        'provider',
        'set',
        '--site',
        'shop',
        '--name',
        'gitlab',
        '--client-id',
        'x',
        '--client-secret-file',
        join(dir, 'none'),
        ...redirect,
      ],
      env,
    );
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('Cannot read');

    const token = tokenIn(
      (await procs.cli(['token', 'create', '--site', 'shop', '--scopes', 'read', '--label', 'login page'], env)).stdout,
    )!;
    const listed = await createClient({ baseUrl: server.baseUrl, token }).GET('/api/1/provider/list');
    expect(listed.data!.result.providers.map((p) => [p.name, p.kind, p.clientId])).toEqual([
      ['github', 'oauth2', 'Iv1.x'],
      ['google', 'oidc', 'g-id'],
    ]);
    const list = await procs.cli(['provider', 'list', '--json'], env);
    const removed = await procs.cli(['provider', 'remove', '--site', 'shop', '--name', 'github'], env);
    expect(removed.stdout).toBe('Removed provider github of site shop, and its client secret.\n');
    const afterwards = await createClient({ baseUrl: server.baseUrl, token }).GET('/api/1/provider/list');
    expect(afterwards.data!.result.providers.map((p) => p.name)).toEqual(['google']);
    const seen = [google, github, list, removed].flatMap((r) => [r.stdout, r.stderr]);
    seen.push(JSON.stringify(listed.data), server.stdout(), server.stderr());
    for (const text of seen) for (const secret of [fileSecret, envSecret]) expect(text).not.toContain(secret);
  }, 180_000);

  it.each([
    [['token', 'create', '--site', 'shop', '--scopes', 'admin', '--label', 'x'], /--scopes must be/],
    [['token', 'create', '--site', 'Shop Two', '--scopes', 'read', '--label', 'x'], /--site must be/],
    [['token', 'create', '--site', 'shop', '--scopes', 'read'], /--label needs a value/],
    [
      ['token', 'create', '--site', 'shop', '--scopes', 'read', '--label', 'x', '--expires', 'soon'],
      /--expires must be/,
    ],
    // C1 controls (U+0080–U+009F) too: a terminal obeys U+009B as it obeys ESC [.
    [
      ['token', 'create', '--site', 'shop', '--scopes', 'read', '--label', 'web\u009b2J app'],
      /--label must be at most 200 characters, without control characters/,
    ],
    [['console', '--site', 'shop', '--as', 'Ann\u0085Example'], /--as must be the person's name/],
    [['site', 'set', '--site', 'shop', '--display-name', 'Shop\u009d0;x'], /--display-name must be/],
    [['token', 'revoke'], /^cli token revoke: needs the id or the prefix of a token/],
    [
      [
        'provider',
        'set',
        '--site',
        'shop',
        '--name',
        'acme',
        '--issuer',
        'http://id.acme.example',
        '--client-id',
        'x',
        '--redirect-uris',
        'https://shop.example.com/cb',
      ],
      /^cli provider set: --issuer must be https:\/\/ \(http:\/\/ only to 127\.0\.0\.1, \[::1\] or localhost/,
    ],
    [
      [
        'provider',
        'set',
        '--site',
        'shop',
        '--name',
        'google',
        '--client-id',
        'x',
        '--redirect-uris',
        'https://*.shop.example.com/cb',
      ],
      /^cli provider set: --redirect-uris must be exact URLs, without wildcards/,
    ],
    [['frobnicate'], /^cli: unknown command: frobnicate\n/],
  ])(
    'refuses %j with exit code 2, says why in one line, and shows that command’s usage, not all of it',
    async (args, message) => {
      const dir = procs.dataDir();
      const result = await procs.cli(args, { DATA_DIR: dir });
      expect(result.code).toBe(2);
      expect(result.stderr).toMatch(message);
      expect(result.stderr.split('\n')[1]).toMatch(/^Usage:/);
      expect(result.stderr).not.toContain('Usage: cli <command>');
      expect(result.stderr).not.toContain('The database is');
      if (args[0] === 'token') expect(result.stderr).toContain(`Usage: cli ${args[0]} ${args[1]} `);
    },
    180_000,
  );

  it('prints one command’s usage for `cli <command> --help`, and every command’s for `cli --help` (issue 64)', async () => {
    const dir = procs.dataDir();
    const own = await procs.cli(['site', 'set', '--help'], { DATA_DIR: dir });
    expect(own.code).toBe(0);
    expect(own.stdout).toMatch(/^Usage: cli site set /);
    expect(own.stdout).not.toContain('token create');
    expect(own.stdout).not.toContain('Usage: cli <command>');
    const family = await procs.cli(['token', '--help'], { DATA_DIR: dir });
    expect(family.stdout).toContain('cli token create ');
    expect(family.stdout).toContain('cli token list ');
    expect(family.stdout).not.toContain('site set');
    const all = await procs.cli(['--help'], { DATA_DIR: dir });
    expect(all.stdout).toMatch(/^Usage: cli <command>/);
    expect(all.stdout).toContain('site set');
  });

  it('`cli key generate` prints a new FACTOR_ENCRYPTION_KEY value alone on its last line, with no configuration (issue 64)', async () => {
    const values = new Set<string>();
    for (const args of [
      ['key', 'generate'],
      ['key', 'generate'],
      ['key', 'generate', '--id', 'k2'],
    ]) {
      // No DATA_DIR, no DATABASE_URL: a fresh host.
      const result = await procs.cli(args, {});
      expect(result.code, result.stderr).toBe(0);
      const lines = result.stdout.trimEnd().split('\n');
      expect(lines).toHaveLength(1);
      const value = lines.at(-1)!;
      expect(value).toMatch(new RegExp(`^${args[3] ?? 'k1'}:[A-Za-z0-9+/]{43}=$`));
      expect(Buffer.from(value.split(':')[1]!, 'base64')).toHaveLength(32);
      expect(result.stderr).toMatch(/FACTOR_ENCRYPTION_KEY/);
      values.add(value.split(':')[1]!);
    }
    expect(values.size).toBe(3);
    const bad = await procs.cli(['key', 'generate', '--id', 'no spaces'], {});
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(/^cli key generate: --id must be/);
  });

  it('without DATABASE_URL and before any server made the embedded database, names both ways to give it one', async () => {
    const dir = procs.dataDir();
    const result = await procs.cli(['token', 'list'], { DATA_DIR: dir });
    expect(result.code).toBe(1);
    expect(result.stderr).toContain(`no embedded database in ${dir}`);
    expect(result.stderr).toMatch(/DATABASE_URL/);
    expect(result.stderr).toMatch(/DATA_DIR/);
  });
});

/** The p-th percentile of `xs` (nearest rank). */
const percentile = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.ceil((p / 100) * xs.length) - 1]!;

// The promise restated by issue 13: servers keep accepted tokens in memory, so a revocation is
// not read on the next request but heard (LISTEN/NOTIFY); the bound is 1 s on every server.
describe('cli on PostgreSQL, with two and three servers: the revocation bound', async () => {
  const skip = await postgresUnavailable();
  if (skip) console.warn(`\n[contract-tests] cli on PostgreSQL: SKIPPED, ${skip}\n`);
  const redisUrl = process.env.TEST_REDIS_URL;
  const setups: [string, number, string | undefined][] = [
    ['rate limits in the database', 2, skip],
    ['rate limits in the database', 3, skip],
    ['rate limits in Redis', 3, skip ?? (redisUrl ? undefined : 'TEST_REDIS_URL is not set')],
  ];
  for (const [store, count, skipped] of setups) {
    if (skipped && skipped !== skip) console.warn(`\n[contract-tests] revocation, ${store}: SKIPPED, ${skipped}\n`);
    it.skipIf(skipped !== undefined)(
      `mints tokens before any server ran; each revocation is refused by all ${count} servers (${store}) within 1 s of cli token revoke returning`,
      async () => {
        const database = await migratedPostgresDatabase();
        cleanups.push(() => database.drop());
        const env = { DATABASE_URL: database.url };
        const tokens: string[] = [];
        for (let i = 0; i < 4; i++) {
          const created = await procs.cli(
            ['token', 'create', '--site', 'default', '--scopes', 'read', '--label', `replicated ${i}`],
            env,
          );
          expect(created.code, created.stderr).toBe(0);
          tokens.push(tokenIn(created.stdout)!);
        }
        const listed = JSON.parse((await procs.cli(['token', 'list', '--json'], env)).stdout) as {
          id: string;
          label: string;
        }[];
        const ids = tokens.map((_, i) => listed.find((t) => t.label === `replicated ${i}`)!.id);

        const servers = Array.from({ length: count }, () =>
          procs.server({
            ...env,
            API_TOKENS: mintToken(),
            ...(store.includes('Redis') ? { REDIS_URL: redisUrl! } : {}),
          }),
        );
        await Promise.all(servers.map((s) => s.ready));
        // Each server has accepted (and so holds) every token.
        for (const s of servers) for (const token of tokens) expect(await statusOf(s.baseUrl, token)).toBe(404);

        const latencies: number[] = [];
        for (const [i, token] of tokens.entries()) {
          expect((await procs.cli(['token', 'revoke', ids[i]!], env)).code).toBe(0);
          const revoked = performance.now();
          await Promise.all(
            servers.map(async (s) => {
              while ((await statusOf(s.baseUrl, token)) !== 401) {
                expect(performance.now() - revoked, 'still accepted 1 s after the revocation').toBeLessThan(1_000);
                await new Promise((resolve) => setTimeout(resolve, 5));
              }
              latencies.push(performance.now() - revoked);
            }),
          );
        }
        console.log(
          `[contract-tests] revocation over ${count} servers, ${store}: ${latencies.length} refusals, ` +
            `p50 ${percentile(latencies, 50).toFixed(1)} ms, p99 ${percentile(latencies, 99).toFixed(1)} ms, ` +
            `max ${Math.max(...latencies).toFixed(1)} ms after cli token revoke returned`,
        );
        for (const s of servers) s.child.kill('SIGTERM');
        await Promise.all(servers.map((s) => s.exited));
      },
      180_000,
    );
  }
});

describe('DATABASE_LISTEN_URL', async () => {
  const skip = await postgresUnavailable();
  it.skipIf(skip !== undefined)(
    'sends the LISTEN connections there (behind a transaction-mode pooler, to PostgreSQL itself), and revocations are still heard',
    async () => {
      const database = await migratedPostgresDatabase();
      cleanups.push(() => database.drop());
      // Another role, so that pg_stat_activity tells which URL each connection came from.
      const role = `ua_listen_${Date.now()}`;
      // On the server's own database, not the test's: the cleanup that drops that one (WITH FORCE,
      // at the same moment) cut this connection, and end() then waited for ever.
      const admin = postgres(process.env.TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
      cleanups.push(async () => {
        await admin.unsafe(`drop role if exists ${role}`).catch(() => {});
        await admin.end({ timeout: 5 });
      });
      await admin.unsafe(`create role ${role} login`);
      const listenUrl = new URL(database.url);
      listenUrl.username = role;
      const env = { DATABASE_URL: database.url, API_TOKENS: mintToken() };
      const server = procs.server({ ...env, DATABASE_LISTEN_URL: listenUrl.toString() });
      await server.ready;
      const created = await procs.cli(
        ['token', 'create', '--site', 'default', '--scopes', 'read', '--label', 'l'],
        env,
      );
      const token = tokenIn(created.stdout)!;
      expect(await statusOf(server.baseUrl, token)).toBe(404);
      const listeners = async () =>
        (await admin`select application_name as app from pg_stat_activity where usename = ${role} order by 1`).map(
          (r) => r.app as string,
        );
      const deadline = Date.now() + 10_000;
      while ((await listeners()).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 100));
      expect(await listeners()).toEqual(['user-accounts listen ua_events', 'user-accounts listen ua_tokens']);
      const listed = JSON.parse((await procs.cli(['token', 'list', '--json'], env)).stdout) as { id: string }[];
      expect((await procs.cli(['token', 'revoke', listed[0]!.id], env)).code).toBe(0);
      // Heard within the bound of 1 s (the test waited it out whole; it now asks until refused).
      const revoked = Date.now();
      while ((await statusOf(server.baseUrl, token)) !== 401 && Date.now() - revoked < 1_000)
        await new Promise((r) => setTimeout(r, 20));
      expect(await statusOf(server.baseUrl, token)).toBe(401);
      server.child.kill('SIGTERM');
      await server.exited;
    },
    180_000,
  );
});

describe('cli migrate', async () => {
  const skip = await postgresUnavailable();
  it.skipIf(skip !== undefined)(
    'migrates an empty PostgreSQL database once, however many deploy steps and servers start at the same moment',
    async () => {
      const database = await freshPostgresDatabase();
      cleanups.push(() => database.drop());
      const env = { DATABASE_URL: database.url, API_TOKENS: 'ua_cli_migrate_test_token_0123456789' };
      const server = procs.server(env);
      const runs = await Promise.all([
        procs.cli(['migrate'], env),
        procs.cli(['migrate'], env),
        procs.cli(['migrate'], env),
      ]);
      const migrations = runs.map((run) => {
        expect(run.code, run.stderr).toBe(0);
        const applied = /^Applied (\d+) migrations \((\d+) were already applied\); the database is up to date\.$/.exec(
          run.stdout.trimEnd(),
        );
        if (applied) return { applied: Number(applied[1]), already: Number(applied[2]) };
        const none = /^The database is up to date: (\d+) migrations already applied, none new\.$/.exec(
          run.stdout.trimEnd(),
        );
        expect(none, run.stdout).not.toBeNull();
        return { applied: 0, already: Number(none![1]) };
      });
      // The lock made them take turns: one migrator (maybe the server) applied them all, at once.
      const total = migrations[0]!.applied + migrations[0]!.already;
      expect(total).toBeGreaterThan(0);
      for (const m of migrations) {
        expect(m.applied + m.already).toBe(total);
        expect([0, total]).toContain(m.applied);
      }
      expect(migrations.filter((m) => m.applied > 0).length).toBeLessThanOrEqual(1);
      await server.ready;
      const again = await procs.cli(['migrate'], env);
      expect(again.stdout).toBe(`The database is up to date: ${total} migrations already applied, none new.\n`);
    },
  );

  it.skipIf(skip !== undefined)('says it applied them all on an empty PostgreSQL database', async () => {
    const database = await freshPostgresDatabase();
    cleanups.push(() => database.drop());
    const run = await procs.cli(['migrate'], { DATABASE_URL: database.url });
    expect(run.code, run.stderr).toBe(0);
    expect(run.stdout).toMatch(/^Applied \d+ migrations \(0 were already applied\); the database is up to date\.\n$/);
  });

  it('on the embedded database, while a server runs, answers through it', async () => {
    const dir = await procs.migratedDataDir();
    const server = procs.server({ DATA_DIR: dir });
    await server.ready;
    const run = await procs.cli(['migrate'], { DATA_DIR: dir });
    expect(run.code, run.stderr).toBe(0);
    // The database is migrated (a copy of the run's template, or by the server at its start): nothing is new for the CLI.
    expect(run.stdout).toMatch(/^The database is up to date: \d+ migrations already applied, none new\.\n$/);
  });
});

describe('cli signing-keys (issue 43)', () => {
  const kids = async (baseUrl: string) =>
    ((await (await fetch(`${baseUrl}/.well-known/jwks.json`)).json()) as { keys: { kid: string }[] }).keys.map(
      (k) => k.kid,
    );

  it('on the embedded database, while a server runs: rotates through it, sealed with its key, published at once', async () => {
    const dir = await procs.migratedDataDir();
    const env = { DATA_DIR: dir, ...TEST_HASHES };
    const server = procs.server(env);
    await server.ready;
    // The first request that needs a key makes one.
    const [first] = await kids(server.baseUrl);
    expect(first).toMatch(/^[A-Za-z0-9_-]{43}$/);
    const rotated = await procs.cli(['signing-keys', 'rotate'], env);
    expect(rotated.code, rotated.stderr).toBe(0);
    const kid = /^Published signing key ([A-Za-z0-9_-]{43}) /.exec(rotated.stdout)?.[1];
    expect(kid).toBeDefined();
    // The server that ran it read its keys again: the new key is served now, before it signs.
    expect(await kids(server.baseUrl)).toEqual([kid, first]);
    const listed = await procs.cli(['signing-keys', 'list', '--json'], env);
    const keys = JSON.parse(listed.stdout) as { kid: string; state: string; sealedWith: string }[];
    // Both sealed with DATA_DIR/factor-key's key (`dev`), the server's and the CLI's alike.
    expect(keys.map((k) => [k.kid, k.state, k.sealedWith])).toEqual([
      [kid, 'pending', 'dev'],
      [first, 'signing', 'dev'],
    ]);
  });
});
