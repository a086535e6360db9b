// A lockout support staff can see and lift (issue 64, point 1), through the client, on PGlite and
// PostgreSQL: `get` shows the account's lock and its recent failures (never an end user's
// address), failed sign-ins of an existing account are in its audit trail while the caller's answer
// stays that of an unknown email, and `unlock` (audited, `user.unlocked`) lets the right password
// in at once; on two servers sharing one PostgreSQL, and Redis (TEST_REDIS_URL), on every server.
import type { Problem, UserAccountsClient } from '@user-accounts/client';
import { afterAll, describe, expect, it } from 'vitest';
import { checkedClient, GHOST, useTarget, withoutRequestId } from './harness.ts';
import {
  migratedPostgresDatabase,
  pgliteTarget,
  postgresTarget,
  postgresUnavailable,
  serverTarget,
  type Target,
  type TargetSpec,
} from './targets.ts';

/** VERIFY_LIMIT's default: 10 wrong passwords within 15 minutes lock the account for a minute. */
const LIMIT = 10;
const ADDRESS = '203.0.113.77';

const wrongTimes = async (client: UserAccountsClient, email: string, times: number) => {
  const statuses: number[] = [];
  for (let i = 0; i < times; i++) {
    const { response } = await client.POST('/api/1/user/verify', {
      body: { email, password: `wrong password ${i}` },
      headers: { 'X-End-User-IP': ADDRESS },
    });
    statuses.push(response.status);
  }
  return statuses;
};
const verify = (client: UserAccountsClient, email: string, password: string) =>
  client.POST('/api/1/user/verify', { body: { email, password }, headers: { 'X-End-User-IP': ADDRESS } });
const lockoutOf = async (client: UserAccountsClient, _userId: string) => {
  const { data, error } = await client.GET('/api/1/user/get', { params: { query: { _userId } } });
  expect(error, JSON.stringify(error)).toBeUndefined();
  return data!.lockout;
};

function defineLockoutSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) {
    describe.skip(`${spec.name}: lockouts seen and lifted (${spec.skip ?? 'stateless'})`, () => {
      it('skipped', () => {});
    });
    return;
  }
  describe(`${spec.name}: lockouts seen and lifted`, () => {
    const h = useTarget(spec);

    it('get shows no lockout for an account never tried, then the failures as they are counted', async () => {
      const ada = await h.createUser();
      expect(await lockoutOf(h.client, ada.id)).toEqual({
        locked: false,
        lockedUntil: null,
        failures: 0,
        secondFactorFailures: 0,
        lastFailureAt: null,
      });
      expect(await wrongTimes(h.client, ada.email, 3)).toEqual([422, 422, 422]);
      const after = await lockoutOf(h.client, ada.id);
      expect(after).toMatchObject({ locked: false, lockedUntil: null, failures: 3, secondFactorFailures: 0 });
      expect(Date.parse(after.lastFailureAt!)).toBeGreaterThan(Date.now() - 60_000);
      // A right password clears the count, as verify always did.
      expect((await verify(h.client, ada.email, ada.password)).response.status).toBe(200);
      expect((await lockoutOf(h.client, ada.id)).failures).toBe(0);
    });

    it('get shows a locked account as locked until when, without naming the address the guesses came from', async () => {
      const ada = await h.createUser();
      expect(await wrongTimes(h.client, ada.email, LIMIT)).toEqual(Array(LIMIT).fill(422));
      const { error, response } = await verify(h.client, ada.email, ada.password);
      expect(response.status).toBe(429);
      expect(error?.code).toBe('too_many_attempts');
      const { data } = await h.client.GET('/api/1/user/get', { params: { query: { _userId: ada.id } } });
      const lockout = data!.lockout;
      expect(lockout).toMatchObject({ locked: true, failures: LIMIT, secondFactorFailures: 0 });
      const until = Date.parse(lockout.lockedUntil!);
      expect(until).toBeGreaterThan(Date.now());
      expect(until).toBeLessThanOrEqual(Date.now() + 61_000);
      expect(JSON.stringify(data)).not.toContain(ADDRESS);
      expect(JSON.stringify(data)).not.toContain('203.0.113');
    });

    it("names the account in the audit row of each failed sign-in; the caller's answer stays an unknown email's", async () => {
      const ada = await h.createUser();
      const wrong = await verify(h.client, ada.email, 'not her password');
      const unknown = await verify(h.client, h.uniqueEmail('nobody'), 'not her password');
      expect(wrong.response.status).toBe(422);
      expect(withoutRequestId(wrong.error as Problem)).toEqual(withoutRequestId(unknown.error as Problem));
      const { data } = await h.client.GET('/api/1/audit', { params: { query: { _userId: ada.id } } });
      expect(data!.result.entries.map((e) => [e.operation, e.status, e.outcome])).toEqual([
        ['verify', 422, 'invalid_credentials'],
        ['create', 201, 'user created'],
      ]);
    });

    it('unlock lifts the lock at once: the right password signs in, audited with who did it, one user.unlocked event', async () => {
      const support = await h.target.createToken({ scopes: ['read', 'write'], label: 'Ada (support)' });
      const staff = h.clientFor(support.token);
      const ada = await h.createUser();
      expect(await wrongTimes(h.client, ada.email, LIMIT)).toEqual(Array(LIMIT).fill(422));
      expect((await verify(h.client, ada.email, ada.password)).response.status).toBe(429);
      const before = await h.client.GET('/api/1/user/get', { params: { query: { _userId: ada.id } } });

      const { data, error, response } = await staff.POST('/api/1/user/unlock', { body: { _userId: ada.id } });
      expect(error, JSON.stringify(error)).toBeUndefined();
      expect(data!.result.status).toBe('user unlocked');
      // The account did not change: its ETag is the same.
      expect(response.headers.get('etag')).toBe(before.response.headers.get('etag'));
      expect(await lockoutOf(h.client, ada.id)).toMatchObject({ locked: false, lockedUntil: null, failures: 0 });
      const signedIn = await verify(h.client, ada.email, ada.password);
      expect(signedIn.response.status).toBe(200);
      expect(signedIn.data!.result._userId).toBe(ada.id);

      const trail = await h.client.GET('/api/1/audit', { params: { query: { _userId: ada.id, limit: 3 } } });
      const unlock = trail.data!.result.entries.find((e) => e.operation === 'unlock');
      expect(unlock).toMatchObject({ status: 200, outcome: 'user unlocked', tokenId: support.id });
      expect(unlock!.tokenLabel).toBe('Ada (support)');
      const events = await h.client.GET('/api/1/events', { params: { query: { subject: ada.id, limit: 100 } } });
      const unlocked = events.data!.result.events.filter((e) => e.type === 'user.unlocked');
      expect(unlocked).toHaveLength(1);
      expect(unlocked[0]!.data).toMatchObject({ _userId: ada.id, email: ada.email });

      // Nothing counted: 200 as well, and no second event.
      expect((await staff.POST('/api/1/user/unlock', { body: { _userId: ada.id } })).response.status).toBe(200);
      const again = await h.client.GET('/api/1/events', { params: { query: { subject: ada.id, limit: 100 } } });
      expect(again.data!.result.events.filter((e) => e.type === 'user.unlocked')).toHaveLength(1);
    });

    it('unlock of no account is 404 user_not_found; a read token is refused 403', async () => {
      const { error, response } = await h.client.POST('/api/1/user/unlock', { body: { _userId: GHOST } });
      expect(response.status).toBe(404);
      expect(error?.code).toBe('user_not_found');
      const reader = h.clientFor((await h.target.createToken({ scopes: ['read'], label: 'reader' })).token);
      const ada = await h.createUser();
      const refused = await reader.POST('/api/1/user/unlock', { body: { _userId: ada.id } });
      expect(refused.response.status).toBe(403);
      expect(refused.error?.code).toBe('forbidden');
    });
  });
}

defineLockoutSuite(pgliteTarget);
defineLockoutSuite(await postgresTarget());

// Two servers on one PostgreSQL (a deployment's replicas), the counts in the database or in Redis.
describe('unlock on a deployment of two servers', async () => {
  const skipPostgres = await postgresUnavailable();
  const redisUrl = process.env.TEST_REDIS_URL;
  const stores: [string, string | undefined, Record<string, string>][] = [
    ['counts in the database', skipPostgres, {}],
    [
      'counts in Redis',
      skipPostgres ?? (redisUrl ? undefined : 'TEST_REDIS_URL is not set'),
      redisUrl ? { REDIS_URL: redisUrl } : {},
    ],
  ];
  const started: Target[] = [];
  afterAll(async () => {
    for (const t of started.reverse()) await t.close();
  });
  for (const [store, skip, env] of stores) {
    it.skipIf(skip !== undefined)(
      `unlock lets the right password in at once on every server (${store})`,
      async () => {
        const database = await migratedPostgresDatabase();
        const first = await serverTarget({ DATABASE_URL: database.url }, database.drop, { env });
        started.push(first);
        const second = await serverTarget({ DATABASE_URL: database.url }, async () => {}, { env });
        started.push(second);
        const [a, b] = [checkedClient(first.baseUrl, first.token), checkedClient(second.baseUrl, second.token)];
        const email = `locked.${Date.now()}@example.org`;
        const password = 'a long and unusual passphrase';
        const created = await a.POST('/api/1/user/create', { body: { email, password, name: 'Ada Lovelace' } });
        const id = created.data!.result._userId;
        // Five wrong on each: the account's one count, whichever server was asked.
        expect([...(await wrongTimes(a, email, 5)), ...(await wrongTimes(b, email, 5))]).toEqual(
          Array(LIMIT).fill(422),
        );
        expect((await verify(a, email, password)).response.status).toBe(429);
        expect((await verify(b, email, password)).response.status).toBe(429);
        expect(await lockoutOf(a, id)).toMatchObject({ locked: true, failures: LIMIT });
        expect(await lockoutOf(b, id)).toMatchObject({ locked: true, failures: LIMIT });

        expect((await b.POST('/api/1/user/unlock', { body: { _userId: id } })).response.status).toBe(200);
        expect(await lockoutOf(a, id)).toMatchObject({ locked: false, failures: 0 });
        expect((await verify(a, email, password)).response.status).toBe(200);
        expect((await verify(b, email, password)).response.status).toBe(200);
      },
      120_000,
    );
  }
});
