// Identities (issue 44, points 1-5 and 7) through the client, on PGlite and PostgreSQL: an account
// made from a provider's identity, found by it, linked and unlinked, signed in with it (with a
// session, and the second step as verify), carried by export and import; never linked or created
// on the service's own because two emails match; one identity to one account, by the database.
import type { Problem, UserAccountsClient } from '@user-accounts/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { nowSeconds, totpAt } from './factors-suite.ts';
import { GHOST, useTarget } from './harness.ts';
import { pgliteTarget, postgresTarget, type TargetSpec } from './targets.ts';

let seq = 0;
const subjectOf = (tag = 's') => `${tag}-${Date.now()}-${seq++}`;

function defineIdentitiesSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) {
    describe.skip(`${spec.name}: identities (${spec.skip ?? 'stateless'})`, () => {
      it('skipped', () => {});
    });
    return;
  }

  describe(`${spec.name}: identities`, () => {
    const h = useTarget(spec);
    let exporter: UserAccountsClient;
    let exporterToken: string;
    beforeAll(async () => {
      const { token } = await h.target.createToken({ scopes: ['read', 'export'], label: 'identities export' });
      exporterToken = token;
      exporter = h.clientFor(token);
    });

    const createFrom = async (fields: Record<string, unknown> = {}, as: UserAccountsClient = h.client) => {
      const body = {
        provider: 'google',
        subject: subjectOf('g'),
        email: h.uniqueEmail('fed'),
        name: 'Ada Lovelace',
        ...fields,
      } as { provider: string; subject: string; email: string; name: string; emailVerified?: boolean };
      const answer = await as.POST('/api/1/user/identity/create', { body });
      return { ...answer, body };
    };
    const made = async (fields: Record<string, unknown> = {}) => {
      const { data, error, response, body } = await createFrom(fields);
      expect(error, JSON.stringify(error)).toBeUndefined();
      expect(response.status).toBe(201);
      return { id: data!.result._userId, ...body };
    };
    const get = (query: Record<string, string>, as: UserAccountsClient = h.client) =>
      as.GET('/api/1/user/get', { params: { query: query as never } });
    const link = (
      body: { _userId: string; provider: string; subject: string; email?: string; emailVerified?: boolean },
      as = h.client,
    ) => as.POST('/api/1/user/identity/link', { body });
    const unlink = (body: { _userId: string; provider: string; subject: string }, as = h.client) =>
      as.POST('/api/1/user/identity/unlink', { body });
    const verify = (
      body: { provider: string; subject: string; session?: { userAgent?: string } },
      as: UserAccountsClient = h.client,
    ) => as.POST('/api/1/user/identity/verify', { body });
    const eventsOf = async (userId: string) =>
      (await h.client.GET('/api/1/events', { params: { query: { subject: userId, limit: 1000 } } })).data!.result
        .events;
    const identitiesOfAccount = async (userId: string) => (await get({ _userId: userId })).data!.result.identities;

    it('identity/create: 201 with Location, an account with no password and the identity on get, list and a person’s data', async () => {
      const before = Date.now();
      const { data, response, body } = await createFrom({ emailVerified: true, phone: '+44 20 7946 0018' });
      expect(response.status).toBe(201);
      expect(data!.result.status).toBe('user created');
      const id = data!.result._userId;
      expect(response.headers.get('location')).toBe(`/api/1/user/get?_userId=${id}`);
      expect((await h.rowOf(id))!.password_hash).toBeNull();

      const got = (await get({ _userId: id })).data!.result;
      expect(got).toMatchObject({ email: body.email, name: 'Ada Lovelace', emailVerified: true });
      expect(got.identities).toEqual([
        {
          provider: 'google',
          subject: body.subject,
          email: body.email,
          emailVerified: true,
          linkedAt: expect.any(String),
        },
      ]);
      expect(Date.parse(got.identities[0]!.linkedAt)).toBeGreaterThanOrEqual(before - 2000);

      const listed = (
        await h.client.GET('/api/1/user/list', { params: { query: { email: body.email.toLowerCase(), limit: 10 } } })
      ).data!.result.users;
      expect(listed.find((u) => u._userId === id)?.identities).toEqual(got.identities);
      const personal = (await exporter.GET('/api/1/user/data', { params: { query: { _userId: id } } })).data!.result;
      expect(personal.account.identities).toEqual(got.identities);

      // A password account has none.
      const plain = await h.createUser();
      expect(await identitiesOfAccount(plain.id)).toEqual([]);

      // Events: user.created carries the identity, and user.identity_linked follows.
      const events = await eventsOf(id);
      expect(events.map((e) => e.type)).toEqual(['user.created', 'user.identity_linked']);
      expect((events[0]!.data as { identities: unknown }).identities).toEqual(got.identities);
      expect(events[1]!.data).toEqual({ _userId: id, provider: 'google', subject: body.subject });
    });

    it('get by provider and subject: exactly one of _userId, email, or both of these; an unknown identity is 404', async () => {
      const user = await made();
      const found = await get({ provider: user.provider, subject: user.subject });
      expect(found.response.status).toBe(200);
      expect(found.data!.result._userId).toBe(user.id);
      expect(found.response.headers.get('etag')).toBe((await get({ _userId: user.id })).response.headers.get('etag'));

      const queries: Record<string, string>[] = [
        { provider: user.provider },
        { subject: user.subject },
        { provider: user.provider, subject: user.subject, email: user.email },
        { provider: user.provider, subject: user.subject, _userId: user.id },
        { email: user.email, _userId: user.id },
        {},
      ];
      for (const query of queries) {
        const { response, error } = await get(query);
        expect(response.status, JSON.stringify(query)).toBe(400);
        expect(error!.code).toBe('invalid_request');
      }
      const bad = await get({ provider: 'Google!', subject: user.subject });
      expect(bad.response.status).toBe(400);
      const missing = await get({ provider: user.provider, subject: `${user.subject}-other` });
      expect(missing.response.status).toBe(404);
      expect(missing.error!.code).toBe('user_not_found');
      // Compared as given: the subject's letter case counts.
      expect((await get({ provider: user.provider, subject: user.subject.toUpperCase() })).response.status).toBe(404);
    });

    it('identity/create refuses a taken identity (409 identity_taken) and a taken email (409 email_taken), never merging', async () => {
      const first = await made();
      const again = await createFrom({ provider: first.provider, subject: first.subject });
      expect(again.response.status).toBe(409);
      expect(again.error!.code).toBe('identity_taken');

      const holder = await h.createUser();
      const byEmail = await createFrom({ email: holder.email.toUpperCase(), emailVerified: true });
      expect(byEmail.response.status).toBe(409);
      expect(byEmail.error!.code).toBe('email_taken');
      expect(await identitiesOfAccount(holder.id)).toEqual([]);
      expect((await get({ provider: byEmail.body.provider, subject: byEmail.body.subject })).response.status).toBe(404);

      const invalid = await createFrom({ subject: '' });
      expect(invalid.response.status).toBe(400);
      const controlled = await createFrom({ subject: 'a\u0000b' });
      expect(controlled.response.status).toBe(400);
      const withPassword = await createFrom({ password: 'a long and unusual passphrase' });
      expect(withPassword.response.status).toBe(400);
    });

    it('never links or creates on its own: identity email verified or not × account email verified or not', async () => {
      for (const identityVerified of [true, false]) {
        for (const accountVerified of [true, false]) {
          const account = await h.createUser({ emailVerified: accountVerified } as never);
          const identity = { provider: 'google', subject: subjectOf('matrix') };
          const label = `identity ${identityVerified}, account ${accountVerified}`;
          // Signing in with an identity no account has: the one 422, whatever the emails.
          const signIn = await verify(identity);
          expect(signIn.response.status, label).toBe(422);
          expect(signIn.error!.code).toBe('invalid_credentials');
          // Creating from it with the account's email: 409, nothing merged.
          const create = await createFrom({ ...identity, email: account.email, emailVerified: identityVerified });
          expect(create.response.status, label).toBe(409);
          expect(create.error!.code).toBe('email_taken');
          expect(await identitiesOfAccount(account.id), label).toEqual([]);
          expect((await get(identity)).response.status, label).toBe(404);
          expect((await verify(identity)).response.status, label).toBe(422);
          // Only the site's link links it.
          const linked = await link({
            _userId: account.id,
            ...identity,
            email: account.email,
            emailVerified: identityVerified,
          });
          expect(linked.response.status, label).toBe(200);
          expect((await verify(identity)).data!.result._userId, label).toBe(account.id);
          // The identity's emailVerified is the identity's; the account's own is unchanged.
          const after = (await get({ _userId: account.id })).data!.result;
          expect(after.emailVerified, label).toBe(accountVerified);
          expect(after.identities[0]!.emailVerified, label).toBe(identityVerified);
        }
      }
    });

    it('of 20 concurrent identity/create of one identity, exactly one creates an account; the others are 409 identity_taken', async () => {
      const identity = { provider: 'github', subject: subjectOf('race') };
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => createFrom({ ...identity, email: h.uniqueEmail(`race${i}`) })),
      );
      const statuses = answers.map((a) => a.response.status).sort();
      expect(statuses.filter((s) => s === 201)).toHaveLength(1);
      expect(statuses.filter((s) => s === 409)).toHaveLength(19);
      for (const a of answers.filter((x) => x.response.status === 409)) expect(a.error!.code).toBe('identity_taken');
      const [count] = await h.target.sql(
        'select count(*)::int as n from user_identities where provider = $1 and subject = $2',
        [identity.provider, identity.subject],
      );
      expect(count).toEqual({ n: 1 });
      // The same email 20 times at once: one account, and each other answer a 409.
      const shared = { provider: 'github', subject: subjectOf('race-same'), email: h.uniqueEmail('same') };
      const same = await Promise.all(Array.from({ length: 20 }, () => createFrom(shared)));
      expect(same.filter((a) => a.response.status === 201)).toHaveLength(1);
      for (const a of same.filter((x) => x.response.status !== 201)) {
        expect(a.response.status).toBe(409);
        expect(a.error!.code).toBe('identity_taken');
      }
    });

    it('link: 200, again the same 200 (no second event), another account’s 409 identity_taken, no account 404', async () => {
      const user = await h.createUser();
      const other = await h.createUser();
      const identity = { provider: 'github', subject: subjectOf('link') };
      const first = await link({ _userId: user.id, ...identity, email: 'ada@example.org', emailVerified: true });
      expect(first.response.status).toBe(200);
      expect(first.data!.result.status).toBe('identity linked');
      const again = await link({ _userId: user.id, ...identity, email: 'ada@example.org', emailVerified: false });
      expect(again.response.status).toBe(200);
      expect((await identitiesOfAccount(user.id))[0]).toMatchObject({ email: 'ada@example.org', emailVerified: false });
      expect((await eventsOf(user.id)).filter((e) => e.type === 'user.identity_linked').map((e) => e.data)).toEqual([
        { _userId: user.id, ...identity },
      ]);
      const taken = await link({ _userId: other.id, ...identity });
      expect(taken.response.status).toBe(409);
      expect(taken.error!.code).toBe('identity_taken');
      expect(await identitiesOfAccount(other.id)).toEqual([]);
      for (const id of [GHOST, 'not-a-uuid']) {
        const missing = await link({ _userId: id, provider: 'github', subject: subjectOf() });
        expect(missing.response.status).toBe(404);
        expect(missing.error!.code).toBe('user_not_found');
      }
      // A password account signs in with its linked identity too.
      expect((await verify(identity)).data!.result._userId).toBe(user.id);
    });

    it('at most 20 identities an account: the 21st link is 409 identity_limit_reached', async () => {
      const user = await h.createUser();
      for (let i = 0; i < 20; i++) {
        const { response } = await link({ _userId: user.id, provider: `p${i}`, subject: subjectOf('many') });
        expect(response.status).toBe(200);
      }
      const over = await link({ _userId: user.id, provider: 'p20', subject: subjectOf('many') });
      expect(over.response.status).toBe(409);
      expect(over.error!.code).toBe('identity_limit_reached');
      const identities = await identitiesOfAccount(user.id);
      expect(identities).toHaveLength(20);
      expect(identities.map((i) => i.provider)).toEqual(Array.from({ length: 20 }, (_, i) => `p${i}`));
    });

    it('unlink: 200 and an event; 404 identity_not_found; the last sign-in method refused (409 last_sign_in_method)', async () => {
      const user = await made();
      const second = { provider: 'github', subject: subjectOf('second') };
      expect((await link({ _userId: user.id, ...second })).response.status).toBe(200);
      const done = await unlink({ _userId: user.id, ...second });
      expect(done.response.status).toBe(200);
      expect(done.data!.result.status).toBe('identity unlinked');
      expect((await eventsOf(user.id)).at(-1)).toMatchObject({
        type: 'user.identity_unlinked',
        data: { _userId: user.id, ...second },
      });
      expect((await verify(second)).response.status).toBe(422);

      const gone = await unlink({ _userId: user.id, ...second });
      expect(gone.response.status).toBe(404);
      expect(gone.error!.code).toBe('identity_not_found');
      // Another account's identity is not this one's to unlink.
      const stranger = await made();
      const notTheirs = await unlink({ _userId: user.id, provider: stranger.provider, subject: stranger.subject });
      expect(notTheirs.response.status).toBe(404);
      expect(notTheirs.error!.code).toBe('identity_not_found');
      expect((await unlink({ _userId: GHOST, ...second })).error!.code).toBe('user_not_found');

      // The account's only way in: refused, the identity stays.
      const last = await unlink({ _userId: user.id, provider: user.provider, subject: user.subject });
      expect(last.response.status).toBe(409);
      expect(last.error!.code).toBe('last_sign_in_method');
      expect(await identitiesOfAccount(user.id)).toHaveLength(1);
      // With a password, it may go.
      expect(
        (await h.client.POST('/api/1/user/update', { body: { _userId: user.id, password: h.password() } })).response
          .status,
      ).toBe(200);
      expect((await unlink({ _userId: user.id, provider: user.provider, subject: user.subject })).response.status).toBe(
        200,
      );
      expect(await identitiesOfAccount(user.id)).toEqual([]);
    });

    it('of two concurrent unlinks of a password-less account’s last two identities, at most one succeeds', async () => {
      const user = await made();
      const second = { provider: 'github', subject: subjectOf('pair') };
      await link({ _userId: user.id, ...second });
      const answers = await Promise.all([
        unlink({ _userId: user.id, provider: user.provider, subject: user.subject }),
        unlink({ _userId: user.id, ...second }),
      ]);
      expect(answers.map((a) => a.response.status).sort()).toEqual([200, 409]);
      expect(await identitiesOfAccount(user.id)).toHaveLength(1);
    });

    it('identity/verify: 200 with a session (amr fed, aal 1); every miss one 422; disabled 403', async () => {
      const user = await made();
      const plain = await verify({ provider: user.provider, subject: user.subject });
      expect(plain.response.status).toBe(200);
      expect(plain.data!.result).toEqual({ _userId: user.id, status: 'identity verified' });
      const withSession = await verify({
        provider: user.provider,
        subject: user.subject,
        session: { userAgent: 'App' },
      });
      const session = withSession.data!.result.session!;
      expect(session.token).toMatch(/^uas_/);
      const checked = (await h.client.POST('/api/1/session/verify', { body: { token: session.token } })).data!.result;
      expect(checked).toMatchObject({ _userId: user.id, aal: 1, amr: ['fed'] });

      const misses: Problem[] = [];
      for (const body of [
        { provider: user.provider, subject: `${user.subject}x` },
        { provider: 'github', subject: user.subject },
      ]) {
        const { response, error } = await verify(body);
        expect(response.status).toBe(422);
        misses.push({ ...(error as Problem), requestId: '' });
      }
      // An account deleted with a grace period is out of reach: the same 422.
      const graced = await made();
      await h.client.DELETE('/api/1/user/delete', { body: { _userId: graced.id, graceDays: 7 } });
      const outOfReach = await verify({ provider: graced.provider, subject: graced.subject });
      misses.push({ ...(outOfReach.error as Problem), requestId: '' });
      expect(new Set(misses.map((m) => JSON.stringify(m))).size).toBe(1);
      expect(misses[0]!.code).toBe('invalid_credentials');

      await h.client.POST('/api/1/user/disable', { body: { _userId: user.id } });
      const disabled = await verify({ provider: user.provider, subject: user.subject, session: {} });
      expect(disabled.response.status).toBe(403);
      expect(disabled.error!.code).toBe('account_disabled');

      const audit = (await h.client.GET('/api/1/audit', { params: { query: { _userId: user.id, limit: 100 } } })).data!
        .result.entries;
      const ops = audit.map((e) => `${e.operation} ${e.status} ${e.outcome}`);
      expect(ops).toEqual(
        expect.arrayContaining([
          'identity_create 201 user created',
          'identity_verify 200 identity verified',
          'identity_verify 403 account_disabled',
        ]),
      );
      expect(JSON.stringify(audit)).not.toContain(user.subject);
    });

    it('identity/verify of an account with a second factor: 403 second_factor_required with a ticket, as verify; factor/verify ends it with a session', async () => {
      const user = await made();
      const added = (await h.client.POST('/api/1/user/factor/totp', { body: { _userId: user.id } })).data!.result;
      await h.client.POST('/api/1/user/factor/confirm', {
        body: { _userId: user.id, factorId: added.factorId, code: totpAt(added.secret, nowSeconds()) },
      });
      const first = await verify({ provider: user.provider, subject: user.subject, session: {} });
      expect(first.response.status).toBe(403);
      const problem = first.error as Problem & { ticket: string; factors: string[] };
      expect(problem.code).toBe('second_factor_required');
      expect(problem.factors).toEqual(['totp']);
      expect(JSON.stringify(problem)).not.toContain('uas_');
      expect(await h.target.sql('select count(*)::int as n from sessions where user_id = $1', [user.id])).toEqual([
        { n: 0 },
      ]);
      const second = await h.client.POST('/api/1/user/factor/verify', {
        body: { ticket: problem.ticket, code: totpAt(added.secret, nowSeconds() + 30), session: {} },
      });
      expect(second.response.status, JSON.stringify(second.error)).toBe(200);
      expect(second.data!.result.session?.token).toMatch(/^uas_/);
      // The session says how: the provider, then the code (not a password it never had).
      const checked = await h.client.POST('/api/1/session/verify', {
        body: { token: second.data!.result.session!.token },
      });
      expect(checked.data!.result).toMatchObject({ aal: 2, amr: ['fed', 'otp', 'mfa'] });
    });

    it("another site's token: its identity is 404 on get, 422 on verify, 404 on link and unlink; the other site may hold the same identity", async () => {
      const user = await made();
      const { token } = await h.target.createToken({
        site: 'identities-elsewhere',
        scopes: ['read', 'write', 'verify'],
      });
      const other = h.clientFor(token);
      const identity = { provider: user.provider, subject: user.subject };
      expect((await get(identity, other)).response.status).toBe(404);
      const signIn = await verify(identity, other);
      expect(signIn.response.status).toBe(422);
      expect(signIn.error!.code).toBe('invalid_credentials');
      const linked = await link({ _userId: user.id, provider: 'github', subject: subjectOf() }, other);
      expect(linked.response.status).toBe(404);
      expect(linked.error!.code).toBe('user_not_found');
      const unlinked = await unlink({ _userId: user.id, ...identity }, other);
      expect(unlinked.response.status).toBe(404);
      expect(unlinked.error!.code).toBe('user_not_found');
      expect(await identitiesOfAccount(user.id)).toHaveLength(1);
      // The same identity in the other site: its own account.
      const theirs = await createFrom({ ...identity, email: user.email }, other);
      expect(theirs.response.status).toBe(201);
      expect((await verify(identity, other)).data!.result._userId).toBe(theirs.data!.result._userId);
      expect((await verify(identity)).data!.result._userId).toBe(user.id);
    });

    it('export carries identities (no passwordHash for an account without one), and the import round trip keeps them', async () => {
      const federated = await made({ emailVerified: true });
      const both = await h.createUser();
      const extra = { provider: 'github', subject: subjectOf('both'), email: 'both@example.org', emailVerified: true };
      await link({ _userId: both.id, ...extra });
      const response = await fetch(`${h.target.baseUrl}/api/1/user/export`, {
        headers: { Authorization: exporterToken },
      });
      expect(response.status).toBe(200);
      const lines = (await response.text())
        .trim()
        .split('\n')
        .map((l) => JSON.parse(l) as Record<string, unknown>);
      const fedLine = lines.find((l) => l.email === federated.email)!;
      expect(fedLine).not.toHaveProperty('passwordHash');
      expect(fedLine.identities).toEqual([
        { provider: federated.provider, subject: federated.subject, email: federated.email, emailVerified: true },
      ]);
      const bothLine = lines.find((l) => l.email === both.email)!;
      expect(bothLine.passwordHash).toMatch(/^\$argon2id\$/);
      expect(bothLine.identities).toEqual([extra]);
      const plainLine = lines.find((l) => !('identities' in l))!;
      expect(plainLine.passwordHash).toBeDefined();

      // Into another site: the same accounts, the same identities, signing in with them.
      const { token } = await h.target.createToken({
        site: 'identities-roundtrip',
        scopes: ['read', 'write', 'verify'],
      });
      const there = h.clientFor(token);
      const imported = await there.POST('/api/1/user/import', { body: { users: [fedLine, bothLine] as never } });
      expect(imported.response.status, JSON.stringify(imported.error)).toBe(200);
      expect(imported.data!.result.failed).toBe(0);
      const fedThere = await get({ provider: federated.provider, subject: federated.subject }, there);
      expect(fedThere.data!.result.identities).toMatchObject([
        { provider: federated.provider, subject: federated.subject, email: federated.email, emailVerified: true },
      ]);
      expect((await verify({ provider: 'github', subject: extra.subject }, there)).response.status).toBe(200);
      expect(
        (await there.POST('/api/1/user/verify', { body: { email: both.email, password: both.password } })).response
          .status,
      ).toBe(200);

      // The same lines again: each refused (email, then identity), never merged.
      const again = await there.POST('/api/1/user/import', {
        body: {
          users: [
            { ...fedLine, email: h.uniqueEmail('again') },
            { ...bothLine, email: h.uniqueEmail('again2') },
          ] as never,
        },
      });
      expect(again.data!.result.items.map((i) => ('error' in i ? i.error.code : i.status))).toEqual([
        'identity_taken',
        'identity_taken',
      ]);
      // One identity twice in one import, a row with neither password nor identities.
      const twice = { provider: 'gitlab', subject: subjectOf('twice') };
      const mixed = await there.POST('/api/1/user/import', {
        body: {
          users: [
            { email: h.uniqueEmail('t1'), name: 'One', identities: [twice] },
            { email: h.uniqueEmail('t2'), name: 'Two', identities: [twice] },
            { email: h.uniqueEmail('t3'), name: 'Three' },
          ] as never,
        },
      });
      expect(mixed.data!.result.items.map((i) => ('error' in i ? i.error.code : i.status))).toEqual([
        'user created',
        'identity_taken',
        'invalid_request',
      ]);
    });
  });
}

defineIdentitiesSuite(pgliteTarget);
defineIdentitiesSuite(await postgresTarget());
