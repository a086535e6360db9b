// Impersonation for support (issue 43, point 7) through the client, on PGlite and PostgreSQL:
// session/impersonate needs the `impersonate` scope, which API_TOKENS' token lacks; the session it
// makes says so in session/verify, session/list, a refresh, its access token (`act`), its audit
// row and its session.created event, never with a token; its lifetime is at most an hour.
import { createHash } from 'node:crypto';
import type { Problem, UserAccountsClient } from '@user-accounts/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { GHOST, useTarget } from './harness.ts';
import { pgliteTarget, postgresTarget, type TargetSpec } from './targets.ts';

const TOKEN = /^uas_[A-Za-z0-9_-]{43}$/;
const sha256 = (text: string) => createHash('sha256').update(text).digest('base64url');
const jwtPart = (jwt: string, i: 0 | 1) => JSON.parse(Buffer.from(jwt.split('.')[i]!, 'base64url').toString('utf8'));

function defineImpersonationSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) {
    describe.skip(`${spec.name}: impersonation (${spec.skip ?? 'stateless'})`, () => {
      it('skipped', () => {});
    });
    return;
  }

  describe(`${spec.name}: impersonation`, () => {
    const h = useTarget(spec);
    /** A token an operator made with the impersonate scope (and nothing else). */
    let support: UserAccountsClient;
    const actor = 'grace@support.example.com';
    const reason = 'Ticket 4821: the invoice page shows no invoices';
    const start = (
      body: { _userId: string; actor: string; reason: string; lifetime?: number },
      as: UserAccountsClient = support,
      headers: Record<string, string> = {},
    ) => as.POST('/api/1/session/impersonate', { body, headers });
    const sessionCount = async (userId: string) =>
      (await h.target.sql('select count(*)::int as n from sessions where user_id = $1', [userId]))[0]!.n;

    beforeAll(async () => {
      support = h.clientFor((await h.target.createToken({ scopes: ['impersonate'], label: 'support desk' })).token);
    });

    it('needs the impersonate scope: the API_TOKENS token and one with every other scope get 403', async () => {
      const user = await h.createUser();
      const others = (
        await h.target.createToken({ scopes: ['read', 'write', 'verify', 'export', 'events'], label: 'all but' })
      ).token;
      for (const as of [h.client, h.clientFor(others)]) {
        const { error, response } = await start({ _userId: user.id, actor, reason }, as);
        expect(response.status).toBe(403);
        expect((error as Problem).code).toBe('forbidden');
      }
      expect(await sessionCount(user.id)).toBe(0);
      // The operator grants it explicitly: the same request with such a token starts one.
      expect((await start({ _userId: user.id, actor, reason })).response.status).toBe(201);
      expect(await sessionCount(user.id)).toBe(1);
    });

    it('starts a session that session/verify, session/list, a refresh and its access token show as an impersonation', async () => {
      const user = await h.createUser();
      const before = Date.now();
      const { data, error, response } = await start({ _userId: user.id, actor, reason }, support, {
        'X-End-User-IP': '198.51.100.23',
      });
      expect(error, JSON.stringify(error)).toBeUndefined();
      expect(response.status).toBe(201);
      const { session, status } = data!.result;
      expect(status).toBe('impersonation started');
      expect(session.token).toMatch(TOKEN);
      // Default lifetime: 30 minutes.
      expect(Math.abs(Date.parse(session.expiresAt) - before - 1_800_000)).toBeLessThan(60_000);

      const checked = await h.client.POST('/api/1/session/verify', { body: { token: session.token } });
      expect(checked.data!.result).toMatchObject({
        sessionId: session.sessionId,
        _userId: user.id,
        aal: 1,
        amr: [],
        impersonator: { actor, reason },
        status: 'session valid',
      });
      const listed = (await h.client.GET('/api/1/session/list', { params: { query: { _userId: user.id } } })).data!
        .result.sessions;
      expect(listed).toHaveLength(1);
      expect(listed[0]).toMatchObject({
        sessionId: session.sessionId,
        aal: 1,
        amr: [],
        ip: '198.51.100.23',
        userAgent: null,
        impersonator: { actor, reason },
      });
      // A login of the person's own is no impersonation.
      const own = await h.client.POST('/api/1/user/verify', {
        body: { email: user.email, password: user.password, session: {} },
      });
      const ownChecked = await h.client.POST('/api/1/session/verify', {
        body: { token: own.data!.result.session!.token },
      });
      expect(ownChecked.data!.result).not.toHaveProperty('impersonator');

      // The access token names the account and, signed by the service's keys, the actor (RFC 8693 `act`).
      const claims = jwtPart(session.accessToken, 1);
      expect(claims).toMatchObject({ sub: user.id, sid: session.sessionId });
      if (jwtPart(session.accessToken, 0).alg === 'ES256') expect(claims.act).toEqual({ sub: actor });

      // A refresh keeps all of it.
      const refreshed = await h.client.POST('/api/1/session/refresh', { body: { token: session.token } });
      expect(refreshed.response.status).toBe(200);
      const next = refreshed.data!.result.session;
      expect(next.expiresAt).toBe(session.expiresAt);
      const again = await h.client.POST('/api/1/session/verify', { body: { token: next.token } });
      expect(again.data!.result.impersonator).toEqual({ actor, reason });
      if (jwtPart(next.accessToken, 0).alg === 'ES256')
        expect(jwtPart(next.accessToken, 1).act).toEqual({ sub: actor });

      // Ended as any session.
      expect(
        (await h.client.POST('/api/1/session/revoke', { body: { sessionId: session.sessionId } })).response.status,
      ).toBe(200);
      expect((await h.client.POST('/api/1/session/verify', { body: { token: next.token } })).response.status).toBe(422);
    });

    it('its audit row and session.created event carry actor and reason, and no token', async () => {
      const user = await h.createUser();
      const { data } = await start({ _userId: user.id, actor, reason });
      const session = data!.result.session;
      const trail = (await h.client.GET('/api/1/audit', { params: { query: { _userId: user.id } } })).data!.result
        .entries;
      const row = trail.find((e) => e.operation === 'session_impersonate');
      expect(row).toMatchObject({ status: 201, outcome: 'impersonation started', impersonator: { actor, reason } });
      // Only the impersonation's row says so.
      expect(trail.filter((e) => e.impersonator !== undefined)).toHaveLength(1);

      const events = (await h.client.GET('/api/1/events', { params: { query: { subject: user.id, limit: 100 } } }))
        .data!.result.events;
      const created = events.filter((e) => e.type === 'session.created');
      expect(created).toHaveLength(1);
      expect(created[0]!.data).toEqual({
        _userId: user.id,
        sessionId: session.sessionId,
        aal: 1,
        amr: [],
        expiresAt: session.expiresAt,
        impersonator: { actor, reason },
      });

      const rows = JSON.stringify([
        await h.target.sql('select * from audit_log where user_id = $1', [user.id]),
        await h.target.sql('select * from events'),
        await h.target.sql('select * from event_queue'),
        h.target.logs.join('\n'),
      ]);
      expect(rows).toContain(reason); // the search finds what is there
      for (const secret of [session.token, session.token.slice(4), sha256(session.token), session.accessToken])
        expect(rows.includes(secret)).toBe(false);
      // Stored as for any session: only its hash.
      const [stored] = await h.target.sql('select token_hash, impersonator from sessions where id = $1', [
        session.sessionId,
      ]);
      expect(stored).toEqual({ token_hash: sha256(session.token), impersonator: { actor, reason } });
    });

    it('refuses what the spec refuses: 400 for a missing, blank or too long actor or reason, a lifetime out of bounds', async () => {
      const user = await h.createUser();
      const cases: [string, Record<string, unknown>][] = [
        ['no actor', { _userId: user.id, reason }],
        ['no reason', { _userId: user.id, actor }],
        ['an empty actor', { _userId: user.id, actor: '', reason }],
        ['a blank actor', { _userId: user.id, actor: '   ', reason }],
        ['a blank reason', { _userId: user.id, actor, reason: ' \t ' }],
        ['an actor of 201 characters', { _userId: user.id, actor: 'a'.repeat(201), reason }],
        ['a reason of 501 characters', { _userId: user.id, actor, reason: 'r'.repeat(501) }],
        // The console and the audit trail show both: no control characters, line breaks included.
        ['an actor with ESC', { _userId: user.id, actor: `${actor}\u001b]0;x\u0007`, reason }],
        ['an actor with a line break', { _userId: user.id, actor: `  ${actor}\n`, reason }],
        ['a reason with a C1 control', { _userId: user.id, actor, reason: `${reason}\u009b2J` }],
        ['a reason on two lines', { _userId: user.id, actor, reason: `${reason}\r\nforged` }],
        ['a reason with bidi formatting', { _userId: user.id, actor, reason: `\u202e${reason}` }],
        ['an actor of zero-width characters', { _userId: user.id, actor: '\u200b\u200b', reason }],
        ['a lifetime over an hour', { _userId: user.id, actor, reason, lifetime: 3601 }],
        ['a lifetime under a minute', { _userId: user.id, actor, reason, lifetime: 59 }],
        ['an unknown field', { _userId: user.id, actor, reason, password: 'x' }],
      ];
      for (const [what, body] of cases) {
        const { error, response } = await start(body as never);
        expect(response.status, what).toBe(400);
        expect((error as Problem).code, what).toBe('invalid_request');
        if (what.includes(' with ') || what.includes(' on two lines'))
          expect((error as Problem).errors?.[0]?.message, what).toMatch(/^must (not contain|contain a visible)/);
      }
      expect(await sessionCount(user.id)).toBe(0);
      // The bounds themselves are good.
      const longest = await start({ _userId: user.id, actor: 'a'.repeat(200), reason: 'r'.repeat(500), lifetime: 60 });
      expect(longest.response.status).toBe(201);
      const [row] = await h.target.sql('select impersonator from sessions where id = $1', [
        longest.data!.result.session.sessionId,
      ]);
      expect(row!.impersonator).toEqual({ actor: 'a'.repeat(200), reason: 'r'.repeat(500) });
      // The paper trail is kept trimmed.
      const spaced = await start({ _userId: user.id, actor: `  ${actor} `, reason: ` ${reason} ` });
      expect(spaced.response.status).toBe(201);
      const checked = await h.client.POST('/api/1/session/verify', {
        body: { token: spaced.data!.result.session.token },
      });
      expect(checked.data!.result.impersonator).toEqual({ actor, reason });
    });

    it("lives at most an hour, as asked, and never past the site's own lifetime", async () => {
      const user = await h.createUser();
      const at = Date.now();
      const hour = await start({ _userId: user.id, actor, reason, lifetime: 3600 });
      expect(Math.abs(Date.parse(hour.data!.result.session.expiresAt) - at - 3_600_000)).toBeLessThan(60_000);
      const short = await start({ _userId: user.id, actor, reason, lifetime: 300 });
      expect(Math.abs(Date.parse(short.data!.result.session.expiresAt) - at - 300_000)).toBeLessThan(60_000);

      const site = `impersonate-life-${Date.now()}`;
      await h.target.sql('insert into site_settings (site, session_lifetime_seconds) values ($1, 600)', [site]);
      const writer = h.clientFor((await h.target.createToken({ site, scopes: ['write'] })).token);
      const desk = h.clientFor((await h.target.createToken({ site, scopes: ['impersonate'] })).token);
      const member = await h.createUser({}, writer);
      const capped = await start({ _userId: member.id, actor, reason }, desk);
      expect(Math.abs(Date.parse(capped.data!.result.session.expiresAt) - Date.now() - 600_000)).toBeLessThan(60_000);
    });

    it('impersonations neither count toward nor end the person’s own sessions, and are bounded apart: the 11th live one ends the oldest impersonation (issue 57, G13)', async () => {
      const user = await h.createUser();
      const own = await h.client.POST('/api/1/user/verify', {
        body: { email: user.email, password: user.password, session: {} },
      });
      const mine = own.data!.result.session!;
      // 95 earlier impersonations, written as session/impersonate writes them (100 through the API
      // take 10 s on PGlite), then 5 more through it: a hundred in all beside the person's one.
      await h.target.sql(
        `insert into sessions (id, site, user_id, token_hash, created_at, last_seen_at, expires_at, idle_seconds, aal, amr, impersonator)
          select gen_random_uuid(), u.site, u.id, 'seeded-' || u.id || '-' || i, now() + make_interval(secs => i / 1e6),
            now(), now() + interval '30 minutes', 604800, 1, '[]'::jsonb, $2::jsonb
          from users u, generate_series(1, 95) i where u.id = $1`,
        [user.id, JSON.stringify({ actor, reason })],
      );
      const made: string[] = [];
      for (let i = 0; i < 5; i++) {
        const { data, response } = await start({ _userId: user.id, actor, reason });
        expect(response.status).toBe(201);
        made.push(data!.result.session.sessionId);
      }
      // The person's own session outlives a hundred impersonations: the impersonate token cannot
      // end it (session/revoke needs write), so neither may its impersonations.
      const checked = await h.client.POST('/api/1/session/verify', { body: { token: mine.token } });
      expect(checked.response.status).toBe(200);
      expect(checked.data!.result.impersonator).toBeUndefined();
      const listed = (await h.client.GET('/api/1/session/list', { params: { query: { _userId: user.id } } })).data!
        .result.sessions;
      // The five newest impersonations, then the five seeded last, then the person's own (oldest).
      expect(listed).toHaveLength(11);
      expect(listed.slice(0, 5).map((s) => s.sessionId)).toEqual(made.reverse());
      expect(listed.at(-1)!.sessionId).toBe(mine.sessionId);
      const ended = await h.target.sql(
        `select impersonator is not null as impersonation, revoke_reason from sessions
          where user_id = $1 and revoked_at is not null`,
        [user.id],
      );
      expect(ended).toHaveLength(90);
      expect(ended.every((r) => r.impersonation === true && r.revoke_reason === 'limit')).toBe(true);
    });

    it("answers 404 for an account not in reach (unknown, another site's, deleted) and 403 for a disabled one", async () => {
      const elsewhere = (
        await h.target.createToken({ site: `impersonate-other-${Date.now()}`, scopes: ['impersonate', 'write'] })
      ).token;
      const otherDesk = h.clientFor(elsewhere);
      const theirs = await h.createUser({}, otherDesk);
      const ours = await h.createUser();
      const deleted = await h.createUser();
      expect(
        (await h.client.DELETE('/api/1/user/delete', { body: { _userId: deleted.id, graceDays: 7 } })).response.status,
      ).toBe(200);
      const refusals = [
        await start({ _userId: GHOST, actor, reason }),
        await start({ _userId: theirs.id, actor, reason }),
        await start({ _userId: ours.id, actor, reason }, otherDesk),
        await start({ _userId: deleted.id, actor, reason }),
      ];
      for (const r of refusals) {
        expect(r.response.status).toBe(404);
        expect((r.error as Problem).code).toBe('user_not_found');
      }
      const disabled = await h.createUser();
      expect((await h.client.POST('/api/1/user/disable', { body: { _userId: disabled.id } })).response.status).toBe(
        200,
      );
      const refused = await start({ _userId: disabled.id, actor, reason });
      expect(refused.response.status).toBe(403);
      expect((refused.error as Problem).code).toBe('account_disabled');
      for (const id of [theirs.id, ours.id, deleted.id, disabled.id]) expect(await sessionCount(id)).toBe(0);
      // The other site's own account: its desk may.
      expect((await start({ _userId: theirs.id, actor, reason }, otherDesk)).response.status).toBe(201);
    });
  });
}

defineImpersonationSuite(pgliteTarget);
defineImpersonationSuite(await postgresTarget());
