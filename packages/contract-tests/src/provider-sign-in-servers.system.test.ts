// Sign-in with a provider across three servers on one PostgreSQL (issue 59, "Done when"): a start
// on one and the callback on another work; a state used on one is refused on the others. The
// servers are in this process (one serverTarget each, one database), the provider is the real
// oidc-provider of oauth-peers.ts.
import { createClient } from '@user-accounts/client';
import { checkProvider } from '@user-accounts/server/providers/options';
import { setProvider } from '@user-accounts/server/providers/providers';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Person, signInAt, startOidcProvider } from './oauth-peers.ts';
import {
  migratedPostgresDatabase,
  postgresUnavailable,
  serverTarget,
  type Target,
  TEST_FACTOR_KEY,
} from './targets.ts';

const CALLBACK = 'https://shop.example.com/auth/callback';
const skip = await postgresUnavailable();

describe.skipIf(skip !== undefined)(
  `three servers on one PostgreSQL: sign-in with a provider${skip ? ` (${skip})` : ''}`,
  () => {
    const people = new Map<string, Person>();
    let servers: Target[] = [];
    let op: Awaited<ReturnType<typeof startOidcProvider>>;
    let token = '';

    beforeAll(async () => {
      op = await startOidcProvider(
        [{ client_id: 'op-client', client_secret: 'three-servers-secret', redirect_uris: [CALLBACK] }],
        people,
      );
      const database = await migratedPostgresDatabase();
      const env = { env: { FACTOR_ENCRYPTION_KEY: TEST_FACTOR_KEY } };
      const first = await serverTarget({ DATABASE_URL: database.url }, database.drop, env);
      const others = await Promise.all(
        [1, 2].map(() => serverTarget({ DATABASE_URL: database.url }, async () => {}, env)),
      );
      servers = [first, ...others];
      ({ token } = await first.createToken({
        site: 'three',
        scopes: ['read', 'write', 'verify'],
        label: 'three servers',
      }));
      const deps = first.deps!();
      const config = checkProvider({
        site: 'three',
        name: 'idp',
        issuer: op.issuer,
        clientId: 'op-client',
        scopes: 'openid,email,profile',
        redirectUris: CALLBACK,
        onNewPerson: 'create',
      });
      await setProvider(deps.database.db, config, 'three-servers-secret', deps.factorKeys);
    }, 120_000);
    afterAll(async () => {
      // The first server's cleanup drops the database: the others close first.
      for (const server of servers.slice(1).concat(servers.slice(0, 1))) await server.close();
      await op?.close();
    });

    const clientOf = (server: Target) => createClient({ baseUrl: server.baseUrl, token });

    it('completes on another server what one started, and refuses the used state on all three', async () => {
      const [a, b, c] = servers.map(clientOf) as [
        ReturnType<typeof clientOf>,
        ReturnType<typeof clientOf>,
        ReturnType<typeof clientOf>,
      ];
      const person = {
        sub: `three-${Date.now()}`,
        email: `three-${Date.now()}@example.org`,
        email_verified: true,
        name: 'Three',
      };
      people.set(person.sub, person);
      const started = await a.POST('/api/1/provider/start', { body: { provider: 'idp', redirectUri: CALLBACK } });
      expect(started.response.status).toBe(200);
      const back = await signInAt(started.data!.result.authorizationUrl, person.sub, CALLBACK);
      const done = await b.POST('/api/1/provider/callback', { body: { callbackUrl: back, session: {} } });
      expect(done.response.status, JSON.stringify(done.error)).toBe(201);
      for (const other of [a, b, c]) {
        const again = await other.POST('/api/1/provider/callback', { body: { callbackUrl: back } });
        expect(again.response.status).toBe(422);
        expect(again.error?.code).toBe('invalid_state');
      }
      // And the person signs in again through the third server.
      const next = await c.POST('/api/1/provider/start', { body: { provider: 'idp', redirectUri: CALLBACK } });
      const back2 = await signInAt(next.data!.result.authorizationUrl, person.sub, CALLBACK);
      const login = await a.POST('/api/1/provider/callback', { body: { callbackUrl: back2 } });
      expect(login.response.status).toBe(200);
    });
  },
);
