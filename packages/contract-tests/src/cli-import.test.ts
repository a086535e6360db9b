// `cli import` and `cli export` as an operator runs them: a file of accounts exported elsewhere,
// streamed in through the import's own checks, then signed in to through a server; and an
// export that goes back in.
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createClient } from '@user-accounts/client';
import { processes } from '@user-accounts/server/testing/processes';
import { mintToken } from '@user-accounts/server/tokens';
import postgres from 'postgres';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { FIREBASE_SAMPLE, FOREIGN_HASHES } from './import-suite.ts';
import { freshPostgresDatabase, postgresUnavailable } from './targets.ts';

const procs = processes();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});
afterAll(() => procs.cleanup());

const argon2 = FOREIGN_HASHES.find((f) => f.format === 'argon2id')!;
const bcrypt = FOREIGN_HASHES.find((f) => f.format === 'bcrypt')!;
const firebase = FIREBASE_SAMPLE;

function ndjson(dir: string, lines: string[]): string {
  const file = join(dir, 'accounts.ndjson');
  writeFileSync(file, `${lines.join('\n')}\n`);
  return file;
}

describe('cli import on PostgreSQL', async () => {
  const skip = await postgresUnavailable();
  if (skip) console.warn(`\n[contract-tests] cli import on PostgreSQL: SKIPPED, ${skip}\n`);
  it.skipIf(skip !== undefined)(
    'imports 100,000 lines, tells each refused line and the count by code, shows progress, and the accounts sign in',
    async () => {
      const database = await freshPostgresDatabase();
      cleanups.push(() => database.drop());
      const env = { DATABASE_URL: database.url };
      expect((await procs.cli(['migrate'], env)).code).toBe(0);
      const lines = Array.from({ length: 100_000 }, (_, i) =>
        JSON.stringify({ email: `user${i}@example.org`, name: `User ${i}`, passwordHash: argon2.hash }),
      );
      lines[41] = '{"email": "cut off';
      // Repeated in its own batch of 1,000, and in a later one.
      lines[500] = JSON.stringify({ email: 'USER7@example.org', name: 'Again', passwordHash: argon2.hash });
      lines[99_999] = JSON.stringify({ email: 'user7@EXAMPLE.org', name: 'Later', passwordHash: argon2.hash });
      const file = ndjson(procs.dataDir(), lines);

      const run = await procs.cli(['import', '--site', 'acme', file], env);
      expect(run.code, run.stderr).toBe(1);
      expect(run.stdout).toMatch(
        /^99997 of 100000 accounts imported into site acme in [\d.]+ s \(\d+ accounts\/s\)\.$/m,
      );
      expect(run.stdout).toContain('3 refused: email_taken 2, invalid_json 1.');
      expect(run.stdout).toContain('line 42: invalid_json');
      expect(run.stdout).toContain('line 501: email_taken: email is the email of line 8');
      expect(run.stdout).toContain('line 100000: email_taken: email is already in use');
      // Not a terminal: plain progress lines, the last one at the end.
      expect(run.stderr).toMatch(/^import: 100000\/100000 rows, \d+ rows\/s, ETA 0 s$/m);

      const server = procs.server({ ...env, API_TOKENS: mintToken() });
      await server.ready;
      const created = await procs.cli(
        ['token', 'create', '--site', 'acme', '--scopes', 'read,verify', '--label', 't'],
        env,
      );
      const token = /^ {2}(ua_\S+)$/m.exec(created.stdout)![1]!;
      const client = createClient({ baseUrl: server.baseUrl, token });
      const count = await client.GET('/api/1/user/get', { params: { query: { email: 'user99998@example.org' } } });
      expect(count.response.status).toBe(200);
      const login = await client.POST('/api/1/user/verify', {
        body: { email: 'user7@example.org', password: argon2.password },
      });
      expect(login.response.status).toBe(200);
      server.child.kill('SIGTERM');
      await server.exited;

      // Again, as a dry run: every line is now taken, and nothing is written.
      const again = await procs.cli(['import', '--site', 'acme', '--dry-run', file], env);
      expect(again.stdout).toMatch(/^0 of 100000 accounts would be imported/m);
      expect(again.stdout).toContain('email_taken 99999');
      expect(again.code).toBe(1);
    },
    180_000,
  );
});

describe('export on PostgreSQL', async () => {
  const skip = await postgresUnavailable();
  if (skip) console.warn(`\n[contract-tests] export on PostgreSQL: SKIPPED, ${skip}\n`);
  it.skipIf(skip !== undefined)(
    'streams 200,000 accounts with flat memory, and cli export gives a file cli import takes into another site, passwords and all',
    async () => {
      const database = await freshPostgresDatabase();
      cleanups.push(() => database.drop());
      const env = { DATABASE_URL: database.url };
      const server = procs.server({ ...env, API_TOKENS: mintToken() });
      await server.ready;
      const token = async (scopes: string) =>
        /^ {2}(ua_\S+)$/m.exec(
          (await procs.cli(['token', 'create', '--site', 'acme', '--scopes', scopes, '--label', scopes], env)).stdout,
        )![1]!;
      const writer = createClient({ baseUrl: server.baseUrl, token: await token('write') });
      await writer.POST('/api/1/user/create', {
        body: { email: 'ada@example.com', password: 'a long and unusual passphrase', name: 'Ada', phone: '+44 1' },
      });
      const sql = postgres(database.url, { max: 1, onnotice: () => {} });
      await sql`insert into users (id, site, email, name, password_hash, origin)
        select gen_random_uuid(), 'acme', 'bulk' || i || '@example.com', 'Bulk ' || i, ${argon2.hash}, 'api'
        from generate_series(1, 199999) as i`;
      await sql.end();

      // Over HTTP, read slowly at first: the server holds a page or two, never the export.
      const rss = () =>
        Number(/VmRSS:\s+(\d+)/.exec(readFileSync(`/proc/${server.child.pid}/status`, 'utf8'))![1]) / 1024;
      const before = rss();
      let peak = before;
      const response = await fetch(`${server.baseUrl}/api/1/user/export`, {
        headers: { Authorization: await token('export') },
      });
      let lines = 0;
      let chunks = 0;
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        for (const byte of chunk) if (byte === 10) lines++;
        if (chunks++ < 20) await new Promise((r) => setTimeout(r, 20));
        if (chunks % 10 === 0) peak = Math.max(peak, rss());
      }
      expect(lines).toBe(200_000);
      expect(peak - before).toBeLessThan(50);
      server.child.kill('SIGTERM');
      await server.exited;

      const exported = await procs.cli(['export', '--site', 'acme'], env);
      expect(exported.code, exported.stderr).toBe(0);
      expect(exported.stderr).toMatch(/^Exported 200000 accounts of site acme in [\d.]+ s/m);
      const file = ndjson(procs.dataDir(), exported.stdout.trimEnd().split('\n'));
      const imported = await procs.cli(['import', '--site', 'copy', file], env);
      expect(imported.stdout).toMatch(/^200000 of 200000 accounts imported into site copy/m);

      const again = procs.server({ ...env, API_TOKENS: mintToken() });
      await again.ready;
      const created = await procs.cli(
        ['token', 'create', '--site', 'copy', '--scopes', 'read,verify', '--label', 'c'],
        env,
      );
      const copy = createClient({ baseUrl: again.baseUrl, token: /^ {2}(ua_\S+)$/m.exec(created.stdout)![1]! });
      const login = await copy.POST('/api/1/user/verify', {
        body: { email: 'ada@example.com', password: 'a long and unusual passphrase' },
      });
      expect(login.response.status).toBe(200);
      const ada = await copy.GET('/api/1/user/get', { params: { query: { email: 'ada@example.com' } } });
      expect(ada.data?.result.phone).toBe('+44 1');
      again.child.kill('SIGTERM');
      await again.exited;
    },
    240_000,
  );
});

describe('cli import on the embedded database', () => {
  it('is refused while a server runs on it, then imports passwords and hashes once the server is stopped', async () => {
    const dir = procs.dataDir();
    const env = { DATA_DIR: dir };
    const file = ndjson(procs.dataDir(), [
      JSON.stringify({ email: 'ada@example.com', name: 'Ada', password: 'a long and unusual passphrase' }),
      JSON.stringify({ email: 'bob@example.com', name: 'Bob', passwordHash: bcrypt.hash, phone: '+44 20 7946 0018' }),
      '',
      JSON.stringify({ email: 'eve@example.com', name: 'Eve', password: 'password' }),
      JSON.stringify({
        email: 'fay@example.com',
        name: 'Fay',
        passwordHash: firebase.hash,
        passwordSalt: firebase.salt,
      }),
    ]);
    const params = join(procs.dataDir(), 'firebase.json');
    writeFileSync(params, JSON.stringify(firebase.firebase));
    let server = procs.server(env);
    await server.ready;
    const refused = await procs.cli(['import', '--site', 'default', file], env);
    expect(refused.code).toBe(1);
    expect(refused.stderr).toContain('stop it to import from the CLI, or send the rows to POST /api/1/user/import');
    server.child.kill('SIGTERM');
    await server.exited;

    const dry = await procs.cli(['import', '--site', 'default', '--dry-run', '--firebase-scrypt', params, file], env);
    expect(dry.code).toBe(1);
    expect(dry.stdout).toMatch(/^3 of 4 accounts would be imported/m);
    const run = await procs.cli(['import', '--site', 'default', file, '--firebase-scrypt', params], env);
    expect(run.code).toBe(1);
    expect(run.stdout).toMatch(/^3 of 4 accounts imported into site default/m);
    expect(run.stdout).toContain('line 4: weak_password: password is too common');

    server = procs.server(env);
    await server.ready;
    const client = createClient({
      baseUrl: server.baseUrl,
      token: readFileSync(join(dir, 'dev-token'), 'utf8').trim(),
    });
    for (const [email, password] of [
      ['ada@example.com', 'a long and unusual passphrase'],
      ['bob@example.com', bcrypt.password],
      ['fay@example.com', firebase.password],
    ]) {
      const { response } = await client.POST('/api/1/user/verify', { body: { email: email!, password: password! } });
      expect(response.status, email).toBe(200);
    }
    const bob = await client.GET('/api/1/user/get', { params: { query: { email: 'bob@example.com' } } });
    expect(bob.data?.result.phone).toBe('+44 20 7946 0018');
  }, 60_000);

  it.each([
    [['import', 'x.ndjson'], '--site needs a value'],
    [['import', '--site', 'acme'], 'needs one file'],
    [['import', '--site', 'acme', 'a', 'b'], 'needs one file'],
    [['import', '--site', 'acme', 'a', '--force'], 'unknown option --force'],
  ])('refuses %j with one line and the command usage', async (argv, message) => {
    const result = await procs.cli(argv, { DATA_DIR: procs.dataDir() });
    expect(result.code).toBe(2);
    expect(result.stderr.split('\n')[0]).toContain(message);
    expect(result.stderr).toContain('Usage: cli import --site NAME FILE.ndjson [--dry-run]');
  });
});
