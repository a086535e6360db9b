// Timed suspensions through the client (issue 30, point 2): disable's `until` and `reason`, shown
// by get and list to the site and never to the end user (verify); an end already past refused;
// enable ends a timed suspension at once. The end that comes by itself is the housekeeping job's
// (packages/server/src/ops/housekeeping.integration.test.ts: one server, and two on one PostgreSQL).
// Each test works in a site of its own. Server targets only.
import type { Problem } from '@user-accounts/client';
import { describe, expect, it } from 'vitest';
import { useTarget } from './harness.ts';
import type { TargetSpec } from './targets.ts';

export function defineSuspensionSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: timed suspension`, () => {
    const h = useTarget(spec);
    let sites = 0;
    const newSite = async () => {
      const site = `susp-${Date.now().toString(36)}-${sites++}`;
      const { token } = await h.target.createToken({ site, scopes: ['read', 'write', 'verify'], label: 'suspension' });
      return h.clientFor(token);
    };
    type Client = Awaited<ReturnType<typeof newSite>>;
    const get = async (client: Client, id: string) => {
      const { data } = await client.GET('/api/1/user/get', { params: { query: { _userId: id } } });
      return data!.result;
    };
    const inAWeek = () => new Date(Date.now() + 7 * 86_400_000);

    it('keeps until and reason, shows them to get and list, and never to verify', async () => {
      const client = await newSite();
      const user = await h.createUser({}, client);
      const until = inAWeek();
      // An offset other than Z names the same instant; get answers it in UTC, to the millisecond.
      const offset = new Date(until.getTime() + 2 * 3_600_000).toISOString().replace('Z', '+02:00');
      const reason = 'Chargeback under review (ticket 4411)';
      const { data, response } = await client.POST('/api/1/user/disable', {
        body: { _userId: user.id, until: offset, reason },
      });
      expect(response.status).toBe(200);
      expect(data).toEqual({ result: { status: 'user disabled' } });
      expect(await get(client, user.id)).toMatchObject({
        disabled: true,
        disabledUntil: until.toISOString(),
        disabledReason: reason,
      });
      const { data: listed } = await client.GET('/api/1/user/list', { params: { query: {} } });
      expect(listed!.result.users.find((u) => u._userId === user.id)).toMatchObject({
        disabledUntil: until.toISOString(),
        disabledReason: reason,
      });
      const verify = await client.POST('/api/1/user/verify', { body: { email: user.email, password: user.password } });
      expect(verify.response.status).toBe(403);
      expect((verify.error as Problem).code).toBe('account_disabled');
      expect(JSON.stringify(verify.error)).not.toContain('4411');
    });

    it('refuses an end already past (400 at /until, nothing changed), and a reason over 500 characters', async () => {
      const client = await newSite();
      const user = await h.createUser({}, client);
      const before = await get(client, user.id);
      for (const until of [new Date(Date.now() - 1000).toISOString(), '2001-01-01T00:00:00Z']) {
        const { error, response } = await client.POST('/api/1/user/disable', { body: { _userId: user.id, until } });
        expect(response.status).toBe(400);
        expect(error).toMatchObject({ code: 'invalid_request', errors: [{ pointer: '/until', code: 'not_allowed' }] });
      }
      const long = await client.POST('/api/1/user/disable', { body: { _userId: user.id, reason: 'x'.repeat(501) } });
      expect(long.response.status).toBe(400);
      expect(long.error).toMatchObject({ code: 'invalid_request', errors: [{ pointer: '/reason' }] });
      const notATime = await client.POST('/api/1/user/disable', { body: { _userId: user.id, until: 'next week' } });
      expect(notATime.response.status).toBe(400);
      expect(await get(client, user.id)).toEqual(before);
    });

    // Found by the fuzzer: a NUL in the reason reached PostgreSQL, which cannot store it (500).
    it('refuses a reason with a control character other than a newline or a tab, changing nothing', async () => {
      const client = await newSite();
      const user = await h.createUser({}, client);
      const before = await get(client, user.id);
      for (const reason of ['\u0000', 'a\u0007b', 'x\u009b']) {
        const { response, error } = await client.POST('/api/1/user/disable', { body: { _userId: user.id, reason } });
        expect(response.status, JSON.stringify(reason)).toBe(400);
        expect((error as Problem).errors).toEqual([
          expect.objectContaining({ pointer: '/reason', code: 'invalid_format' }),
        ]);
      }
      expect(await get(client, user.id)).toEqual(before);
      const lines = await client.POST('/api/1/user/disable', {
        body: { _userId: user.id, reason: 'chargeback\n\tticket 4411' },
      });
      expect(lines.response.status).toBe(200);
    });

    it('replaces the end and reason of a disabled account, and enable clears both at once', async () => {
      const client = await newSite();
      const user = await h.createUser({}, client);
      await client.POST('/api/1/user/disable', {
        body: { _userId: user.id, until: inAWeek().toISOString(), reason: 'a' },
      });
      const first = await get(client, user.id);
      // The same again changes nothing (same updatedAt).
      await client.POST('/api/1/user/disable', {
        body: { _userId: user.id, until: first.disabledUntil!, reason: 'a' },
      });
      expect(await get(client, user.id)).toEqual(first);
      // Without until and reason: disabled with no end and no reason.
      await client.POST('/api/1/user/disable', { body: { _userId: user.id } });
      expect(await get(client, user.id)).toMatchObject({ disabled: true, disabledUntil: null, disabledReason: null });
      await client.POST('/api/1/user/disable', {
        body: { _userId: user.id, until: inAWeek().toISOString(), reason: 'b' },
      });
      const { response } = await client.POST('/api/1/user/enable', { body: { _userId: user.id } });
      expect(response.status).toBe(200);
      expect(await get(client, user.id)).toMatchObject({ disabled: false, disabledUntil: null, disabledReason: null });
      const verify = await client.POST('/api/1/user/verify', { body: { email: user.email, password: user.password } });
      expect(verify.response.status).toBe(200);
    });
  });
}
