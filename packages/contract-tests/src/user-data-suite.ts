// The person's data in one answer through the client (issue 30, point 3): GET /api/1/user/data
// holds every row that names the account, in every table that names one (ACCOUNT_TABLES, held
// to the database's own rows here and to db/schema.ts in accounts/user-data.integration.test.ts), and no
// secret; it answers 404 as get does and 403 without the export scope; it is bounded, and says
// so. Each test works in a site of its own. Server targets only.
import type { Problem } from '@user-accounts/client';
import { ACCOUNT_TABLES, AUDIT_LIMIT, EVENTS_LIMIT } from '@user-accounts/server/accounts/user-data';
import { describe, expect, it } from 'vitest';
import { totpAt } from './factors-suite.ts';
import { GHOST, issuedTicket, useTarget, withoutRequestId } from './harness.ts';
import type { TargetSpec } from './targets.ts';

export function defineUserDataSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: the person's data in one answer`, () => {
    const h = useTarget(spec);
    let sites = 0;
    const ALL = ['read', 'write', 'verify', 'events', 'export'] as const;
    const newSite = async (scopes: readonly (typeof ALL)[number][] = ALL) => {
      const site = `data-${Date.now().toString(36)}-${sites++}`;
      const { token } = await h.target.createToken({ site, scopes: [...scopes], label: 'user data' });
      return { site, client: h.clientFor(token) };
    };
    type Client = Awaited<ReturnType<typeof newSite>>['client'];
    const data = (client: Client, id: string) => client.GET('/api/1/user/data', { params: { query: { _userId: id } } });

    /**
     * An account with a row in every table that can name one: an enabled and a pending factor,
     * recovery codes (one used), two tickets, a count of each lockout counter, events and audit
     * rows. Returns it with every secret it was handed.
     */
    async function accountWithEverything(site: string, client: Client) {
      const email = h.uniqueEmail('data');
      const password = h.password();
      // Failed by email while no account had it: the counter by email.
      const early = await client.POST('/api/1/user/verify', { body: { email, password } });
      expect(early.response.status).toBe(422);
      const created = await client.POST('/api/1/user/create', {
        body: { email, password, name: 'Ada Lovelace', phone: '+44 20 7946 0018' },
      });
      expect(created.response.status).toBe(201);
      const user = { id: created.data!.result._userId, email, password };
      const linked = await client.POST('/api/1/user/identity/link', {
        body: { _userId: user.id, provider: 'github', subject: `data-${user.id}`, email: 'ada@example.org' },
      });
      expect(linked.response.status).toBe(200);
      const added = (await client.POST('/api/1/user/factor/totp', { body: { _userId: user.id, label: 'Phone' } })).data!
        .result;
      // A code of this step: the server takes it a step either way, so no wait for a step's start.
      const confirmed = await client.POST('/api/1/user/factor/confirm', {
        body: { _userId: user.id, factorId: added.factorId, code: totpAt(added.secret, Date.now() / 1000) },
      });
      expect(confirmed.response.status).toBe(200);
      const recoveryCodes = confirmed.data!.result.recoveryCodes!;
      const pending = (await client.POST('/api/1/user/factor/totp', { body: { _userId: user.id, label: 'Tablet' } }))
        .data!.result;
      const login = async () => {
        const { error } = await client.POST('/api/1/user/verify', { body: { email, password } });
        expect(error?.code).toBe('second_factor_required');
        return (error as { ticket: string }).ticket;
      };
      // A recovery code used, then a wrong code: the second factor's counter.
      const used = await client.POST('/api/1/user/factor/verify', {
        body: { ticket: await login(), recoveryCode: recoveryCodes[0]!, session: { userAgent: 'Phone' } },
      });
      expect(used.response.status).toBe(200);
      // The login made a session: the person's data lists it, never its token.
      const sessionToken = used.data!.result.session!.token;
      const wrongCode = totpAt(added.secret, Date.now() / 1000) === '000000' ? '000001' : '000000';
      const refused = await client.POST('/api/1/user/factor/verify', {
        body: { ticket: await login(), code: wrongCode },
      });
      expect(refused.response.status).toBe(422);
      // A wrong password: the counter by id.
      const wrong = await client.POST('/api/1/user/verify', { body: { email, password: `${password}x` } });
      expect(wrong.response.status).toBe(422);
      const tickets: string[] = [];
      for (const body of [
        { purpose: 'change_email' as const, _userId: user.id, newEmail: h.uniqueEmail('new') },
        { purpose: 'verify_phone' as const, _userId: user.id },
      ]) {
        const issued = await client.POST('/api/1/user/ticket', { body });
        expect(issued.response.status, JSON.stringify(issued.error)).toBe(201);
        tickets.push(issuedTicket(issued.data!.result));
      }
      // A passkey registration under way (its challenge as the server keeps it: a hash).
      await h.target.sql(
        `insert into passkey_challenges (challenge_hash, site, purpose, user_id, expires_at)
         values (md5(random()::text), $1, 'register', $2, now() + interval '5 minutes')`,
        [site, user.id],
      );
      await client.POST('/api/1/user/update', {
        body: { _userId: user.id, name: 'Ada King', metadata: { plan: 'pro' } },
      });
      // A member of an organization (issue 45): the person's data lists the membership.
      await client.POST('/api/1/org/roles', { body: { roles: [{ role: 'admin', permissions: ['billing:manage'] }] } });
      const org = await client.POST('/api/1/org/create', { body: { name: 'Acme' } });
      const member = await client.POST('/api/1/org/member/add', {
        body: { orgId: org.data!.result.orgId, _userId: user.id, roles: ['admin'] },
      });
      expect(member.response.status).toBe(200);
      return {
        ...user,
        secrets: [password, added.secret, pending.secret, ...recoveryCodes, ...tickets, sessionToken],
      };
    }

    /** Every table of the database whose rows, as text, hold one of `needles` (any case): one scan each. */
    async function tablesHolding(needles: string[]): Promise<string[]> {
      const tables = await h.target.sql(
        `select table_name as name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`,
      );
      const found: string[] = [];
      for (const { name } of tables) {
        const [hit] = await h.target.sql(
          `select exists (select 1 from "${name}" t where t::text ilike any ($1)) as hit`,
          [needles.map((n) => `%${n}%`)],
        );
        if (hit!.hit === true) found.push(name as string);
      }
      return found;
    }

    it('holds every row of every table that names the account, each in its member, or says why not', async () => {
      const { site, client } = await newSite();
      const user = await accountWithEverything(site, client);
      const { data: answer, response } = await data(client, user.id);
      expect(response.status).toBe(200);
      const result = answer!.result;
      expect(result.format).toBe('user-accounts/user-data@1');

      // The tables the database has: each one naming the account by a column (a foreign key to
      // users, or a user_id or subject column) is listed, and each listed one exists.
      const naming = await h.target.sql(
        `select distinct c.table_name as name from information_schema.columns c
         where c.table_schema = 'public' and c.table_name <> 'users'
           and (c.column_name in ('user_id', 'subject', 'account_id') or exists (
             select 1 from information_schema.referential_constraints r
             join information_schema.key_column_usage k on k.constraint_name = r.constraint_name and k.table_name = c.table_name
             join information_schema.constraint_column_usage u on u.constraint_name = r.unique_constraint_name
             where u.table_name = 'users' and k.column_name = c.column_name))`,
      );
      const listed = Object.keys(ACCOUNT_TABLES);
      for (const { name } of naming) expect.soft(listed, `table ${name} names an account`).toContain(name);
      const tables = (
        await h.target.sql(`select table_name as name from information_schema.tables where table_schema = 'public'`)
      ).map((r) => r.name);
      for (const name of listed) expect(tables).toContain(name);

      // Every table whose rows hold the id or the email, however (a copy of an answer, a JSON
      // event), is listed.
      const holding = await tablesHolding([user.id, user.email]);
      expect(holding).toEqual(expect.arrayContaining(['users', 'tickets', 'audit_log', 'events']));
      for (const name of holding) expect.soft(listed, `table ${name} holds the account`).toContain(name);

      // Each listed table's rows about the account, as many as the answer holds in its member.
      const count = async (query: string, params: unknown[] = [user.id]) =>
        Number((await h.target.sql(query, params))[0]!.n);
      const held = {
        users: await count(`select count(*) as n from users where id = $1`),
        user_identities: await count(`select count(*) as n from user_identities where user_id = $1`),
        user_factors: await count(`select count(*) as n from user_factors where user_id = $1`),
        recovery_codes: await count(`select count(*) as n from recovery_codes where user_id = $1`),
        tickets: await count(`select count(*) as n from tickets where user_id = $1`),
        passkey_challenges: await count(`select count(*) as n from passkey_challenges where user_id = $1`),
        sessions: await count(`select count(*) as n from sessions where user_id = $1`),
        org_memberships: await count(`select count(*) as n from org_memberships where user_id = $1`),
        messages: await count(`select count(*) as n from messages where user_id = $1`),
        audit_log: await count(`select count(*) as n from audit_log where site = $2 and user_id = $1`, [user.id, site]),
        events: await count(
          `select (select count(*) from events where site = $2 and subject = $1)
                + (select count(*) from event_queue where site = $2 and subject = $1) as n`,
          [user.id, site],
        ),
      };
      // The answer is read before its own audit row is written.
      expect({
        users: result.account._userId === user.id ? 1 : 0,
        user_identities: result.account.identities.length,
        user_factors: result.factors.length,
        recovery_codes: result.recoveryCodes.length,
        tickets: result.tickets.length,
        passkey_challenges: result.passkeyChallenges.length,
        sessions: result.sessions.length,
        org_memberships: result.organizations.length,
        messages: result.messages.length,
        audit_log: result.audit.entries.length + 1,
        events: result.events.entries.length,
      }).toEqual(held);
      expect(Object.keys(held).concat('event_queue', 'verify_failures').sort()).toEqual(
        Object.entries(ACCOUNT_TABLES)
          .filter(([, how]) => 'member' in how)
          .map(([name]) => name)
          .sort(),
      );

      // And what they say.
      expect(result.account).toEqual(
        (await client.GET('/api/1/user/get', { params: { query: { _userId: user.id } } })).data!.result,
      );
      expect(result.account).toMatchObject({ name: 'Ada King', metadata: { plan: 'pro' }, phone: '+44 20 7946 0018' });
      expect(result.factors.map((f) => [f.type, f.label, f.status])).toEqual([
        ['totp', 'Phone', 'enabled'],
        ['totp', 'Tablet', 'pending'],
      ]);
      expect(result.recoveryCodes.filter((c) => c.usedAt !== null)).toHaveLength(1);
      expect(result.tickets.map((t) => [t.purpose, t.newEmail === null])).toEqual([
        ['change_email', false],
        ['verify_phone', true],
      ]);
      expect(result.passkeyChallenges).toEqual([{ purpose: 'register', expiresAt: expect.any(String) }]);
      expect(result.lockout).toEqual({
        password: expect.objectContaining({ failures: 1, lockedUntil: null }),
        passwordByEmail: expect.objectContaining({ failures: 1, lockedUntil: null }),
        secondFactor: expect.objectContaining({ failures: 1, lockedUntil: null }),
      });
      expect(result.audit.entries.at(-1)).toMatchObject({ operation: 'create', status: 201 });
      expect(result.audit).toMatchObject({ truncated: false, next: null });
      expect(result.sessions).toEqual([
        expect.objectContaining({ userAgent: 'Phone', aal: 2, amr: ['pwd', 'otp', 'mfa'], revokedAt: null }),
      ]);
      expect(result.events.entries.map((e) => e.type)).toEqual([
        'user.updated',
        'session.created',
        'user.factor_added',
        'user.identity_linked',
        'user.created',
      ]);
      expect(result.events.truncated).toBe(false);

      // The answer leaves its own audit row, which the next answer shows first.
      const again = (await data(client, user.id)).data!.result;
      expect(again.audit.entries[0]).toMatchObject({ operation: 'export', status: 200, outcome: 'user data exported' });
    });

    it('holds no secret: no password or its hash, no factor secret, recovery code or its hash, no ticket secret', async () => {
      const { site, client } = await newSite();
      const user = await accountWithEverything(site, client);
      const stored = await h.target.sql(
        `select password_hash as s from users where id = $1
         union all select secret from user_factors where user_id = $1
         union all select code_hash from recovery_codes where user_id = $1
         union all select secret_hash from tickets where user_id = $1
         union all select challenge_hash from passkey_challenges where user_id = $1
         union all select token_hash from sessions where user_id = $1`,
        [user.id],
      );
      const secrets = [...user.secrets, ...stored.map((r) => r.s as string)];
      // Handed out: the password, two factor secrets, ten recovery codes, two tickets, a session
      // token; stored: their hashes, and a passkey challenge's.
      expect(secrets).toHaveLength(33);
      const { response } = await data(client, user.id);
      const text = h.bodies.at(-1)!;
      expect(response.status).toBe(200);
      for (const secret of secrets) {
        // A phone code is 6 digits, which a uuid or a sequence may hold by chance: as a JSON string.
        if (secret.length < 16) {
          expect(text).not.toContain(`"${secret}"`);
          continue;
        }
        expect(text).not.toContain(secret);
        // A recovery code as stored is normalized: without its dashes.
        expect(text).not.toContain(secret.replace(/-/g, ''));
      }
      expect(text).not.toMatch(/"(passwordHash|secret|secretHash|codeHash|ticket|token|tokenHash)":/);
    });

    it('answers 404 as get does: another site’s account, one not made through the API, one in its grace period, none', async () => {
      const { site, client } = await newSite();
      const other = await newSite();
      const theirs = await h.createUser({}, other.client);
      const inGrace = await h.createUser({}, client);
      await client.DELETE('/api/1/user/delete', { body: { _userId: inGrace.id, graceDays: 30 } });
      const [external] = await h.target.sql(
        `insert into users (site, email, name) values ($1, $2, 'Outside') returning id::text as id`,
        [site, h.uniqueEmail('external')],
      );
      for (const id of [theirs.id, external!.id as string, inGrace.id, GHOST, 'not-an-id']) {
        const answer = await data(client, id);
        const got = await client.GET('/api/1/user/get', { params: { query: { _userId: id } } });
        expect([id, answer.response.status]).toEqual([id, 404]);
        expect(withoutRequestId(answer.error as Problem)).toEqual(withoutRequestId(got.error as Problem));
      }
      // The owner's token still sees its own.
      expect((await data(other.client, theirs.id)).response.status).toBe(200);
    });

    it('answers 403 forbidden to a token without the export scope, before it looks at the account', async () => {
      const { client } = await newSite();
      const user = await h.createUser({}, client);
      const noExport = (await newSite(['read', 'write', 'verify', 'events'])).client;
      for (const id of [user.id, GHOST]) {
        const { response, error } = await data(noExport, id);
        expect(response.status).toBe(403);
        expect((error as Problem).code).toBe('forbidden');
      }
    });

    it(`is bounded: the newest ${AUDIT_LIMIT} audit rows and ${EVENTS_LIMIT} events, marked truncated, the rest readable on`, async () => {
      const { site, client } = await newSite();
      const user = await h.createUser({}, client);
      // As many more as fill the answer and one over, written as the server writes them.
      await h.target.sql(
        `insert into audit_log (site, token_id, operation, user_id, request_id, status, outcome)
         select $1, 'test', 'verify', $2, 'req-' || n, 422, 'invalid_credentials' from generate_series(1, $3::int) n`,
        [site, user.id, AUDIT_LIMIT],
      );
      await h.target.sql(
        `insert into event_queue (site, type, subject, data)
         select $1, 'user.purged', $2::uuid, jsonb_build_object('_userId', $2::text) from generate_series(1, $3::int)`,
        [site, user.id, EVENTS_LIMIT],
      );
      const result = (await data(client, user.id)).data!.result;
      expect(result.audit.entries).toHaveLength(AUDIT_LIMIT);
      expect(result.audit.truncated).toBe(true);
      expect(result.events.entries).toHaveLength(EVENTS_LIMIT);
      expect(result.events.truncated).toBe(true);
      // Newest first: the create is the row (and the event) left out.
      expect(result.audit.entries.map((e) => e.operation)).not.toContain('create');
      expect(result.events.entries.map((e) => e.type)).not.toContain('user.created');
      const rest = await client.GET('/api/1/audit', {
        params: { query: { _userId: user.id, before: result.audit.next!, limit: 100 } },
      });
      expect(rest.data!.result.entries.map((e) => [e.operation, e.status])).toEqual([['create', 201]]);
    });
  });
}
