// Sessions (issue 43, points 1, 2, 3, 5, 6) through the client, on PGlite and PostgreSQL: made by a
// completed login, checked, refreshed with rotation, listed, revoked, ended by what should end
// them; and three servers sharing one PostgreSQL that all refuse a revoked session within 1 s.
import { createHash, randomBytes } from 'node:crypto';
import type { Problem, UserAccountsClient } from '@user-accounts/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nowSeconds, totpAt } from './factors-suite.ts';
import { checkedClient, GHOST, issuedTicket, useTarget, withoutRequestId } from './harness.ts';
import {
  migratedPostgresDatabase,
  pgliteTarget,
  postgresTarget,
  postgresUnavailable,
  serverTarget,
  type Target,
  type TargetSpec,
  TEST_FACTOR_KEY,
  TEST_METRICS_TOKEN,
} from './targets.ts';
import { SoftAuthenticator } from './webauthn/soft-authenticator.ts';

const TOKEN = /^uas_[A-Za-z0-9_-]{43}$/;
const DAY = 86_400_000;
const sha256 = (text: string) => createHash('sha256').update(text).digest('base64url');

interface Issued {
  sessionId: string;
  token: string;
  expiresAt: string;
  accessToken: string;
  accessTokenExpiresAt: string;
}

function defineSessionsSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) {
    describe.skip(`${spec.name}: sessions (${spec.skip ?? 'stateless'})`, () => {
      it('skipped', () => {});
    });
    return;
  }

  describe(`${spec.name}: sessions`, () => {
    const h = useTarget(spec);
    /** Every session token any answer gave: none may be found anywhere but in those answers. */
    const seen = new Set<string>();
    const keep = (s: Issued | undefined) => {
      if (s !== undefined) seen.add(s.token);
      return s;
    };

    const login = async (
      user: { email: string; password: string },
      session: { userAgent?: string; lifetime?: number } = {},
      as: UserAccountsClient = h.client,
      headers: Record<string, string> = {},
    ) => {
      const { data, error, response } = await as.POST('/api/1/user/verify', {
        body: { email: user.email, password: user.password, session },
        headers,
      });
      expect(error, JSON.stringify(error)).toBeUndefined();
      expect(response.status).toBe(200);
      return keep(data!.result.session)!;
    };
    const check = (token: string, as: UserAccountsClient = h.client) =>
      as.POST('/api/1/session/verify', { body: { token } });
    const refresh = async (token: string, as: UserAccountsClient = h.client) => {
      const answer = await as.POST('/api/1/session/refresh', { body: { token } });
      keep(answer.data?.result.session);
      return answer;
    };
    const revoke = (body: { sessionId: string } | { _userId: string }) =>
      h.client.POST('/api/1/session/revoke', { body: body as { sessionId: string } });
    const list = (userId: string) => h.client.GET('/api/1/session/list', { params: { query: { _userId: userId } } });
    const eventsOf = async (userId: string) =>
      (await h.client.GET('/api/1/events', { params: { query: { subject: userId, limit: 1000 } } })).data!.result
        .events;
    const revokedReasons = async (userId: string) =>
      (await eventsOf(userId))
        .filter((e) => e.type === 'session.revoked')
        .map((e) => (e.data as { sessionId: string; reason: string }).reason);
    /** The session's refreshes as if they were 11 seconds ago: past the grace window. */
    const age = (sessionId: string) =>
      h.target.sql(
        `with s as (update sessions set rotated_at = rotated_at - interval '11 seconds' where id = $1)
         update session_replaced_tokens set replaced_at = replaced_at - interval '11 seconds' where session_id = $1`,
        [sessionId],
      );
    let invalid: Problem;
    /** A token with the export scope (the person's data, the export). */
    let exporter: { token: string; client: UserAccountsClient };
    const userData = (userId: string) =>
      exporter.client.GET('/api/1/user/data', { params: { query: { _userId: userId } } });

    beforeAll(async () => {
      const { token } = await h.target.createToken({ scopes: ['read', 'export'], label: 'sessions export' });
      exporter = { token, client: h.clientFor(token) };
      const { error } = await check(`uas_${'x'.repeat(43)}`);
      invalid = error as Problem;
      expect(invalid.code).toBe('invalid_session');
    });

    it('a login with `session` makes one: a prefixed token stored only as its SHA-256, its expiry, an access token', async () => {
      const user = await h.createUser();
      const before = Date.now();
      const session = await login(user, { userAgent: 'Firefox/133.0' }, h.client, { 'X-End-User-IP': '203.0.113.7' });
      expect(session.token).toMatch(TOKEN);
      expect(session.accessToken.split('.')).toHaveLength(3);
      expect(Date.parse(session.expiresAt) - before).toBeGreaterThan(30 * DAY - 60_000);
      expect(Date.parse(session.expiresAt) - before).toBeLessThan(30 * DAY + 60_000);
      expect(Date.parse(session.accessTokenExpiresAt)).toBeGreaterThan(before);
      const [row] = await h.target.sql('select * from sessions where id = $1', [session.sessionId]);
      expect(row!.token_hash).toBe(sha256(session.token));
      expect(JSON.stringify(row)).not.toContain(session.token.slice(4));
      expect(row).toMatchObject({ user_agent: 'Firefox/133.0', ip: '203.0.113.7', aal: 1, amr: ['pwd'] });

      const { data } = await check(session.token);
      expect(data!.result).toMatchObject({
        sessionId: session.sessionId,
        _userId: user.id,
        expiresAt: session.expiresAt,
        aal: 1,
        amr: ['pwd'],
        status: 'session valid',
      });
      expect(Date.parse(data!.result.idleExpiresAt) - before).toBeGreaterThan(7 * DAY - 60_000);
      expect(Date.parse(data!.result.idleExpiresAt) - before).toBeLessThan(7 * DAY + 60_000);

      // Without `session`, no session.
      const plain = await h.client.POST('/api/1/user/verify', { body: { email: user.email, password: user.password } });
      expect(plain.data!.result).toEqual({ _userId: user.id, status: 'password verified' });
      expect(await h.target.sql('select count(*)::int as n from sessions where user_id = $1', [user.id])).toEqual([
        { n: 1 },
      ]);
    });

    it("answers every miss alike: unknown, malformed, expired, idle, revoked, replaced, another site's", async () => {
      const user = await h.createUser();
      const tokens: Record<string, string> = {
        unknown: `uas_${'A'.repeat(43)}`,
        malformed: 'not a session token at all',
      };
      const expired = await login(user);
      await h.target.sql(`update sessions set expires_at = now() - interval '1 second' where id = $1`, [
        expired.sessionId,
      ]);
      tokens.expired = expired.token;
      const idle = await login(user);
      await h.target.sql(`update sessions set last_seen_at = now() - interval '7 days 1 second' where id = $1`, [
        idle.sessionId,
      ]);
      tokens.idle = idle.token;
      const revoked = await login(user);
      expect((await revoke({ sessionId: revoked.sessionId })).response.status).toBe(200);
      tokens.revoked = revoked.token;
      const replaced = await login(user);
      expect((await refresh(replaced.token)).response.status).toBe(200);
      tokens.replaced = replaced.token;
      const other = await h.target.createToken({ site: 'sessions-elsewhere', scopes: ['read', 'write', 'verify'] });
      const otherClient = h.clientFor(other.token);
      const stranger = await h.createUser({}, otherClient);
      tokens.otherSite = (await login(stranger, {}, otherClient)).token;

      for (const [why, token] of Object.entries(tokens)) {
        const { response, error } = await check(token);
        expect(response.status, why).toBe(422);
        expect(withoutRequestId(error as Problem), why).toEqual(withoutRequestId(invalid));
      }
      // About the same time: the same one read by the index for each. Measured in turns (each kind
      // once a round), so that whatever else the server does falls on every kind alike; medians.
      for (const token of Object.values(tokens)) for (let i = 0; i < 5; i++) await check(token);
      const times: Record<string, number[]> = Object.fromEntries(Object.keys(tokens).map((k) => [k, []]));
      for (let round = 0; round < 21; round++) {
        for (const [why, token] of Object.entries(tokens)) {
          const start = performance.now();
          await check(token);
          times[why]!.push(performance.now() - start);
        }
      }
      const median = (list: number[]) => [...list].sort((a, b) => a - b)[10]!;
      const base = median(times.unknown!);
      for (const [why, list] of Object.entries(times)) {
        const ms = median(list);
        const said = `${why}: ${ms.toFixed(2)} ms against ${base.toFixed(2)} ms`;
        expect(ms, said).toBeLessThan(base * 3 + 2);
        expect(ms, said).toBeGreaterThan(base / 3 - 2);
      }
      // The other site's token is good on its own site.
      expect((await check(tokens.otherSite!, otherClient)).response.status).toBe(200);
    });

    it('a lifetime given can only shorten; the site sets its own absolute and idle lifetimes', async () => {
      const user = await h.createUser();
      const start = Date.now();
      const short = await login(user, { lifetime: 3600 });
      expect(Math.abs(Date.parse(short.expiresAt) - start - 3_600_000)).toBeLessThan(60_000);
      const long = await login(user, { lifetime: 31_536_000 });
      expect(Math.abs(Date.parse(long.expiresAt) - start - 30 * DAY)).toBeLessThan(60_000);
      const tooShort = await h.client.POST('/api/1/user/verify', {
        body: { email: user.email, password: user.password, session: { lifetime: 59 } },
      });
      expect(tooShort.response.status).toBe(400);

      const site = `sessions-life-${Date.now()}`;
      await h.target.sql(
        'insert into site_settings (site, session_lifetime_seconds, session_idle_seconds) values ($1, 7200, 600)',
        [site],
      );
      const token = (await h.target.createToken({ site, scopes: ['read', 'write', 'verify'] })).token;
      const as = h.clientFor(token);
      const member = await h.createUser({}, as);
      const made = await login(member, { lifetime: 86_400 }, as);
      expect(Math.abs(Date.parse(made.expiresAt) - Date.now() - 7_200_000)).toBeLessThan(60_000);
      const checked = (await check(made.token, as)).data!.result;
      expect(Math.abs(Date.parse(checked.idleExpiresAt) - Date.now() - 600_000)).toBeLessThan(60_000);
    });

    it('moves lastSeenAt at most once a minute, and the idle expiry with it', async () => {
      const user = await h.createUser();
      const session = await login(user);
      const seen = async () =>
        new Date(
          (await h.target.sql('select last_seen_at from sessions where id = $1', [session.sessionId]))[0]!
            .last_seen_at as string,
        );
      const first = await seen();
      await check(session.token);
      await check(session.token);
      expect(await seen()).toEqual(first);
      await h.target.sql(`update sessions set last_seen_at = now() - interval '2 minutes' where id = $1`, [
        session.sessionId,
      ]);
      const old = await seen();
      const { data } = await check(session.token);
      const moved = await seen();
      expect(moved.getTime()).toBeGreaterThan(old.getTime() + 60_000);
      expect(Date.parse(data!.result.idleExpiresAt)).toBe(moved.getTime() + 7 * DAY);
      await check(session.token);
      expect(await seen()).toEqual(moved);
      const listed = (await list(user.id)).data!.result.sessions[0]!;
      expect(Date.parse(listed.lastSeenAt)).toBe(moved.getTime());
    });

    it('refresh replaces the token; the replaced one gets the same successor for 10 s, and only from refresh', async () => {
      const user = await h.createUser();
      const session = await login(user);
      const first = await refresh(session.token);
      expect(first.response.status).toBe(200);
      const next = first.data!.result.session;
      expect(first.data!.result.status).toBe('session refreshed');
      expect(next.token).toMatch(TOKEN);
      expect(next.token).not.toBe(session.token);
      expect(next).toMatchObject({ sessionId: session.sessionId, expiresAt: session.expiresAt });
      expect((await check(session.token)).response.status).toBe(422);
      expect((await check(next.token)).response.status).toBe(200);
      // A second tab with the old token: the same successor.
      const again = await refresh(session.token);
      expect(again.data!.result.session.token).toBe(next.token);
      expect((await check(next.token)).response.status).toBe(200);
      // The successor refreshes on; the first token, two refreshes old but replaced less than 10 s
      // ago, no longer gets the session's token: the miss, and nothing within the window revokes.
      const third = (await refresh(next.token)).data!.result.session;
      expect(third.token).not.toBe(next.token);
      const old = await refresh(session.token);
      expect(old.response.status).toBe(422);
      expect(withoutRequestId(old.error as Problem)).toEqual(withoutRequestId(invalid));
      expect((await check(third.token)).response.status).toBe(200);
      // Every replaced token is remembered by its hash alone.
      expect(
        (
          await h.target.sql('select token_hash from session_replaced_tokens where session_id = $1 order by seq', [
            session.sessionId,
          ])
        ).map((r) => r.token_hash),
      ).toEqual([sha256(session.token), sha256(next.token)]);
    });

    it('20 concurrent refreshes of one token all get the same successor', async () => {
      const user = await h.createUser();
      const session = await login(user);
      const answers = await Promise.all(Array.from({ length: 20 }, () => refresh(session.token)));
      expect(answers.map((a) => a.response.status)).toEqual(Array(20).fill(200));
      const successors = new Set(answers.map((a) => a.data!.result.session.token));
      expect(successors.size).toBe(1);
      const [successor] = [...successors];
      expect((await check(successor!)).response.status).toBe(200);
      expect((await h.target.sql('select token_hash from sessions where id = $1', [session.sessionId]))[0]).toEqual({
        token_hash: sha256(successor!),
      });
    });

    it('a replaced token presented 10 s after its refresh is theft: the whole session is revoked', async () => {
      const user = await h.createUser();
      const session = await login(user);
      const next = (await refresh(session.token)).data!.result.session;
      // The refresh as if it were 11 seconds ago.
      await age(session.sessionId);
      const reuse = await refresh(session.token);
      expect(reuse.response.status).toBe(422);
      expect(withoutRequestId(reuse.error as Problem)).toEqual(withoutRequestId(invalid));
      expect((await check(next.token)).response.status).toBe(422);
      expect((await refresh(next.token)).response.status).toBe(422);
      expect(await revokedReasons(user.id)).toEqual(['refresh_reuse']);
      expect((await list(user.id)).data!.result.sessions).toEqual([]);
    });

    // Review (point 2 of the small fixes): each refresh miss wrote an audit row, so made-up tokens
    // turned into database writes at the caller's will. A miss now writes nothing; a theft keeps its row.
    it('a refresh miss writes nothing: unknown, malformed, expired and revoked tokens leave the audit trail as it was', async () => {
      const user = await h.createUser();
      const { id, token } = await h.target.createToken({ scopes: ['read', 'verify'], label: 'refresh misses' });
      const as = h.clientFor(token);
      const expired = await login(user, {}, as);
      await h.target.sql(`update sessions set expires_at = now() - interval '1 second' where id = $1`, [
        expired.sessionId,
      ]);
      const revoked = await login(user, {}, as);
      expect((await revoke({ sessionId: revoked.sessionId })).response.status).toBe(200);
      const rowsOf = () =>
        h.target.sql(
          `select operation, user_id, status, outcome from audit_log
           where token_id = $1 and operation = 'session_refresh' order by id`,
          [id],
        );
      const trail = async () =>
        (await h.client.GET('/api/1/audit', { params: { query: { _userId: user.id, limit: 100 } } })).data!.result
          .entries;
      const before = await trail();
      const misses = [
        ...Array.from({ length: 25 }, () => `uas_${randomBytes(32).toString('base64url')}`),
        'not a session token at all',
        expired.token,
        revoked.token,
      ];
      for (const miss of misses) {
        const { response, error } = await as.POST('/api/1/session/refresh', { body: { token: miss } });
        expect(response.status).toBe(422);
        expect(withoutRequestId(error as Problem)).toEqual(withoutRequestId(invalid));
      }
      expect(await rowsOf()).toEqual([]);
      expect(await trail()).toEqual(before);

      // A replayed token (theft) keeps its audit row and its event, as a refresh keeps its own.
      const session = await login(user, {}, as);
      expect((await refresh(session.token, as)).response.status).toBe(200);
      await age(session.sessionId);
      expect((await refresh(session.token, as)).response.status).toBe(422);
      expect(await rowsOf()).toEqual([
        { operation: 'session_refresh', user_id: user.id, status: 200, outcome: 'session refreshed' },
        { operation: 'session_refresh', user_id: user.id, status: 422, outcome: 'invalid_session' },
      ]);
      expect(await revokedReasons(user.id)).toEqual(['revoked', 'refresh_reuse']);
    });

    // Review (point 1 of the small fixes): a userAgent was kept as given, control characters and
    // all, for the console and any tool that prints session/list. Every login taking one refuses them.
    it('a userAgent with control characters, line separators or bidi formatting is refused by every login taking one', async () => {
      const user = await h.createUser();
      const hostile = [
        'Firefox\u001b]0;pwned\u0007',
        'Firefox\r\nforged: line',
        'Firefox\u009b2J',
        'Firefox\u0000',
        'Firefox\tTab',
        'Firefox\u007f',
        'Firefox\u202eevil',
        'Firefox\u2028next',
      ];
      const logins = (userAgent: string): [string, Record<string, unknown>][] => [
        ['/api/1/user/verify', { email: user.email, password: user.password, session: { userAgent } }],
        ['/api/1/user/factor/verify', { ticket: 'a'.repeat(43), code: '123456', session: { userAgent } }],
        ['/api/1/user/passkey/verify', { response: {}, session: { userAgent } }],
        ['/api/1/user/identity/verify', { provider: 'google', subject: '1', session: { userAgent } }],
        ['/api/1/user/ticket/redeem', { ticket: 'a'.repeat(43), purpose: 'login', session: { userAgent } }],
      ];
      for (const userAgent of hostile)
        for (const [path, body] of logins(userAgent)) {
          const { response, error } = await h.client.POST(path as '/api/1/user/verify', { body: body as never });
          const what = `${path} ${JSON.stringify(userAgent)}`;
          expect(response.status, what).toBe(400);
          expect((error as Problem).code, what).toBe('invalid_request');
          const at = (error as Problem).errors?.find((e) => e.pointer === '/session/userAgent');
          expect(at?.message, what).toMatch(
            /^must not contain (control characters \(U\+0000–U\+001F, U\+007F–U\+009F\)|U\+2028 or U\+2029|bidirectional formatting characters)$/,
          );
        }
      expect(await h.target.sql('select count(*)::int as n from sessions where user_id = $1', [user.id])).toEqual([
        { n: 0 },
      ]);
      // What a browser sends stays good, whatever its script.
      const agent = 'Mozilla/5.0 (X11; Linux x86_64) Firefox/133.0 Zoë/李';
      const made = await login(user, { userAgent: agent });
      expect((await list(user.id)).data!.result.sessions.map((s) => s.userAgent)).toEqual([agent]);
      expect(made.sessionId).toBeDefined();
    });

    it.runIf(spec.name.includes('PGlite'))(
      'a real 10 s wait: a replaced token is then theft, where at 9 s it still got its successor',
      async () => {
        const user = await h.createUser();
        const session = await login(user);
        const next = (await refresh(session.token)).data!.result.session;
        await new Promise((resolve) => setTimeout(resolve, 9_000));
        expect((await refresh(session.token)).data!.result.session.token).toBe(next.token);
        await new Promise((resolve) => setTimeout(resolve, 1_500));
        expect((await refresh(session.token)).response.status).toBe(422);
        expect((await check(next.token)).response.status).toBe(422);
      },
      20_000,
    );

    it('keeps at most 100 live sessions an account: the 101st ends the oldest (reason limit)', async () => {
      const user = await h.createUser();
      const made: Issued[] = [];
      for (let i = 0; i < 101; i++) made.push(await login(user));
      expect((await check(made[0]!.token)).response.status).toBe(422);
      expect((await check(made[1]!.token)).response.status).toBe(200);
      expect((await check(made[100]!.token)).response.status).toBe(200);
      const listed = (await list(user.id)).data!.result.sessions;
      expect(listed).toHaveLength(100);
      expect(listed[0]!.sessionId).toBe(made[100]!.sessionId);
      expect(await revokedReasons(user.id)).toEqual(['limit']);
    });

    it('a second factor: the 403 carries no session; factor/verify makes one at aal 2 (TOTP, recovery code)', async () => {
      const user = await h.createUser();
      const added = (await h.client.POST('/api/1/user/factor/totp', { body: { _userId: user.id } })).data!.result;
      const confirmed = await h.client.POST('/api/1/user/factor/confirm', {
        body: { _userId: user.id, factorId: added.factorId, code: totpAt(added.secret, nowSeconds()) },
      });
      const codes = confirmed.data!.result.recoveryCodes!;
      const step = async () => {
        const first = await h.client.POST('/api/1/user/verify', {
          body: { email: user.email, password: user.password, session: {} },
        });
        expect(first.response.status).toBe(403);
        expect(first.error).not.toHaveProperty('session');
        expect(JSON.stringify(first.error)).not.toContain('uas_');
        return (first.error as Problem & { ticket: string }).ticket;
      };
      expect(await h.target.sql('select count(*)::int as n from sessions where user_id = $1', [user.id])).toEqual([
        { n: 0 },
      ]);
      // The TOTP step a minute from now, so that no step already used is replayed.
      const byCode = await h.client.POST('/api/1/user/factor/verify', {
        body: { ticket: await step(), code: totpAt(added.secret, nowSeconds() + 30), session: { userAgent: 'App' } },
      });
      expect(byCode.response.status).toBe(200);
      const one = keep(byCode.data!.result.session)!;
      expect((await check(one.token)).data!.result).toMatchObject({ aal: 2, amr: ['pwd', 'otp', 'mfa'] });
      const byRecovery = await h.client.POST('/api/1/user/factor/verify', {
        body: { ticket: await step(), recoveryCode: codes[0]!, session: {} },
      });
      const two = keep(byRecovery.data!.result.session)!;
      expect((await check(two.token)).data!.result).toMatchObject({ aal: 2, amr: ['pwd', 'otp', 'mfa'] });
      // Without `session` the second step makes none.
      const plain = await h.client.POST('/api/1/user/factor/verify', {
        body: { ticket: await step(), recoveryCode: codes[1]! },
      });
      expect(plain.data!.result).toEqual({ _userId: user.id, status: 'second factor verified' });
    });

    it('a passkey login makes a session at aal 2: alone [hwk, user, mfa], as the second factor [pwd, hwk, mfa]', async () => {
      const origin = 'http://localhost:5173';
      const site = `sessions-passkeys-${Date.now().toString(36)}`;
      const { token } = await h.target.createToken({ site, scopes: ['read', 'write', 'verify'], label: 'passkeys' });
      await h.target.sql(
        `insert into site_settings (site, rp_id, rp_name, rp_origins) values ($1, 'localhost', 'Example', $2::jsonb)`,
        [site, JSON.stringify([origin])],
      );
      const as = h.clientFor(token);
      const user = await h.createUser({}, as);
      const authenticator = new SoftAuthenticator(origin);
      const options = (await as.POST('/api/1/user/factor/passkey/options', { body: { _userId: user.id } })).data!.result
        .options;
      const registered = await as.POST('/api/1/user/factor/passkey', {
        body: { _userId: user.id, response: authenticator.register(options) },
      });
      expect(registered.response.status).toBe(201);
      const assertion = async () =>
        authenticator.assert(
          (await as.POST('/api/1/user/passkey/options', { body: { _userId: user.id } })).data!.result.options,
        );
      const alone = await as.POST('/api/1/user/passkey/verify', {
        body: { response: await assertion(), session: { userAgent: 'Phone' } },
        headers: { 'X-End-User-IP': '2001:db8::1' },
      });
      expect(alone.response.status).toBe(200);
      const one = keep(alone.data!.result.session)!;
      expect((await check(one.token, as)).data!.result).toMatchObject({ aal: 2, amr: ['hwk', 'user', 'mfa'] });
      expect(
        (await as.GET('/api/1/session/list', { params: { query: { _userId: user.id } } })).data!.result.sessions[0],
      ).toMatchObject({ userAgent: 'Phone', ip: '2001:db8::1' });
      // The password first, then the passkey as its second factor.
      const first = await as.POST('/api/1/user/verify', {
        body: { email: user.email, password: user.password, session: {} },
      });
      expect(first.response.status).toBe(403);
      const second = await as.POST('/api/1/user/factor/verify', {
        body: {
          ticket: (first.error as Problem & { ticket: string }).ticket,
          passkey: await assertion(),
          session: {},
        } as never,
      });
      expect(second.response.status).toBe(200);
      const two = keep(second.data!.result.session)!;
      expect((await check(two.token, as)).data!.result).toMatchObject({ aal: 2, amr: ['pwd', 'hwk', 'mfa'] });
    });

    it('lists live sessions without a secret; 404 for an account not in reach', async () => {
      const user = await h.createUser();
      const a = await login(user, { userAgent: 'Phone' }, h.client, { 'X-End-User-IP': '::ffff:198.51.100.4' });
      const b = await login(user);
      await revoke({ sessionId: b.sessionId });
      const c = await login(user);
      const { data } = await list(user.id);
      expect(data!.result.sessions.map((s) => s.sessionId)).toEqual([c.sessionId, a.sessionId]);
      expect(data!.result.sessions[1]).toMatchObject({
        sessionId: a.sessionId,
        expiresAt: a.expiresAt,
        aal: 1,
        amr: ['pwd'],
        userAgent: 'Phone',
        ip: '198.51.100.4',
      });
      expect(data!.result.sessions[0]).toMatchObject({ userAgent: null, ip: null });
      expect(JSON.stringify(data)).not.toContain('uas_');
      const ghost = await list(GHOST);
      expect(ghost.response.status).toBe(404);
      expect(ghost.error?.code).toBe('user_not_found');
    });

    it("revokes one session or all of an account's; unknown or another site's is 404", async () => {
      const user = await h.createUser();
      const [a, b, c] = [await login(user), await login(user), await login(user)];
      const one = await revoke({ sessionId: a.sessionId });
      expect(one.data!.result).toEqual({ status: 'session revoked' });
      expect((await check(a.token)).response.status).toBe(422);
      expect((await refresh(a.token)).response.status).toBe(422);
      // Again: the same answer, no second event.
      expect((await revoke({ sessionId: a.sessionId })).data!.result).toEqual({ status: 'session revoked' });
      const unknown = await revoke({ sessionId: GHOST });
      expect(unknown.response.status).toBe(404);
      expect(unknown.error?.code).toBe('session_not_found');
      const other = await h.target.createToken({ site: 'sessions-revokers', scopes: ['read', 'write', 'verify'] });
      const foreign = await h
        .clientFor(other.token)
        .POST('/api/1/session/revoke', { body: { sessionId: b.sessionId } });
      expect(foreign.response.status).toBe(404);
      expect(withoutRequestId(foreign.error as Problem)).toEqual(withoutRequestId(unknown.error as Problem));
      expect((await check(b.token)).response.status).toBe(200);

      const all = await revoke({ _userId: user.id });
      expect(all.data!.result).toEqual({ revoked: 2, status: 'sessions revoked' });
      for (const s of [b, c]) expect((await check(s.token)).response.status).toBe(422);
      expect((await revoke({ _userId: user.id })).data!.result).toEqual({ revoked: 0, status: 'sessions revoked' });
      expect((await revoke({ _userId: GHOST })).error?.code).toBe('user_not_found');
      const both = await h.raw('/api/1/session/revoke', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ sessionId: a.sessionId, _userId: user.id }),
      });
      expect(both.status).toBe(400);
      expect(await revokedReasons(user.id)).toEqual(['revoked', 'revoked', 'revoked']);
      const created = (await eventsOf(user.id)).filter((e) => e.type === 'session.created');
      expect(created.map((e) => e.data)).toEqual(
        [a, b, c].map((s) => ({
          _userId: user.id,
          sessionId: s.sessionId,
          aal: 1,
          amr: ['pwd'],
          expiresAt: s.expiresAt,
        })),
      );
      const trail = (await h.client.GET('/api/1/audit', { params: { query: { _userId: user.id } } })).data!.result;
      const ops = trail.entries.map((e) => `${e.operation} ${e.outcome}`);
      expect(ops.filter((o) => o.startsWith('session_create'))).toHaveLength(3);
      expect(ops).toContain('session_revoke session revoked');
      expect(ops).toContain('session_revoke sessions revoked');
    });

    it('a password change (update, reset_password), a disable (timed or not) and a delete end every session', async () => {
      const cases: [string, (user: { id: string; email: string }) => Promise<unknown>, string][] = [
        [
          'update with a password',
          (u) => h.client.POST('/api/1/user/update', { body: { _userId: u.id, password: h.password() } }),
          'password_changed',
        ],
        [
          'reset_password redeemed',
          async (u) => {
            const ticket = issuedTicket(
              (await h.client.POST('/api/1/user/ticket', { body: { _userId: u.id, purpose: 'reset_password' } })).data!
                .result,
            );
            const redeemed = await h.client.POST('/api/1/user/ticket/redeem', {
              body: { ticket, purpose: 'reset_password', password: h.password() },
            });
            expect(redeemed.response.status).toBe(200);
          },
          'password_changed',
        ],
        ['disable', (u) => h.client.POST('/api/1/user/disable', { body: { _userId: u.id } }), 'account_disabled'],
        [
          'a timed disable',
          (u) =>
            h.client.POST('/api/1/user/disable', {
              body: { _userId: u.id, until: new Date(Date.now() + 3_600_000).toISOString() },
            }),
          'account_disabled',
        ],
        [
          'delete with a grace period',
          (u) => h.client.DELETE('/api/1/user/delete', { body: { _userId: u.id, graceDays: 7 } }),
          'account_deleted',
        ],
        [
          'delete for good',
          (u) => h.client.DELETE('/api/1/user/delete', { body: { _userId: u.id, graceDays: 0 } }),
          'account_deleted',
        ],
      ];
      for (const [why, end, reason] of cases) {
        const user = await h.createUser();
        const sessions = [await login(user), await login(user)];
        await end(user);
        for (const s of sessions) {
          expect((await check(s.token)).response.status, why).toBe(422);
          expect((await refresh(s.token)).response.status, why).toBe(422);
        }
        expect(await revokedReasons(user.id), why).toEqual([reason, reason]);
        if (why === 'delete with a grace period') {
          // restore brings none back
          expect((await h.client.POST('/api/1/user/restore', { body: { _userId: user.id } })).response.status).toBe(
            200,
          );
          for (const s of sessions) expect((await check(s.token)).response.status, 'restored').toBe(422);
          expect((await list(user.id)).data!.result.sessions).toEqual([]);
        }
      }
      // A change without a password ends none.
      const kept = await h.createUser();
      const live = await login(kept);
      await h.client.POST('/api/1/user/update', { body: { _userId: kept.id, name: 'Renamed' } });
      expect((await check(live.token)).response.status).toBe(200);
    });

    it("a person's data lists their sessions, without a secret", async () => {
      const user = await h.createUser();
      const a = await login(user, { userAgent: 'Laptop' });
      const b = await login(user);
      await revoke({ sessionId: b.sessionId });
      const { data, error } = await userData(user.id);
      expect(error, JSON.stringify(error)).toBeUndefined();
      const held = data!.result.sessions;
      expect(held.map((s) => [s.sessionId, s.revokeReason])).toEqual([
        [b.sessionId, 'revoked'],
        [a.sessionId, null],
      ]);
      expect(held[1]).toMatchObject({ userAgent: 'Laptop', aal: 1, amr: ['pwd'], revokedAt: null });
      const text = JSON.stringify(data);
      for (const s of [a, b]) {
        expect(text).not.toContain(s.token);
        expect(text).not.toContain(sha256(s.token));
      }
    });

    it('no session token anywhere: audit rows, events, export, user data, logs, metrics', async () => {
      const user = await h.createUser();
      const s = await login(user);
      await refresh(s.token);
      await userData(user.id);
      expect(seen.size).toBeGreaterThan(1);
      const secrets = [...seen].flatMap((token) => [token, token.slice(4), sha256(token)]);
      const places: [string, string][] = [
        ['audit rows', JSON.stringify(await h.target.sql('select * from audit_log'))],
        ['events', JSON.stringify(await h.target.sql('select * from events'))],
        ['queued events', JSON.stringify(await h.target.sql('select * from event_queue'))],
        ['idempotency keys', JSON.stringify(await h.target.sql('select * from idempotency_keys'))],
        ['logs', h.target.logs.join('\n')],
      ];
      const exported = await fetch(`${h.target.baseUrl}/api/1/user/export`, {
        headers: { Authorization: exporter.token },
      });
      places.push(['export', await exported.text()]);
      const data = await userData(user.id);
      places.push(['user data', JSON.stringify(data.data)]);
      const metrics = await fetch(`${h.target.baseUrl}/metrics`, { headers: { Authorization: TEST_METRICS_TOKEN } });
      places.push(['metrics', await metrics.text()]);
      for (const [where, text] of places) {
        expect(text.length, where).toBeGreaterThan(0);
        for (const secret of secrets) expect(text.includes(secret), `${where} holds a session secret`).toBe(false);
      }
      // And the search can find what it looks for: the token's hash is in its table.
      const last = await login(user);
      expect(JSON.stringify(await h.target.sql('select token_hash from sessions'))).toContain(sha256(last.token));
    });

    // Review (issue 43, point 3): a stolen token used by the thief, who keeps refreshing, must still
    // be caught when the person's browser comes back with it: "a replaced token presented after
    // [10 s] is theft: the whole session is revoked". Every replaced token is remembered
    // (session_replaced_tokens), not only the previous one.
    it('a token replaced two refreshes ago, presented later, is theft too (the thief kept refreshing)', async () => {
      const user = await h.createUser();
      const stolen = await login(user);
      const b = (await refresh(stolen.token)).data!.result.session; // the thief
      const c = (await refresh(b.token)).data!.result.session; // the thief again, 5 minutes on
      await age(stolen.sessionId);
      const victim = await refresh(stolen.token); // the person's browser, back with its cookie
      expect(victim.response.status, "the victim's replay").toBe(422);
      expect((await check(c.token)).response.status, "the thief's token after the replay").toBe(422);
      expect(await revokedReasons(user.id)).toEqual(['refresh_reuse']);
    });

    // Issue 57, G3: a session remembered its last 1,000 replaced tokens, and a thief refreshed a
    // stolen token 1,001 times within the grace: the person's replay was then a plain miss. Now any
    // replaced token of a live session, however many refreshes back, presented after its grace,
    // ends the session. The 1,000 refreshes are rows here (an hour ago, past the rate bound).
    it('a token replaced any number of refreshes ago, presented after its grace, ends the session', async () => {
      for (const replayed of ['the login token', 'a refreshed token'] as const) {
        const user = await h.createUser();
        const t0 = await login(user);
        const t1 = (await refresh(t0.token)).data!.result.session;
        const t2 = (await refresh(t1.token)).data!.result.session;
        await h.target.sql(
          `insert into session_replaced_tokens (token_hash, session_id, seq, replaced_at)
           select 'filler-' || n || '-' || $1, $1::uuid, n, now() - interval '1 hour' from generate_series(3, 1002) n`,
          [t0.sessionId],
        );
        await h.target.sql(
          `with s as (update sessions set rotated_at = rotated_at - interval '1 hour' where id = $1)
           update session_replaced_tokens set replaced_at = now() - interval '1 hour' where session_id = $1`,
          [t0.sessionId],
        );
        // The thief refreshes on: 1,003 refreshes since the login.
        const t3 = (await refresh(t2.token)).data!.result.session;
        expect((await check(t3.token)).response.status).toBe(200);
        const back = await refresh(replayed === 'the login token' ? t0.token : t1.token);
        expect(back.response.status, replayed).toBe(422);
        expect(withoutRequestId(back.error as Problem)).toEqual(withoutRequestId(invalid));
        expect((await check(t3.token)).response.status, `the thief's token after ${replayed}`).toBe(422);
        expect(await revokedReasons(user.id)).toEqual(['refresh_reuse']);
      }
    });

    // Issue 57, G3: refreshes of one session are bounded in rate (10 rotations a minute): the
    // 11th is 429 rate_limited with Retry-After, the token it named still the session's.
    it("a session's refreshes are bounded: the 11th within a minute is 429 rate_limited, and its token stays good", async () => {
      const user = await h.createUser();
      let current = await login(user);
      let previous = current;
      for (let n = 0; n < 10; n++) {
        const next = await refresh(current.token);
        expect(next.response.status, `refresh ${n + 1}`).toBe(200);
        previous = current;
        current = next.data!.result.session;
      }
      const refused = await refresh(current.token);
      expect(refused.response.status).toBe(429);
      expect((refused.error as Problem).code).toBe('rate_limited');
      const wait = Number(refused.response.headers.get('retry-after'));
      expect(wait).toBeGreaterThan(0);
      expect(wait).toBeLessThanOrEqual(60);
      expect((await check(current.token)).response.status).toBe(200);
      // A second tab within the grace still gets the session's token: a repeat is no rotation.
      const repeat = await refresh(previous.token);
      expect(repeat.response.status).toBe(200);
      expect(repeat.data!.result.session.token).toBe(current.token);
      // A minute on, refreshes go on.
      await h.target.sql(
        `update session_replaced_tokens set replaced_at = replaced_at - interval '61 seconds' where session_id = $1`,
        [current.sessionId],
      );
      expect((await refresh(current.token)).response.status).toBe(200);
      expect(await revokedReasons(user.id)).toEqual([]);
    });

    // Review (issue 43, point 6): a password change ends every session, but a login begun with the
    // old password (verify's 403 ticket, good 5 minutes, whose generation ignores the password)
    // still completes after the change and makes a new session: the change did not end the login.
    it('a second-factor ticket from before a password change makes no session after it', async () => {
      const user = await h.createUser();
      const added = (await h.client.POST('/api/1/user/factor/totp', { body: { _userId: user.id } })).data!.result;
      await h.client.POST('/api/1/user/factor/confirm', {
        body: { _userId: user.id, factorId: added.factorId, code: totpAt(added.secret, nowSeconds()) },
      });
      const first = await h.client.POST('/api/1/user/verify', {
        body: { email: user.email, password: user.password, session: {} },
      });
      const ticket = (first.error as Problem & { ticket: string }).ticket;
      const changed = await h.client.POST('/api/1/user/update', {
        body: { _userId: user.id, password: 'an entirely new passphrase, changed' },
      });
      expect(changed.response.status).toBe(200);
      const late = await h.client.POST('/api/1/user/factor/verify', {
        body: { ticket, code: totpAt(added.secret, nowSeconds() + 30), session: {} },
      });
      keep(late.data?.result.session);
      expect(late.response.status, "factor/verify with the old password's ticket").toBe(422);
      expect(late.error?.code).toBe('invalid_ticket');
    });

    // Review (issue 43, point 1 vs the spec): factor/verify does not look at `disabled`, so a ticket
    // made before a disable completes the login and issueSession answers 403 account_disabled,
    // a code factor/verify's 403 (components/responses/Forbidden: [forbidden]) does not list.
    it('factor/verify after a disable since the first step: 403 account_disabled, no session', async () => {
      const user = await h.createUser();
      const added = (await h.client.POST('/api/1/user/factor/totp', { body: { _userId: user.id } })).data!.result;
      await h.client.POST('/api/1/user/factor/confirm', {
        body: { _userId: user.id, factorId: added.factorId, code: totpAt(added.secret, nowSeconds()) },
      });
      const first = await h.client.POST('/api/1/user/verify', {
        body: { email: user.email, password: user.password, session: {} },
      });
      const ticket = (first.error as Problem & { ticket: string }).ticket;
      expect((await h.client.POST('/api/1/user/disable', { body: { _userId: user.id } })).response.status).toBe(200);
      const late = await h.client.POST('/api/1/user/factor/verify', {
        body: { ticket, code: totpAt(added.secret, nowSeconds() + 30), session: {} },
      });
      keep(late.data?.result.session);
      // Refused as verify refuses a disabled account, with the code factor/verify's spec lists.
      expect(late.response.status).toBe(403);
      expect(late.error?.code).toBe('account_disabled');
      expect(late.data).toBeUndefined();
    });

    // Review (issue 43, point 4): an access token outlives its session's absolute expiry.
    it('an access token never outlives its session (lifetime 60 s, access token 300 s)', async () => {
      const user = await h.createUser();
      const session = await login(user, { lifetime: 60 });
      expect(Date.parse(session.accessTokenExpiresAt)).toBeLessThanOrEqual(Date.parse(session.expiresAt));
      const exp = JSON.parse(Buffer.from(session.accessToken.split('.')[1]!, 'base64url').toString()).exp as number;
      expect(exp * 1000).toBeLessThanOrEqual(Date.parse(session.expiresAt));
    });
  });
}

defineSessionsSuite(pgliteTarget);
defineSessionsSuite(await postgresTarget());

// Three servers on one PostgreSQL, as a deployment runs them: a revoke on one is refused by
// session/verify and session/refresh on the other two within a second (no server keeps a copy).
const sharedSkip = await postgresUnavailable();
describe.skipIf(sharedSkip !== undefined)('three servers sharing one PostgreSQL', () => {
  const servers: Target[] = [];
  let drop: (() => Promise<void>) | undefined;
  beforeAll(async () => {
    const database = await migratedPostgresDatabase();
    drop = database.drop;
    for (let i = 0; i < 3; i++)
      servers.push(
        await serverTarget({ DATABASE_URL: database.url }, async () => {}, {
          env: { FACTOR_ENCRYPTION_KEY: TEST_FACTOR_KEY },
        }),
      );
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    await drop?.();
  });

  it('a session revoked on one is refused by session/verify and session/refresh on the others within 1 s', async () => {
    const [a, b, c] = servers.map((s) => checkedClient(s.baseUrl, s.token));
    const email = `shared.${Date.now()}@example.com`;
    const password = 'a long and unusual passphrase';
    const userId = (await a!.POST('/api/1/user/create', { body: { email, password, name: 'Shared' } })).data!.result
      ._userId;
    const sessions = [];
    for (const via of [a!, b!, c!]) {
      const made = await via.POST('/api/1/user/verify', { body: { email, password, session: {} } });
      sessions.push(made.data!.result.session!);
    }
    // Each server checks each session (and would have cached it, if any did).
    for (const s of sessions)
      for (const via of [a!, b!, c!])
        expect((await via.POST('/api/1/session/verify', { body: { token: s.token } })).response.status).toBe(200);
    const [one, two, three] = sessions as [Issued, Issued, Issued];
    const revoked = await a!.POST('/api/1/session/revoke', { body: { sessionId: one.sessionId } });
    expect(revoked.response.status).toBe(200);
    const at = Date.now();
    const refused = await Promise.all([
      b!.POST('/api/1/session/verify', { body: { token: one.token } }),
      c!.POST('/api/1/session/verify', { body: { token: one.token } }),
      b!.POST('/api/1/session/refresh', { body: { token: one.token } }),
      c!.POST('/api/1/session/refresh', { body: { token: one.token } }),
    ]);
    expect(Date.now() - at).toBeLessThan(1_000);
    expect(refused.map((r) => r.error?.code)).toEqual(Array(4).fill('invalid_session'));
    // Every session of the account, revoked on the third server: refused on the first two.
    const all = await c!.POST('/api/1/session/revoke', { body: { _userId: userId } });
    expect(all.data!.result).toEqual({ revoked: 2, status: 'sessions revoked' });
    const then = Date.now();
    const gone = await Promise.all(
      [two, three].flatMap((s) => [
        a!.POST('/api/1/session/verify', { body: { token: s.token } }),
        b!.POST('/api/1/session/refresh', { body: { token: s.token } }),
      ]),
    );
    expect(Date.now() - then).toBeLessThan(1_000);
    expect(gone.map((r) => r.response.status)).toEqual([422, 422, 422, 422]);
  });
});

// Issue 43, point 3, mid-rotation of FACTOR_ENCRYPTION_KEY (a new key put first, servers
// restarted one by one): a server with the old key alone and one with the new key first, sharing
// one PostgreSQL (the access-token signing key made on the first, so both open it). Two tabs
// refreshing one token on the two, in either order, both get the one successor: a server derives
// it under every key it holds, and reads one made under a key it lacks from the replaced token's
// masks.
describe.skipIf(sharedSkip !== undefined)('two servers mid-rotation of FACTOR_ENCRYPTION_KEY, either order', () => {
  const servers: Target[] = [];
  let drop: (() => Promise<void>) | undefined;
  let sql: Target['sql'];
  const NEW_KEY = `next:${Buffer.alloc(32, 3).toString('base64')}`;
  const email = `either.${Date.now()}@example.com`;
  const password = 'a long and unusual passphrase';
  beforeAll(async () => {
    const database = await migratedPostgresDatabase();
    drop = database.drop;
    for (const key of [TEST_FACTOR_KEY, `${NEW_KEY},${TEST_FACTOR_KEY}`])
      servers.push(
        await serverTarget({ DATABASE_URL: database.url }, async () => {}, { env: { FACTOR_ENCRYPTION_KEY: key } }),
      );
    sql = servers[0]!.sql.bind(servers[0]);
    const old = checkedClient(servers[0]!.baseUrl, servers[0]!.token);
    await old.POST('/api/1/user/create', { body: { email, password, name: 'Either' } });
    // The first session, on the old-key server: the signing key is sealed with the old key.
    await old.POST('/api/1/user/verify', { body: { email, password, session: {} } });
  }, 60_000);
  afterAll(async () => {
    await Promise.all(servers.map((s) => s.close()));
    await drop?.();
  });

  for (const [first, second] of [
    [1, 0],
    [0, 1],
  ] as const)
    it(`refreshed on the ${first === 1 ? 'new-key' : 'old-key'} server first, then on the other: one successor`, async () => {
      const [one, two] = [first, second].map((i) => checkedClient(servers[i]!.baseUrl, servers[i]!.token));
      const made = (await one!.POST('/api/1/user/verify', { body: { email, password, session: {} } })).data!.result
        .session!;
      const a = await one!.POST('/api/1/session/refresh', { body: { token: made.token } });
      expect(a.response.status).toBe(200);
      const b = await two!.POST('/api/1/session/refresh', { body: { token: made.token } });
      expect(b.response.status, JSON.stringify(b.error)).toBe(200);
      expect(b.data!.result.session.token).toBe(a.data!.result.session.token);
      for (const via of [one!, two!])
        expect(
          (await via.POST('/api/1/session/verify', { body: { token: a.data!.result.session.token } })).response.status,
        ).toBe(200);
      // The masks serve the grace window only: the session's next refresh clears them.
      const masks = () =>
        sql(
          'select seq, successor_masks is not null as masked from session_replaced_tokens where session_id = $1 order by seq',
          [made.sessionId],
        );
      expect(await masks()).toEqual([{ seq: 1, masked: true }]);
      expect(
        (await two!.POST('/api/1/session/refresh', { body: { token: a.data!.result.session.token } })).response.status,
      ).toBe(200);
      expect(await masks()).toEqual([
        { seq: 1, masked: false },
        { seq: 2, masked: true },
      ]);
    });
});
