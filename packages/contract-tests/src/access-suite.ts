// Who may do what: sites, token scopes, revocation and expiry, and the rate-limit fields that
// come with every answer to a valid token. Needs state (tokens, accounts): server targets only.

import type { Problem, UserAccountsClient } from '@user-accounts/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { API, GHOST, useTarget, withoutRequestId } from './harness.ts';
import type { TargetSpec } from './targets.ts';

export function defineAccessSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: sites, scopes and tokens`, () => {
    const h = useTarget(spec);
    const sites: Record<'A' | 'B', { client: UserAccountsClient; name: string }> = {} as never;

    beforeAll(async () => {
      const other = await h.target.createToken({ site: 'site-b', label: 'site B backend' });
      sites.A = { client: h.client, name: 'default' };
      sites.B = { client: h.clientFor(other.token), name: 'site-b' };
    });

    describe.each([
      ['A', 'B'],
      ['B', 'A'],
    ] as const)("a token of site %s and site %s's accounts", (actorSite, ownerSite) => {
      it('answers every operation on the other site exactly as for a missing account, and changes nothing', async () => {
        const actor = sites[actorSite].client;
        const victim = await h.createUser({ phone: '+1 555 0100' }, sites[ownerSite].client);
        const before = await h.rowOf(victim.id);
        const missing = await actor.GET('/api/1/user/get', { params: { query: { _userId: GHOST } } });
        expect(missing.response.status).toBe(404);

        const attempts = [
          await actor.GET('/api/1/user/get', { params: { query: { _userId: victim.id } } }),
          await actor.GET('/api/1/user/get', { params: { query: { email: victim.email } } }),
          await actor.POST('/api/1/user/update', { body: { _userId: victim.id, name: 'Taken over', phone: null } }),
          await actor.POST('/api/1/user/update', { body: { _userId: victim.id, password: h.password() } }),
          await actor.DELETE('/api/1/user/delete', { body: { _userId: victim.id } }),
        ];
        for (const attempt of attempts) {
          expect(attempt.response.status).toBe(404);
          expect(withoutRequestId(attempt.error)).toEqual(withoutRequestId(missing.error));
        }
        expect(await h.rowOf(victim.id)).toEqual(before);
      });

      it('reads, updates and deletes its own accounts', async () => {
        const actor = sites[actorSite].client;
        const own = await h.createUser({}, actor);
        expect((await actor.GET('/api/1/user/get', { params: { query: { email: own.email } } })).response.status).toBe(
          200,
        );
        expect(
          (await actor.POST('/api/1/user/update', { body: { _userId: own.id, name: 'Renamed' } })).response.status,
        ).toBe(200);
        expect((await actor.DELETE('/api/1/user/delete', { body: { _userId: own.id } })).response.status).toBe(200);
        expect(await h.rowOf(own.id)).toBeUndefined();
      });
    });

    it('keeps emails unique per site: the same email may exist once in each site', async () => {
      const email = h.uniqueEmail('shared');
      const inA = await h.createUser({ email }, sites.A.client);
      const inB = await h.createUser({ email: email.toUpperCase() }, sites.B.client);
      expect(inA.id).not.toBe(inB.id);
      const again = await sites.B.client.POST('/api/1/user/create', {
        body: { email, password: h.password(), name: 'Twin' },
      });
      expect(again.response.status).toBe(409);
      expect(again.error?.code).toBe('email_taken');
      const rows = await h.target.sql('select site from users where lower(email) = lower($1) order by site', [email]);
      expect(rows).toEqual([{ site: 'default' }, { site: 'site-b' }]);
    });

    describe('scopes', () => {
      it('refuses every write of a read-only token with 403 forbidden, changing nothing, and lets it read', async () => {
        const reader = h.clientFor((await h.target.createToken({ scopes: ['read'], label: 'reporting' })).token);
        const user = await h.createUser();
        const before = await h.target.sql('select * from users order by id');
        const writes = [
          await reader.POST('/api/1/user/create', {
            body: { email: h.uniqueEmail(), password: h.password(), name: 'No' },
          }),
          await reader.POST('/api/1/user/update', { body: { _userId: user.id, name: 'No' } }),
          await reader.DELETE('/api/1/user/delete', { body: { _userId: user.id } }),
          // Refused before the body is looked at: a missing account is 403 too.
          await reader.DELETE('/api/1/user/delete', { body: { _userId: GHOST } }),
        ];
        for (const write of writes) {
          expect(write.response.status).toBe(403);
          expect(write.error?.code).toBe('forbidden');
        }
        expect(await h.target.sql('select * from users order by id')).toEqual(before);
        expect((await reader.GET('/api/1/user/get', { params: { query: { _userId: user.id } } })).response.status).toBe(
          200,
        );
      });

      it('refuses reads of a write-only token with 403 forbidden, and lets it write', async () => {
        const writer = h.clientFor((await h.target.createToken({ scopes: ['write'], label: 'sign-up' })).token);
        const user = await h.createUser({}, writer);
        const read = await writer.GET('/api/1/user/get', { params: { query: { _userId: user.id } } });
        expect(read.response.status).toBe(403);
        expect(read.error?.code).toBe('forbidden');
      });
    });

    describe('revocation and expiry', () => {
      // Restated by issue 13: accepted tokens are cached and a revocation is heard (LISTEN/NOTIFY),
      // so the promise is a bound of 1 s rather than the next request.
      it('refuses a revoked token within 1 s, with the body of an unknown token', async () => {
        const { id, token } = await h.target.createToken({ label: 'to be revoked' });
        const url = `${h.target.baseUrl}${API}/get?_userId=${GHOST}`;
        const before = await h.checkedFetch(new Request(url, { headers: { Authorization: token } }));
        expect(before.status).toBe(404);
        await h.target.revokeToken(id);
        const revoked = performance.now();
        let after = await h.checkedFetch(new Request(url, { headers: { Authorization: token } }));
        while (after.status !== 401 && performance.now() - revoked < 1_000) {
          await new Promise((resolve) => setTimeout(resolve, 5));
          after = await h.checkedFetch(new Request(url, { headers: { Authorization: token } }));
        }
        const unknown = await h.checkedFetch(
          new Request(url, { headers: { Authorization: 'ua_never_issued_0000000000000000000000' } }),
        );
        expect(after.status).toBe(401);
        expect(after.headers.get('www-authenticate')).toBe('Bearer realm="user-accounts", error="invalid_token"');
        expect(withoutRequestId((await after.json()) as Problem)).toEqual(
          withoutRequestId((await unknown.json()) as Problem),
        );
      });

      it('refuses an expired token with 401', async () => {
        const { token } = await h.target.createToken({ label: 'expired', expiresAt: new Date(Date.now() - 1000) });
        const { response, error } = await h
          .clientFor(token)
          .GET('/api/1/user/get', { params: { query: { _userId: GHOST } } });
        expect(response.status).toBe(401);
        expect(error?.code).toBe('unauthorized');
        expect(response.headers.get('www-authenticate')).toBe('Bearer realm="user-accounts", error="invalid_token"');
      });

      it('records when a token was last used, without a write per request', async () => {
        const { id, token } = await h.target.createToken({ label: 'last used' });
        const before = await h.target.sql('select last_used_at from api_tokens where id = $1', [id]);
        expect(before[0]!.last_used_at).toBeNull();
        const client = h.clientFor(token);
        for (let i = 0; i < 3; i++) await client.GET('/api/1/user/get', { params: { query: { _userId: GHOST } } });
        expect(
          (await h.target.sql('select last_used_at from api_tokens where id = $1', [id]))[0]!.last_used_at,
        ).toBeNull();
        await h.target.flushLastUsed();
        const [after] = await h.target.sql('select last_used_at from api_tokens where id = $1', [id]);
        expect(new Date(after!.last_used_at as string).getTime()).toBeGreaterThan(Date.now() - 60_000);
      });

      it("records each token's own last use, not the latest of any token flushed with it", async () => {
        // Found in a README walk-through: a revoked token showed the later use of another token.
        const early = await h.target.createToken({ label: 'used early' });
        const late = await h.target.createToken({ label: 'used late' });
        await h.clientFor(early.token).GET('/api/1/user/get', { params: { query: { _userId: GHOST } } });
        const between = Date.now();
        await new Promise((r) => setTimeout(r, 1100));
        await h.clientFor(late.token).GET('/api/1/user/get', { params: { query: { _userId: GHOST } } });
        await h.target.flushLastUsed();
        const at = async (id: string) =>
          new Date(
            (await h.target.sql('select last_used_at from api_tokens where id = $1', [id]))[0]!.last_used_at as string,
          ).getTime();
        expect(await at(early.id)).toBeLessThanOrEqual(between);
        expect(await at(late.id)).toBeGreaterThan(between + 1000);
      });

      it('stores tokens only as SHA-256 hashes with a display prefix', async () => {
        const { id, token } = await h.target.createToken({ label: 'stored' });
        const [row] = await h.target.sql('select * from api_tokens where id = $1', [id]);
        expect(JSON.stringify(row)).not.toContain(token);
        expect(row!.token_hash).toMatch(/^[0-9a-f]{64}$/);
        expect(token.startsWith(String(row!.prefix))).toBe(true);
      });
    });

    describe('rate-limit fields', () => {
      it('come with every answer to a valid token, "hash" only where a password is hashed; never with a 401', async () => {
        const user = await h.createUser();
        const get = await h.client.GET('/api/1/user/get', { params: { query: { _userId: user.id } } });
        expect(get.response.headers.get('ratelimit-policy')).toMatch(/^"all";q=\d+;w=\d+$/);
        expect(get.response.headers.get('ratelimit')).toMatch(/^"all";r=\d+;t=\d+$/);
        const create = await h.client.POST('/api/1/user/create', {
          body: { email: h.uniqueEmail(), password: h.password(), name: 'RL' },
        });
        expect(create.response.headers.get('ratelimit-policy')).toMatch(/^"all";q=\d+;w=\d+, "hash";q=\d+;w=\d+$/);
        expect(create.response.headers.get('ratelimit')).toMatch(/^"all";r=\d+;t=\d+, "hash";r=\d+;t=\d+$/);
        const rename = await h.client.POST('/api/1/user/update', { body: { _userId: user.id, name: 'Renamed' } });
        expect(rename.response.headers.get('ratelimit-policy')).toMatch(/^"all";q=\d+;w=\d+$/);
        const change = await h.client.POST('/api/1/user/update', {
          body: { _userId: user.id, password: h.password() },
        });
        expect(change.response.status).toBe(200);
        expect(change.response.headers.get('ratelimit-policy')).toMatch(/^"all";q=\d+;w=\d+, "hash";q=\d+;w=\d+$/);
        expect(change.response.headers.get('ratelimit')).toMatch(/^"all";r=\d+;t=\d+, "hash";r=\d+;t=\d+$/);
        const missing = await h.client.GET('/api/1/user/get', { params: { query: { _userId: GHOST } } });
        expect(missing.response.headers.get('ratelimit')).not.toBeNull();
        const bad = await h.raw(`${API}/create`, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: spec.transparent === false ? '{}' : '{',
        });
        expect(bad.status).toBe(400);
        expect(bad.headers.get('ratelimit')).not.toBeNull();
        const anonymous = await h.checkedFetch(new Request(`${h.target.baseUrl}${API}/get?_userId=${GHOST}`));
        expect(anonymous.status).toBe(401);
        expect(anonymous.headers.get('ratelimit')).toBeNull();
      });

      it('counts down the remaining budget', async () => {
        const client = h.clientFor((await h.target.createToken({ label: 'counting' })).token);
        const remaining = async () => {
          const { response } = await client.GET('/api/1/user/get', { params: { query: { _userId: GHOST } } });
          return Number(/r=(\d+)/.exec(response.headers.get('ratelimit') ?? '')![1]);
        };
        const first = await remaining();
        expect(await remaining()).toBe(first - 1);
        expect(await remaining()).toBe(first - 2);
      });
    });
  });
}
