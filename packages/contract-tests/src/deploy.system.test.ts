// The README's deploy sequence on PostgreSQL, step by step as an operator types it: build, migrate,
// mint a token with the CLI, start the built server without API_TOKENS, call it with that token.
import { spawnSync } from 'node:child_process';
import { rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { createClient } from '@user-accounts/client';
import { processes } from '@user-accounts/server/testing/processes';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPostgresDatabase, postgresUnavailable } from './targets.ts';

const SERVER = fileURLToPath(new URL('../../server/', import.meta.url));
// Inside the server package, so that its two external dependencies resolve from its node_modules.
const OUT = `${SERVER}dist-deploy-test-${process.pid}`;
const skip = await postgresUnavailable();
if (skip !== undefined) console.warn(`\n[contract-tests] deploy sequence on PostgreSQL: SKIPPED, ${skip}\n`);

const procs = processes();
const drops: (() => Promise<void>)[] = [];
const node = (args: string[], env: Record<string, string>) =>
  spawnSync(process.execPath, args, { env: { PATH: process.env.PATH ?? '', ...env }, encoding: 'utf8' });

describe.skipIf(skip !== undefined)('the README deploy sequence on PostgreSQL', () => {
  beforeAll(() => {
    const built = node([`${SERVER}build.ts`, OUT], {});
    expect(built.status, built.stderr).toBe(0);
  }, 180_000);
  afterAll(async () => {
    procs.cleanup();
    rmSync(OUT, { recursive: true, force: true });
    await Promise.all(drops.map((drop) => drop()));
  });

  it('serves with only a token minted by `cli token create` (no API_TOKENS)', async () => {
    const database = await freshPostgresDatabase();
    drops.push(database.drop);
    const env = { DATABASE_URL: database.url, HOST: '127.0.0.1' };
    const migrated = node([`${OUT}/cli.js`, 'migrate'], env);
    expect(migrated.status, migrated.stderr).toBe(0);
    const minted = node(
      [`${OUT}/cli.js`, 'token', 'create', '--site', 'shop', '--scopes', 'read,write', '--label', 'shop backend'],
      env,
    );
    expect(minted.status, minted.stderr).toBe(0);
    const token = /^ {2}(ua_[A-Za-z0-9_-]{43})$/m.exec(minted.stdout)?.[1];
    expect(token).toBeDefined();

    const server = procs.server(env, `${OUT}/main.js`);
    await server.ready;
    const client = createClient({ baseUrl: server.baseUrl, token: token! });
    const { data, response } = await client.POST('/api/1/user/create', {
      body: { email: 'deployed@example.com', password: 'a deployed passphrase', name: 'Deployed' },
    });
    expect(response.status).toBe(201);
    const got = await client.GET('/api/1/user/get', { params: { query: { _userId: data!.result._userId } } });
    expect(got.data?.result.email).toBe('deployed@example.com');
  }, 180_000);

  it('refuses to start with neither API_TOKENS nor a usable token in the database, saying both ways out', async () => {
    const database = await freshPostgresDatabase();
    drops.push(database.drop);
    const server = procs.server({ DATABASE_URL: database.url }, `${OUT}/main.js`);
    expect(await server.exited).toBe(1);
    expect(server.stderr()).toMatch(/no API token: set API_TOKENS .*or mint one .*cli token create/);
  }, 180_000);
});
