// A site's login through the client: verify a password, one answer for every way it can fail,
// switch an account off and on. Needs state (accounts, tokens): server targets only.
import type { Problem } from '@user-accounts/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { GHOST, useTarget, withoutRequestId } from './harness.ts';
import type { TargetSpec } from './targets.ts';

export function defineLoginSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: verify, disable, enable`, () => {
    const h = useTarget(spec);
    let otherSite: ReturnType<typeof h.clientFor>;
    beforeAll(async () => {
      otherSite = h.clientFor((await h.target.createToken({ site: 'login-b', label: 'other site' })).token);
    });

    const verify = (body: { email: string; password: string } | { _userId: string; password: string }, as = h.client) =>
      as.POST('/api/1/user/verify', { body });

    it('answers 200 with the _userId for the right password, by email in any case and by id', async () => {
      const user = await h.createUser();
      for (const body of [
        { email: user.email.toUpperCase(), password: user.password },
        { email: `  ${user.email} `, password: user.password },
        { _userId: user.id, password: user.password },
      ]) {
        const { data, response } = await verify(body);
        expect(response.status).toBe(200);
        expect(data?.result).toEqual({ _userId: user.id, status: 'password verified' });
      }
    });

    it('answers every other case with one 422 invalid_credentials body: wrong password, unknown email or id, another site, out of reach', async () => {
      const user = await h.createUser();
      const elsewhere = await h.createUser({}, otherSite);
      const outside = await h.createUser();
      await h.target.sql(`update users set origin = 'external' where id = $1`, [outside.id]);
      const attempts = [
        await verify({ email: user.email, password: `${user.password}x` }),
        await verify({ _userId: user.id, password: 'not the password' }),
        await verify({ email: h.uniqueEmail('nobody'), password: user.password }),
        await verify({ _userId: GHOST, password: user.password }),
        await verify({ _userId: 'not-a-uuid', password: user.password }),
        await verify({ email: elsewhere.email, password: elsewhere.password }),
        await verify({ email: outside.email, password: outside.password }),
      ];
      const first = attempts[0]!.error as Problem;
      expect(first.code).toBe('invalid_credentials');
      for (const attempt of attempts) {
        expect(attempt.response.status).toBe(422);
        expect(withoutRequestId(attempt.error)).toEqual(withoutRequestId(first));
      }
    });

    it('refuses neither or both of email and _userId with 400, saying so', async () => {
      const both = await h.raw('/api/1/user/verify', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ email: 'a@example.com', _userId: GHOST, password: 'x' }),
      });
      expect(both.status).toBe(400);
      expect(((await both.json()) as Problem).detail).toMatch(/exactly one of email or _userId/);
      const neither = await h.raw('/api/1/user/verify', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ password: 'x' }),
      });
      expect(neither.status).toBe(400);
    });

    it('refuses an X-End-User-IP that is not an address with 400', async () => {
      const user = await h.createUser();
      const { response, error } = await h.client.POST('/api/1/user/verify', {
        body: { email: user.email, password: user.password },
        params: { header: { 'X-End-User-IP': '203.0.113.999' } },
      });
      expect(response.status).toBe(400);
      expect(error?.errors?.[0]?.pointer).toBe('X-End-User-IP');
    });

    it('disables: get says so, verify refuses the right password with 403 and the wrong one with the plain 422', async () => {
      const user = await h.createUser();
      const disabled = await h.client.POST('/api/1/user/disable', { body: { _userId: user.id } });
      expect(disabled.response.status).toBe(200);
      expect(disabled.data?.result.status).toBe('user disabled');
      const got = await h.client.GET('/api/1/user/get', { params: { query: { _userId: user.id } } });
      expect(got.data?.result.disabled).toBe(true);
      expect(got.response.headers.get('etag')).toBe(disabled.response.headers.get('etag'));

      const right = await verify({ email: user.email, password: user.password });
      expect(right.response.status).toBe(403);
      expect(right.error?.code).toBe('account_disabled');
      const wrong = await verify({ email: user.email, password: 'a wrong password' });
      expect(wrong.response.status).toBe(422);
      expect(wrong.error?.code).toBe('invalid_credentials');

      // Still read, changed and deletable; enabled again, it verifies.
      expect(
        (await h.client.POST('/api/1/user/update', { body: { _userId: user.id, name: 'Off' } })).response.status,
      ).toBe(200);
      const enabled = await h.client.POST('/api/1/user/enable', { body: { _userId: user.id } });
      expect(enabled.data?.result.status).toBe('user enabled');
      expect((await verify({ _userId: user.id, password: user.password })).response.status).toBe(200);
      const after = await h.client.GET('/api/1/user/get', { params: { query: { _userId: user.id } } });
      expect(after.data?.result.disabled).toBe(false);
    });

    it('disables and enables idempotently in effect: the second call is 200 and changes nothing', async () => {
      const user = await h.createUser();
      const first = await h.client.POST('/api/1/user/disable', { body: { _userId: user.id } });
      const row = await h.rowOf(user.id);
      const second = await h.client.POST('/api/1/user/disable', { body: { _userId: user.id } });
      expect(second.response.status).toBe(200);
      expect(second.response.headers.get('etag')).toBe(first.response.headers.get('etag'));
      expect(await h.rowOf(user.id)).toEqual(row);
    });

    it('honours If-Match on disable and enable (412, nothing changed) and answers 404 for an account out of reach', async () => {
      const user = await h.createUser();
      const got = await h.client.GET('/api/1/user/get', { params: { query: { _userId: user.id } } });
      const etag = got.response.headers.get('etag')!;
      await h.client.POST('/api/1/user/update', { body: { _userId: user.id, name: 'Changed' } });
      const stale = await h.client.POST('/api/1/user/disable', {
        body: { _userId: user.id },
        params: { header: { 'If-Match': etag } },
      });
      expect(stale.response.status).toBe(412);
      expect((await h.rowOf(user.id))!.disabled).toBe(false);
      const missing = await h.client.POST('/api/1/user/enable', { body: { _userId: GHOST } });
      expect(missing.response.status).toBe(404);
      const elsewhere = await h.createUser({}, otherSite);
      expect((await h.client.POST('/api/1/user/disable', { body: { _userId: elsewhere.id } })).response.status).toBe(
        404,
      );
    });

    it('leaves an audit row for every verify, with the outcome and never the email', async () => {
      const user = await h.createUser();
      const ok = await verify({ email: user.email, password: user.password });
      const bad = await verify({ email: user.email, password: 'wrong password here' });
      const rows = await h.target.sql(
        `select operation, user_id, status, outcome, request_id from audit_log where request_id = any($1) order by id`,
        [[ok.response.headers.get('x-request-id'), bad.response.headers.get('x-request-id')]],
      );
      expect(rows.map((r) => [r.operation, r.user_id, r.status, r.outcome])).toEqual([
        ['verify', user.id, 200, 'password verified'],
        // An existing account's failure names it (issue 64: its trail shows each failed sign-in).
        ['verify', user.id, 422, 'invalid_credentials'],
      ]);
      const unknown = await verify({ email: h.uniqueEmail('nobody'), password: 'wrong password here' });
      const [row] = await h.target.sql('select user_id from audit_log where request_id = $1', [
        unknown.response.headers.get('x-request-id'),
      ]);
      expect(row).toEqual({ user_id: null });
      const all = JSON.stringify(await h.target.sql('select * from audit_log'));
      expect(all).not.toContain(user.email.toLowerCase());
    });

    it('gives a verify-only token the login check and nothing else', async () => {
      const login = h.clientFor((await h.target.createToken({ scopes: ['verify'], label: 'login backend' })).token);
      const user = await h.createUser();
      expect((await verify({ email: user.email, password: user.password }, login)).response.status).toBe(200);
      const read = await login.GET('/api/1/user/get', { params: { query: { _userId: user.id } } });
      expect(read.response.status).toBe(403);
      expect(
        (
          await verify(
            { email: user.email, password: user.password },
            h.clientFor((await h.target.createToken({ scopes: ['read', 'write'], label: 'no verify' })).token),
          )
        ).response.status,
      ).toBe(403);
    });
  });
}
