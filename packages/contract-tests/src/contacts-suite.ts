// Verified contacts through the client (issue 28, point 2): emailVerified and phoneVerified with
// their times on get, list, export and import; create and update may set them; the email changes
// through update (409 email_taken within the site), and a changed contact is unverified unless
// the same request says otherwise. Each test works in a site of its own. Server targets only.
import { describe, expect, it } from 'vitest';
import { useTarget } from './harness.ts';
import type { TargetSpec } from './targets.ts';

export function defineContactsSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: verified contacts`, () => {
    const h = useTarget(spec);
    let sites = 0;
    const newSite = async (scopes: ('read' | 'write' | 'verify' | 'export')[] = ['read', 'write', 'verify']) => {
      const site = `contacts-${Date.now().toString(36)}-${sites++}`;
      const { token } = await h.target.createToken({ site, scopes, label: 'contacts' });
      return { site, token, client: h.clientFor(token) };
    };
    type Client = Awaited<ReturnType<typeof newSite>>['client'];
    const get = async (client: Client, id: string) => {
      const { data, response } = await client.GET('/api/1/user/get', { params: { query: { _userId: id } } });
      return { ...data!.result, etag: response.headers.get('etag')! };
    };
    const update = (client: Client, body: Record<string, unknown>) =>
      client.POST('/api/1/user/update', { body: body as { _userId: string } });
    const iso = expect.stringMatching(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$/);

    it('are false with null times unless create says the site verified them', async () => {
      const { client } = await newSite();
      const plain = await h.createUser({ phone: '+44 20 7946 0018' }, client);
      expect(await get(client, plain.id)).toMatchObject({
        emailVerified: false,
        emailVerifiedAt: null,
        phoneVerified: false,
        phoneVerifiedAt: null,
      });
      const { data } = await client.POST('/api/1/user/create', {
        body: {
          email: h.uniqueEmail('v'),
          password: h.password(),
          name: 'Verified',
          phone: '555-0100',
          emailVerified: true,
          phoneVerified: true,
        },
      });
      expect(await get(client, data!.result._userId)).toMatchObject({
        emailVerified: true,
        emailVerifiedAt: iso,
        phoneVerified: true,
        phoneVerifiedAt: iso,
      });
    });

    it('refuses a verified phone without a phone, on create and on update, changing nothing', async () => {
      const { client } = await newSite();
      const { error, response } = await client.POST('/api/1/user/create', {
        body: { email: h.uniqueEmail('nophone'), password: h.password(), name: 'No Phone', phoneVerified: true },
      });
      expect(response.status).toBe(400);
      expect(error?.errors?.[0]).toMatchObject({ pointer: '/phoneVerified', code: 'not_allowed' });
      const user = await h.createUser({}, client);
      const before = await get(client, user.id);
      for (const body of [{ phoneVerified: true }, { phone: null, phoneVerified: true }]) {
        const answer = await update(client, { _userId: user.id, ...body });
        expect(answer.response.status, JSON.stringify(body)).toBe(400);
        expect(answer.error?.errors?.[0]?.pointer).toBe('/phoneVerified');
      }
      expect(await get(client, user.id)).toEqual(before);
    });

    it('changes the email through update: unverified unless the request says so, the same address in another case kept verified', async () => {
      const { client } = await newSite();
      const user = await h.createUser({}, client);
      expect((await update(client, { _userId: user.id, emailVerified: true })).response.status).toBe(200);
      const verified = await get(client, user.id);
      expect(verified.emailVerifiedAt).toEqual(iso);

      // Letter case only: the same mailbox, still verified at the same time.
      const upper = user.email.toUpperCase();
      expect((await update(client, { _userId: user.id, email: upper })).response.status).toBe(200);
      expect(await get(client, user.id)).toMatchObject({
        email: upper,
        emailVerified: true,
        emailVerifiedAt: verified.emailVerifiedAt,
      });
      // `true` on a verified email keeps its time.
      await update(client, { _userId: user.id, emailVerified: true });
      expect((await get(client, user.id)).emailVerifiedAt).toBe(verified.emailVerifiedAt);

      // Another address: unverified.
      const next = h.uniqueEmail('next');
      expect((await update(client, { _userId: user.id, email: next })).response.status).toBe(200);
      expect(await get(client, user.id)).toMatchObject({ email: next, emailVerified: false, emailVerifiedAt: null });
      // Another address said verified: verified now.
      const third = h.uniqueEmail('third');
      expect((await update(client, { _userId: user.id, email: third, emailVerified: true })).response.status).toBe(200);
      expect(await get(client, user.id)).toMatchObject({ email: third, emailVerified: true, emailVerifiedAt: iso });

      // The account answers to its new email only, for get and for the login.
      const byOld = await client.GET('/api/1/user/get', { params: { query: { email: user.email } } });
      expect(byOld.response.status).toBe(404);
      const byNew = await client.GET('/api/1/user/get', { params: { query: { email: third.toUpperCase() } } });
      expect(byNew.data?.result._userId).toBe(user.id);
      const login = await client.POST('/api/1/user/verify', { body: { email: third, password: user.password } });
      expect(login.response.status).toBe(200);
      const oldLogin = await client.POST('/api/1/user/verify', {
        body: { email: user.email, password: user.password },
      });
      expect(oldLogin.response.status).toBe(422);
    });

    it('answers 409 email_taken for another account’s email in any case, and changes nothing; another site’s or a row out of reach is free', async () => {
      const { client } = await newSite();
      const holder = await h.createUser({}, client);
      const user = await h.createUser({}, client);
      const before = await get(client, user.id);
      const { response, error } = await update(client, {
        _userId: user.id,
        email: holder.email.toUpperCase(),
        name: 'Not Changed',
      });
      expect(response.status).toBe(409);
      expect(error).toMatchObject({ code: 'email_taken', errors: [{ pointer: '/email', code: 'conflict' }] });
      expect(await get(client, user.id)).toEqual(before);

      const elsewhere = await newSite();
      const theirs = await h.createUser({}, elsewhere.client);
      expect((await update(client, { _userId: user.id, email: theirs.email })).response.status).toBe(200);
      const outside = await h.createUser({}, client);
      await h.target.sql(`update users set origin = 'external' where id = $1`, [outside.id]);
      expect((await update(client, { _userId: holder.id, email: outside.email })).response.status).toBe(200);
    });

    it('unverifies a changed or cleared phone unless the request says so, and keeps an unchanged one', async () => {
      const { client } = await newSite();
      const user = await h.createUser({ phone: '555-0100' }, client);
      await update(client, { _userId: user.id, phoneVerified: true });
      const at = (await get(client, user.id)).phoneVerifiedAt;
      expect(at).toEqual(iso);
      await update(client, { _userId: user.id, phone: '555-0100', name: 'Same Phone' });
      expect(await get(client, user.id)).toMatchObject({ phoneVerified: true, phoneVerifiedAt: at });
      await update(client, { _userId: user.id, phone: '555-0199' });
      expect(await get(client, user.id)).toMatchObject({ phoneVerified: false, phoneVerifiedAt: null });
      await update(client, { _userId: user.id, phone: '555-0123', phoneVerified: true });
      expect(await get(client, user.id)).toMatchObject({ phone: '555-0123', phoneVerified: true });
      await update(client, { _userId: user.id, phone: null });
      expect(await get(client, user.id)).toMatchObject({ phone: null, phoneVerified: false, phoneVerifiedAt: null });
      // `false` unverifies what is there.
      await update(client, { _userId: user.id, phone: '555-0123', phoneVerified: true });
      await update(client, { _userId: user.id, phoneVerified: false });
      expect(await get(client, user.id)).toMatchObject({ phoneVerified: false, phoneVerifiedAt: null });
    });

    it('honours If-Match on an email change', async () => {
      const { client } = await newSite();
      const user = await h.createUser({}, client);
      const { etag } = await get(client, user.id);
      await update(client, { _userId: user.id, name: 'Moved On' });
      const stale = await client.POST('/api/1/user/update', {
        body: { _userId: user.id, email: h.uniqueEmail('stale') },
        params: { header: { 'If-Match': etag } },
      });
      expect(stale.response.status).toBe(412);
      expect((await get(client, user.id)).email).toBe(user.email);
    });

    it('are on list and export lines, and import takes them back', async () => {
      const { token, client } = await newSite(['read', 'write', 'export']);
      const { data } = await client.POST('/api/1/user/create', {
        body: {
          email: h.uniqueEmail('x'),
          password: h.password(),
          name: 'Exported',
          phone: '555-0100',
          emailVerified: true,
          phoneVerified: true,
        },
      });
      await h.createUser({}, client);
      const listed = await client.GET('/api/1/user/list', { params: { query: {} } });
      expect(listed.data!.result.users.map((u) => [u.emailVerified, u.phoneVerified])).toEqual([
        [true, true],
        [false, false],
      ]);
      const response = await fetch(`${h.target.baseUrl}/api/1/user/export`, { headers: { Authorization: token } });
      const rows = (await response.text())
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as Record<string, unknown>);
      expect(rows.map((r) => [r.emailVerified, r.phoneVerified])).toEqual([
        [true, true],
        [false, false],
      ]);
      const elsewhere = await newSite();
      const imported = await elsewhere.client.POST('/api/1/user/import', { body: { users: rows as never } });
      expect(imported.data!.result).toMatchObject({ created: 2, failed: 0 });
      const first = imported.data!.result.items[0] as { _userId: string };
      expect(await get(elsewhere.client, first._userId)).toMatchObject({
        _userId: first._userId,
        emailVerified: true,
        phoneVerified: true,
        phoneVerifiedAt: iso,
      });
      expect(data!.result._userId).not.toBe(first._userId);
      // A row that says a phone is verified without one is refused at its index.
      const refused = await elsewhere.client.POST('/api/1/user/import', {
        body: { users: [{ email: h.uniqueEmail('r'), name: 'R', password: h.password(), phoneVerified: true }] },
      });
      expect(refused.data!.result.items[0]).toMatchObject({
        error: { code: 'invalid_request', errors: [{ pointer: '/users/0/phoneVerified' }] },
      });
    });
  });
}
