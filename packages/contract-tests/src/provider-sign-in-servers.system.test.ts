// Sign-in with a provider across three server processes on one PostgreSQL (issue 59, "Done
// when"), as an operator runs them: `cli provider set`, then a start on one replica and the
// callback on another work, and a state used on one is refused on all three. The servers are the
// build a release ships (testing/processes.ts), started once for the file; the provider is the real
// oidc-provider of oauth-peers.ts, on a loopback port.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient, type UserAccountsClient } from '@user-accounts/client';
import { processes, type Running } from '@user-accounts/server/testing/processes';
import { mintToken } from '@user-accounts/server/tokens';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Person, signInAt, startOidcProvider } from './oauth-peers.ts';
import { migratedPostgresDatabase, postgresUnavailable, TEST_FACTOR_KEY, TEST_HASHES } from './targets.ts';

const CALLBACK = 'https://shop.example.com/auth/callback';
const SECRET = 'three-processes-client-secret-0123456789';
const skip = await postgresUnavailable();

describe.skipIf(skip !== undefined)(
  `three server processes on one PostgreSQL: sign-in with a provider${skip ? ` (${skip})` : ''}`,
  () => {
    const procs = processes();
    const people = new Map<string, Person>();
    let dir = '';
    let servers: Running[] = [];
    let op: Awaited<ReturnType<typeof startOidcProvider>>;
    let drop = async () => {};
    const token = mintToken();

    beforeAll(async () => {
      op = await startOidcProvider(
        [{ client_id: 'op-client', client_secret: SECRET, redirect_uris: [CALLBACK] }],
        people,
      );
      const database = await migratedPostgresDatabase();
      drop = database.drop;
      const env = {
        DATABASE_URL: database.url,
        ...TEST_HASHES,
        API_TOKENS: token,
        FACTOR_ENCRYPTION_KEY: TEST_FACTOR_KEY,
      };
      dir = mkdtempSync(join(tmpdir(), 'provider-servers-'));
      const secretFile = join(dir, 'secret');
      writeFileSync(secretFile, `${SECRET}\n`, { mode: 0o600 });
      // The database is migrated: the three start side by side, and the CLI beside them.
      servers = [0, 1, 2].map(() => procs.server(env));
      const set = await procs.cli(
        [
          'provider',
          'set',
          '--site',
          'default',
          '--name',
          'idp',
          '--issuer',
          op.issuer,
          '--client-id',
          'op-client',
          '--client-secret-file',
          secretFile,
          '--scopes',
          'openid,email,profile',
          '--redirect-uris',
          CALLBACK,
          '--on-new-person',
          'create',
        ],
        env,
      );
      await Promise.all(servers.map((s) => s.ready));
      expect(set.code, set.stderr).toBe(0);
      expect(set.stdout + set.stderr).not.toContain(SECRET);
    }, 120_000);
    afterAll(async () => {
      procs.cleanup();
      await Promise.all(servers.map((s) => s.exited));
      await Promise.all([op?.close(), drop()]);
      if (dir !== '') rmSync(dir, { recursive: true, force: true });
    });

    const clientOf = (server: Running) => createClient({ baseUrl: server.baseUrl, token });

    it('completes on another process what one started, refuses the used state on all three, and keeps no secret in their logs', async () => {
      const [a, b, c] = servers.map(clientOf) as [UserAccountsClient, UserAccountsClient, UserAccountsClient];
      const person = {
        sub: `three-${Date.now()}`,
        email: `three-${Date.now()}@example.org`,
        email_verified: true,
        name: 'Three',
      };
      people.set(person.sub, person);
      const started = await a.POST('/api/1/provider/start', { body: { provider: 'idp', redirectUri: CALLBACK } });
      expect(started.response.status, JSON.stringify(started.error)).toBe(200);
      const back = await signInAt(started.data!.result.authorizationUrl, person.sub, CALLBACK);
      const done = await b.POST('/api/1/provider/callback', { body: { callbackUrl: back, session: {} } });
      expect(done.response.status, JSON.stringify(done.error)).toBe(201);
      const userId = (done.data as unknown as { result: { _userId: string } }).result._userId;
      for (const other of [a, b, c]) {
        const again = await other.POST('/api/1/provider/callback', { body: { callbackUrl: back } });
        expect(again.response.status).toBe(422);
        expect(again.error?.code).toBe('invalid_state');
      }
      // And the person signs in again: started on the third, completed on the first.
      const next = await c.POST('/api/1/provider/start', { body: { provider: 'idp', redirectUri: CALLBACK } });
      const back2 = await signInAt(next.data!.result.authorizationUrl, person.sub, CALLBACK);
      const login = await a.POST('/api/1/provider/callback', { body: { callbackUrl: back2 } });
      expect(login.response.status).toBe(200);
      expect(login.data!.result._userId).toBe(userId);

      const state = new URL(back).searchParams.get('state')!;
      const code = new URL(back).searchParams.get('code')!;
      const logs = servers.map((s) => s.stdout() + s.stderr()).join('\n');
      expect([SECRET, state, code].filter((s) => logs.includes(s))).toEqual([]);
    });
  },
);
