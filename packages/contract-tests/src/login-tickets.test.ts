// Login links and codes (issue 44, point 6) through the client, on PGlite and PostgreSQL: a link
// and a code end to end with a session (then session/verify), a code burned after 5 wrong tries,
// the expiry bounds, the email marked verified, the second factor never skipped, another site's
// token refused, the verify scope (login only), nothing secret anywhere; and the scanner-safe
// pattern of docs/login.md: 100 GETs and HEADs of the site's page consume nothing, its POST signs in.
import { createHash } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Problem, UserAccountsClient } from '@user-accounts/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nowSeconds, totpAt } from './factors-suite.ts';
import { GHOST, issuedTicket, useTarget, withoutRequestId } from './harness.ts';
import { pgliteTarget, postgresTarget, type TargetSpec, TEST_METRICS_TOKEN } from './targets.ts';

const LINK = /^[A-Za-z0-9_-]{43}$/;
const CODE = /^\d{6}$/;
const MINUTE = 60_000;
const sha256 = (text: string) => createHash('sha256').update(text).digest('base64url');

type IssueBody = {
  purpose: 'login' | 'verify_email' | 'reset_password';
  email?: string;
  _userId?: string;
  delivery?: 'link' | 'code';
  expiresIn?: number;
};
type RedeemBody = {
  ticket: string;
  purpose: 'login' | 'verify_email' | 'reset_password';
  _userId?: string;
  password?: string;
  session?: { userAgent?: string; lifetime?: number };
};

function defineLoginTicketsSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) {
    describe.skip(`${spec.name}: login links and codes (${spec.skip ?? 'stateless'})`, () => {
      it('skipped', () => {});
    });
    return;
  }

  describe(`${spec.name}: login links and codes`, () => {
    const h = useTarget(spec);
    /** Every ticket, code and session token an answer gave: none may be found anywhere else. */
    const issued: string[] = [];
    const sessionTokens: string[] = [];
    /** A token with the verify scope alone: what a site's login page needs. */
    let login: UserAccountsClient;
    let exporterToken: string;
    let invalid: Problem;

    const issue = async (client: UserAccountsClient, body: IssueBody) => {
      const answer = await client.POST('/api/1/user/ticket', { body: body as never });
      if (answer.data !== undefined) issued.push(issuedTicket(answer.data.result));
      return answer;
    };
    const ticketOf = async (body: IssueBody, client = login) => {
      const { data, error, response } = await issue(client, body);
      expect(error, JSON.stringify(error)).toBeUndefined();
      expect(response.status).toBe(201);
      return issuedTicket(data!.result);
    };
    const redeem = async (body: RedeemBody, client = login, headers: Record<string, string> = {}) => {
      const answer = await client.POST('/api/1/user/ticket/redeem', { body: body as never, headers });
      const session = answer.data?.result.session;
      if (session !== undefined) sessionTokens.push(session.token);
      return answer;
    };
    const checkSession = (token: string) => login.POST('/api/1/session/verify', { body: { token } });
    const verifiedAt = async (id: string) => (await h.rowOf(id))!.email_verified_at;
    const eventsOf = async (userId: string) =>
      (await h.client.GET('/api/1/events', { params: { query: { subject: userId, limit: 1000 } } })).data!.result
        .events;

    beforeAll(async () => {
      login = h.clientFor((await h.target.createToken({ scopes: ['verify'], label: 'login page' })).token);
      exporterToken = (await h.target.createToken({ scopes: ['read', 'export'], label: 'login export' })).token;
      const { error } = await redeem({ ticket: 'A'.repeat(43), purpose: 'login' });
      invalid = error as Problem;
      expect(invalid.code).toBe('invalid_ticket');
    });

    it('a link: 43 characters for 15 minutes, redeemed once by the verify scope with a session that session/verify accepts', async () => {
      const user = await h.createUser();
      expect(await verifiedAt(user.id)).toBeNull();
      const before = Date.now();
      const { data } = await issue(login, { email: user.email.toUpperCase(), purpose: 'login' });
      expect(data!.result).toMatchObject({ _userId: user.id, purpose: 'login', status: 'ticket issued' });
      const { expiresAt } = data!.result;
      const ticket = issuedTicket(data!.result);
      expect(ticket).toMatch(LINK);
      expect(Date.parse(expiresAt) - before).toBeGreaterThan(15 * MINUTE - 5_000);
      expect(Date.parse(expiresAt) - before).toBeLessThan(15 * MINUTE + 5_000);
      // Stored only as its SHA-256, as every ticket.
      const [row] = await h.target.sql('select * from tickets where user_id = $1', [user.id]);
      expect(row).toMatchObject({ purpose: 'login', secret_hash: sha256(ticket) });

      const { data: redeemed, response } = await redeem(
        { ticket, purpose: 'login', session: { userAgent: 'Firefox/133.0' } },
        login,
        { 'X-End-User-IP': '203.0.113.9' },
      );
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toBe('no-store');
      expect(redeemed!.result).toMatchObject({ _userId: user.id, status: 'login verified' });
      const session = redeemed!.result.session!;
      const checked = await checkSession(session.token);
      expect(checked.data!.result).toMatchObject({
        sessionId: session.sessionId,
        _userId: user.id,
        aal: 1,
        amr: ['otp'],
        status: 'session valid',
      });
      const [made] = await h.target.sql('select user_agent, ip from sessions where id = $1', [session.sessionId]);
      expect(made).toEqual({ user_agent: 'Firefox/133.0', ip: '203.0.113.9' });
      // The person proved the inbox: the email is verified, a change (user.updated) with its ETag.
      expect(await verifiedAt(user.id)).not.toBeNull();
      const got = await h.client.GET('/api/1/user/get', { params: { query: { _userId: user.id } } });
      expect(got.data!.result).toMatchObject({ emailVerified: true });
      expect(got.response.headers.get('etag')).toBe(response.headers.get('etag'));
      const events = await eventsOf(user.id);
      expect(events.filter((e) => e.type === 'user.updated').map((e) => e.changedfields)).toEqual(['emailVerified']);
      expect(events.some((e) => e.type === 'session.created')).toBe(true);
      // Single use: the second redeem is the one miss.
      const again = await redeem({ ticket, purpose: 'login' });
      expect(again.response.status).toBe(422);
      expect(withoutRequestId(again.error as Problem)).toEqual(withoutRequestId(invalid));
    });

    it('of 10 redeems of one link at once, exactly one signs in and makes a session', async () => {
      const user = await h.createUser();
      const ticket = await ticketOf({ _userId: user.id, purpose: 'login' });
      const answers = await Promise.all(
        Array.from({ length: 10 }, () => redeem({ ticket, purpose: 'login', session: {} })),
      );
      expect(answers.map((a) => a.response.status).sort()).toEqual([200, ...Array(9).fill(422)]);
      expect(await h.target.sql('select 1 from sessions where user_id = $1', [user.id])).toHaveLength(1);
    });

    it('a link without `session` signs in without one; a verified email stays as it was (no event)', async () => {
      const user = await h.createUser();
      await redeem({ ticket: await ticketOf({ _userId: user.id, purpose: 'login' }), purpose: 'login' });
      const at = await verifiedAt(user.id);
      const second = await redeem({ ticket: await ticketOf({ _userId: user.id, purpose: 'login' }), purpose: 'login' });
      expect(second.data!.result).toEqual({ _userId: user.id, status: 'login verified' });
      expect(await verifiedAt(user.id)).toEqual(at);
      expect((await eventsOf(user.id)).filter((e) => e.type === 'user.updated')).toHaveLength(1);
      expect(await h.target.sql('select 1 from sessions where user_id = $1', [user.id])).toEqual([]);
    });

    it('a code: 6 digits for 10 minutes, redeemed with its _userId and a session; a new code ends the earlier one', async () => {
      const user = await h.createUser();
      const other = await h.createUser();
      const before = Date.now();
      const { data } = await issue(login, { _userId: user.id, purpose: 'login', delivery: 'code' });
      const first = issuedTicket(data!.result);
      expect(first).toMatch(CODE);
      expect(Date.parse(data!.result.expiresAt) - before).toBeGreaterThan(10 * MINUTE - 5_000);
      expect(Date.parse(data!.result.expiresAt) - before).toBeLessThan(10 * MINUTE + 5_000);
      // Stored as an HMAC under the deployment's key (`<key id>.<mac>`), never a plain hash.
      const [row] = await h.target.sql('select purpose, secret_hash from tickets where user_id = $1', [user.id]);
      expect(row!.purpose).toBe('login_code');
      expect(String(row!.secret_hash)).toMatch(/^[^.]+\.[A-Za-z0-9_-]{43}$/);
      expect(String(row!.secret_hash)).not.toContain(first);

      const code = await ticketOf({ email: user.email, purpose: 'login', delivery: 'code' });
      if (code !== first)
        expect((await redeem({ ticket: first, purpose: 'login', _userId: user.id })).response.status).toBe(422);
      // Without its account, or with another's, a code is a miss (and the other's try is its own).
      for (const named of [undefined, other.id, GHOST]) {
        const miss = await redeem({ ticket: code, purpose: 'login', ...(named && { _userId: named }) });
        expect(miss.response.status).toBe(422);
        expect(withoutRequestId(miss.error as Problem)).toEqual(withoutRequestId(invalid));
      }
      const { data: redeemed } = await redeem({ ticket: code, purpose: 'login', _userId: user.id, session: {} });
      expect(redeemed!.result).toMatchObject({ _userId: user.id, status: 'login verified' });
      expect((await checkSession(redeemed!.result.session!.token)).data!.result).toMatchObject({
        _userId: user.id,
        amr: ['otp'],
      });
      expect(await verifiedAt(user.id)).not.toBeNull();
      expect((await redeem({ ticket: code, purpose: 'login', _userId: user.id })).response.status).toBe(422);
    });

    it('a code is burned after 5 wrong tries: the sixth, with the right code, is the one 422', async () => {
      const user = await h.createUser();
      const code = await ticketOf({ _userId: user.id, purpose: 'login', delivery: 'code' });
      const wrong = (n: number) => String((Number(code) + 1 + n) % 1_000_000).padStart(6, '0');
      for (let n = 0; n < 5; n++) {
        const miss = await redeem({ ticket: wrong(n), purpose: 'login', _userId: user.id });
        expect(withoutRequestId(miss.error as Problem)).toEqual(withoutRequestId(invalid));
      }
      const late = await redeem({ ticket: code, purpose: 'login', _userId: user.id, session: {} });
      expect(late.response.status).toBe(422);
      expect(withoutRequestId(late.error as Problem)).toEqual(withoutRequestId(invalid));
      expect(await h.target.sql('select 1 from tickets where user_id = $1', [user.id])).toEqual([]);
      expect(await verifiedAt(user.id)).toBeNull();
      // Four wrong tries leave the fifth to the right code.
      const next = await ticketOf({ _userId: user.id, purpose: 'login', delivery: 'code' });
      const wrongNext = (n: number) => String((Number(next) + 1 + n) % 1_000_000).padStart(6, '0');
      for (let n = 0; n < 4; n++) await redeem({ ticket: wrongNext(n), purpose: 'login', _userId: user.id });
      expect((await redeem({ ticket: next, purpose: 'login', _userId: user.id })).response.status).toBe(200);
    });

    it('bounds the expiry: a link at most 1 hour, a code at most 10 minutes; delivery and session go with login only', async () => {
      const user = await h.createUser();
      const bad = async (body: IssueBody, pointer: string) => {
        const { error, response } = await issue(login, body);
        expect(response.status).toBe(400);
        expect((error as Problem).errors?.map((e) => e.pointer)).toContain(pointer);
      };
      const hour = await issue(login, { _userId: user.id, purpose: 'login', expiresIn: 3600 });
      expect(Date.parse(hour.data!.result.expiresAt) - Date.now()).toBeGreaterThan(59 * MINUTE);
      await bad({ _userId: user.id, purpose: 'login', expiresIn: 3601 }, '/expiresIn');
      const short = await issue(login, { _userId: user.id, purpose: 'login', delivery: 'code', expiresIn: 60 });
      expect(Date.parse(short.data!.result.expiresAt) - Date.now()).toBeLessThan(MINUTE + 5_000);
      expect(
        (await issue(login, { _userId: user.id, purpose: 'login', delivery: 'code', expiresIn: 600 })).response.status,
      ).toBe(201);
      await bad({ _userId: user.id, purpose: 'login', delivery: 'code', expiresIn: 601 }, '/expiresIn');
      const misplaced = await issue(h.client, { _userId: user.id, purpose: 'verify_email', delivery: 'link' });
      expect(misplaced.response.status).toBe(400);
      expect((misplaced.error as Problem).errors?.map((e) => e.pointer)).toEqual(['/delivery']);
      const verifyEmail = await ticketOf({ _userId: user.id, purpose: 'verify_email' }, h.client);
      const sessionElsewhere = await redeem({ ticket: verifyEmail, purpose: 'verify_email', session: {} }, h.client);
      expect(sessionElsewhere.response.status).toBe(400);
      expect((sessionElsewhere.error as Problem).errors?.map((e) => e.pointer)).toEqual(['/session']);
      // Expired: the one miss.
      const link = await ticketOf({ _userId: user.id, purpose: 'login' });
      await h.target.sql(
        `update tickets set expires_at = now() - interval '1 second' where user_id = $1 and purpose = 'login'`,
        [user.id],
      );
      const expired = await redeem({ ticket: link, purpose: 'login' });
      expect(withoutRequestId(expired.error as Problem)).toEqual(withoutRequestId(invalid));
    });

    it('every other miss is the same 422: another purpose either way, a link named with another _userId, a malformed id', async () => {
      const user = await h.createUser();
      const other = await h.createUser();
      const link = await ticketOf({ _userId: user.id, purpose: 'login' });
      const verifyEmail = await ticketOf({ _userId: user.id, purpose: 'verify_email' }, h.client);
      const misses = [
        await redeem({ ticket: link, purpose: 'verify_email' }, h.client),
        await redeem({ ticket: verifyEmail, purpose: 'login' }),
        await redeem({ ticket: link, purpose: 'login', _userId: other.id }),
        await redeem({ ticket: link, purpose: 'login', _userId: 'not-an-id' }),
      ];
      for (const miss of misses) expect(withoutRequestId(miss.error as Problem)).toEqual(withoutRequestId(invalid));
      // None of them spent it.
      expect((await redeem({ ticket: link, purpose: 'login', _userId: user.id })).response.status).toBe(200);
    });

    it("another site's token: its issue is 404 as for no account, its redeem the one 422, and the ticket stays", async () => {
      const user = await h.createUser();
      const elsewhere = h.clientFor(
        (await h.target.createToken({ site: 'login-elsewhere', scopes: ['read', 'write', 'verify'], label: 'other' }))
          .token,
      );
      const link = await ticketOf({ _userId: user.id, purpose: 'login' });
      const code = await ticketOf({ _userId: user.id, purpose: 'login', delivery: 'code' });
      for (const body of [
        { email: user.email, purpose: 'login' },
        { _userId: user.id, purpose: 'login', delivery: 'code' },
      ] as IssueBody[]) {
        const refused = await issue(elsewhere, body);
        expect(refused.response.status).toBe(404);
        expect((refused.error as Problem).code).toBe('user_not_found');
      }
      for (const body of [
        { ticket: link, purpose: 'login' },
        { ticket: code, purpose: 'login', _userId: user.id, session: {} },
      ] as RedeemBody[]) {
        const refused = await redeem(body, elsewhere);
        expect(withoutRequestId(refused.error as Problem)).toEqual(withoutRequestId(invalid));
      }
      expect(await h.target.sql('select 1 from sessions where user_id = $1', [user.id])).toEqual([]);
      expect((await redeem({ ticket: link, purpose: 'login' })).response.status).toBe(200);
      expect((await redeem({ ticket: code, purpose: 'login', _userId: user.id })).response.status).toBe(200);
    });

    // Issue 57, G4: a code burned after 5 wrong tries, but a new code gave 5 more, without end
    // (1,000 wrong guesses on one account in 6 s, no 429). Wrong codes now count per account, across
    // codes and with phone codes, toward the lock TOTP codes count toward.
    it('wrong login and phone codes count per account across codes: past 10, 429 too_many_attempts, even for the right code or a new one', async () => {
      const user = await h.createUser({ phone: '+44 20 7946 0031' });
      const wrongOf = (code: string) => (code === '000000' ? '000001' : '000000');
      const first = await ticketOf({ _userId: user.id, purpose: 'login', delivery: 'code' });
      for (let n = 0; n < 5; n++)
        expect((await redeem({ ticket: wrongOf(first), purpose: 'login', _userId: user.id })).response.status).toBe(
          422,
        );
      const phone = issuedTicket(
        (await issue(h.client, { _userId: user.id, purpose: 'verify_phone' as never })).data!.result,
      );
      const redeemPhone = (ticket: string) =>
        h.client.POST('/api/1/user/ticket/redeem', {
          body: { ticket, purpose: 'verify_phone', _userId: user.id } as never,
        });
      for (let n = 0; n < 4; n++) expect((await redeemPhone(wrongOf(phone))).response.status).toBe(422);
      // A new login code, then the tenth wrong code (the phone's fifth): the account is locked.
      const second = await ticketOf({ _userId: user.id, purpose: 'login', delivery: 'code' });
      expect((await redeemPhone(wrongOf(phone))).response.status).toBe(422);
      const locked = async (answer: Promise<{ response: Response; error?: unknown }>) => {
        const { response, error } = await answer;
        expect(response.status, JSON.stringify(error)).toBe(429);
        expect((error as Problem).code).toBe('too_many_attempts');
        const wait = Number(response.headers.get('retry-after'));
        expect(wait).toBeGreaterThan(0);
        expect(wait).toBeLessThanOrEqual(60);
      };
      // The right code, while locked: refused before it is looked at, and not used.
      await locked(redeem({ ticket: second, purpose: 'login', _userId: user.id, session: {} }));
      expect(await h.target.sql('select 1 from sessions where user_id = $1', [user.id])).toEqual([]);
      // No new code while locked, of either kind; a link (256 bits, no guessing) is still issued.
      await locked(issue(login, { _userId: user.id, purpose: 'login', delivery: 'code' }));
      await locked(issue(login, { email: user.email, purpose: 'login', delivery: 'code' }));
      await locked(issue(h.client, { _userId: user.id, purpose: 'verify_phone' as never }));
      expect((await issue(login, { _userId: user.id, purpose: 'login' })).response.status).toBe(201);
      // Another account is not locked by this one's guesses.
      const other = await h.createUser();
      const its = await ticketOf({ _userId: other.id, purpose: 'login', delivery: 'code' });
      expect((await redeem({ ticket: its, purpose: 'login', _userId: other.id })).response.status).toBe(200);
      // Once the lock has ended, the right code signs in (and the count starts again).
      await h.target.sql('update verify_failures set locked_until = now() - interval $$1 second$$', []);
      expect((await redeem({ ticket: second, purpose: 'login', _userId: user.id })).response.status).toBe(200);
    });

    it('a disabled account: 403 account_disabled, as verify, and the ticket stays for after an enable', async () => {
      const user = await h.createUser();
      const link = await ticketOf({ _userId: user.id, purpose: 'login' });
      await h.client.POST('/api/1/user/disable', { body: { _userId: user.id } });
      const refused = await redeem({ ticket: link, purpose: 'login', session: {} });
      expect(refused.response.status).toBe(403);
      expect((refused.error as Problem).code).toBe('account_disabled');
      expect(await h.target.sql('select 1 from sessions where user_id = $1', [user.id])).toEqual([]);
      expect(await verifiedAt(user.id)).toBeNull();
      await h.client.POST('/api/1/user/enable', { body: { _userId: user.id } });
      expect((await redeem({ ticket: link, purpose: 'login' })).response.status).toBe(200);
    });

    it('an account with a second factor: the ticket is used, 403 second_factor_required as verify; factor/verify makes the session at aal 2', async () => {
      const user = await h.createUser();
      const added = (await h.client.POST('/api/1/user/factor/totp', { body: { _userId: user.id } })).data!.result;
      const confirmed = await h.client.POST('/api/1/user/factor/confirm', {
        body: { _userId: user.id, factorId: added.factorId, code: totpAt(added.secret, nowSeconds()) },
      });
      const recovery = confirmed.data!.result.recoveryCodes!;
      const link = await ticketOf({ _userId: user.id, purpose: 'login' });
      const first = await redeem({ ticket: link, purpose: 'login', session: {} });
      expect(first.response.status).toBe(403);
      const problem = first.error as Problem & { ticket: string; factors: string[] };
      expect(problem).toMatchObject({ code: 'second_factor_required', factors: ['totp'] });
      expect(await h.target.sql('select 1 from sessions where user_id = $1', [user.id])).toEqual([]);
      expect(await verifiedAt(user.id)).not.toBeNull();
      expect((await redeem({ ticket: link, purpose: 'login' })).response.status).toBe(422);
      // The second step, with the verify scope too: the next TOTP step, so that none is replayed.
      const second = await login.POST('/api/1/user/factor/verify', {
        body: { ticket: problem.ticket, code: totpAt(added.secret, nowSeconds() + 30), session: {} },
      });
      expect(second.response.status).toBe(200);
      const session = second.data!.result.session!;
      sessionTokens.push(session.token);
      expect((await checkSession(session.token)).data!.result).toMatchObject({
        _userId: user.id,
        aal: 2,
        amr: ['otp', 'mfa'],
      });
      // A code's login too, then a recovery code.
      const code = await ticketOf({ _userId: user.id, purpose: 'login', delivery: 'code' });
      const byCode = await redeem({ ticket: code, purpose: 'login', _userId: user.id });
      expect((byCode.error as Problem).code).toBe('second_factor_required');
      const done = await login.POST('/api/1/user/factor/verify', {
        body: { ticket: (byCode.error as Problem & { ticket: string }).ticket, recoveryCode: recovery[0]! },
      });
      expect(done.data!.result).toEqual({ _userId: user.id, status: 'second factor verified' });
    });

    it('scopes: the verify scope issues and redeems login tickets only; read alone neither', async () => {
      const user = await h.createUser();
      const forbidden = (answer: { response: Response; error?: unknown }) => {
        expect(answer.response.status).toBe(403);
        expect((answer.error as Problem).code).toBe('forbidden');
      };
      forbidden(await issue(login, { _userId: user.id, purpose: 'verify_email' }));
      forbidden(await issue(login, { _userId: user.id, purpose: 'reset_password' }));
      const reset = await ticketOf({ _userId: user.id, purpose: 'reset_password' }, h.client);
      forbidden(await redeem({ ticket: reset, purpose: 'reset_password', password: 'a new and unusual passphrase' }));
      // Refused before it was looked at: the write scope still redeems it.
      expect(
        (await redeem({ ticket: reset, purpose: 'reset_password', password: 'a new and unusual passphrase' }, h.client))
          .response.status,
      ).toBe(200);
      const reader = h.clientFor((await h.target.createToken({ scopes: ['read'], label: 'reader' })).token);
      forbidden(await issue(reader, { _userId: user.id, purpose: 'login' }));
      const link = await ticketOf({ _userId: user.id, purpose: 'login' });
      forbidden(await redeem({ ticket: link, purpose: 'login' }, reader));
      // The write scope does login tickets too.
      expect((await redeem({ ticket: link, purpose: 'login' }, h.client)).response.status).toBe(200);
    });

    it('no ticket, code or session token in audit rows, events, logs, export or metrics', async () => {
      const user = await h.createUser();
      await redeem({ ticket: await ticketOf({ _userId: user.id, purpose: 'login' }), purpose: 'login', session: {} });
      const code = await ticketOf({ _userId: user.id, purpose: 'login', delivery: 'code' });
      await redeem({ ticket: code, purpose: 'login', _userId: user.id, session: {} });
      // Held, unused: the person's data lists them (a code as purpose login), without their secrets.
      await ticketOf({ _userId: user.id, purpose: 'login' });
      await ticketOf({ _userId: user.id, purpose: 'login', delivery: 'code' });
      const data = await h
        .clientFor(exporterToken)
        .GET('/api/1/user/data', { params: { query: { _userId: user.id } } });
      expect(data.data!.result.tickets.map((t) => t.purpose)).toEqual(['login', 'login']);
      expect(issued.filter((t) => CODE.test(t)).length).toBeGreaterThanOrEqual(2);
      expect(sessionTokens.length).toBeGreaterThanOrEqual(2);
      const places: Record<string, string> = {
        audit: JSON.stringify(await h.target.sql('select * from audit_log')),
        events: JSON.stringify(await h.target.sql('select * from events')),
        queued: JSON.stringify(await h.target.sql('select * from event_queue')),
        logs: h.target.logs.join('\n'),
        exported: await (
          await fetch(`${h.target.baseUrl}/api/1/user/export`, { headers: { Authorization: exporterToken } })
        ).text(),
        'user data': JSON.stringify(data.data),
        metrics: await (
          await fetch(`${h.target.baseUrl}/metrics`, { headers: { Authorization: `Bearer ${TEST_METRICS_TOKEN}` } })
        ).text(),
      };
      expect(places.metrics).toMatch(/^# HELP /m);
      expect(places.audit).toContain('login verified');
      for (const secret of [...issued, ...sessionTokens]) {
        // A code is six digits, which a time or a count can hold by chance: looked for as a JSON
        // string or a label's value, as it would be written if it leaked.
        const needle = CODE.test(secret) ? `"${secret}"` : secret;
        for (const [where, text] of Object.entries(places))
          expect(text.includes(needle), `a secret in ${where}`).toBe(false);
      }
    });
  });
}

defineLoginTicketsSuite(pgliteTarget);
defineLoginTicketsSuite(await postgresTarget());

/**
 * The site of docs/login.md's scanner-safe pattern: the emailed link opens its page, whose GET
 * (or HEAD) only shows a button; the button's POST redeems through the client. A mail scanner
 * that opens the link, however often, spends nothing.
 */
function startSite(api: UserAccountsClient): Promise<{ url: string; server: Server }> {
  const escapeHtml = (text: string) => text.replace(/[&<>"']/g, (ch) => `&#${ch.charCodeAt(0)};`);
  const server = createServer(async (req, res) => {
    const url = new URL(req.url ?? '/', 'http://site.invalid');
    if (url.pathname !== '/login/link') {
      res.writeHead(404).end();
      return;
    }
    if (req.method === 'GET' || req.method === 'HEAD') {
      // Opening the link changes nothing: the page holds the ticket in a form, for the person's click.
      const ticket = url.searchParams.get('ticket') ?? '';
      const page = `<!doctype html><meta charset="utf-8"><title>Sign in</title>
<form method="post" action="/login/link"><input type="hidden" name="ticket" value="${escapeHtml(ticket)}">
<button>Sign in to Example</button></form>`;
      res.writeHead(200, {
        'Content-Type': 'text/html; charset=utf-8',
        'Cache-Control': 'no-store',
        'Referrer-Policy': 'no-referrer',
      });
      res.end(req.method === 'HEAD' ? undefined : page);
      return;
    }
    if (req.method !== 'POST') {
      res.writeHead(405, { Allow: 'GET, HEAD, POST' }).end();
      return;
    }
    let form = '';
    for await (const chunk of req) form += chunk;
    const ticket = new URLSearchParams(form).get('ticket') ?? '';
    const { data } = await api.POST('/api/1/user/ticket/redeem', {
      body: { ticket, purpose: 'login', session: { userAgent: req.headers['user-agent'] ?? '' } },
    });
    if (data?.result.session === undefined) {
      res.writeHead(400, { 'Content-Type': 'text/plain' }).end('This link cannot be used; ask for a new one.');
      return;
    }
    res.writeHead(303, {
      Location: '/',
      'Set-Cookie': `session=${data.result.session.token}; Path=/; HttpOnly; Secure; SameSite=Lax`,
    });
    res.end();
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () =>
      resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, server }),
    ),
  );
}

describe('the scanner-safe login link (docs/login.md)', () => {
  const h = useTarget(pgliteTarget);
  let site: { url: string; server: Server };
  let siteApi: UserAccountsClient;
  beforeAll(async () => {
    siteApi = h.clientFor((await h.target.createToken({ scopes: ['verify'], label: 'the site' })).token);
    site = await startSite(siteApi);
  });
  afterAll(async () => {
    await new Promise((resolve) => site?.server.close(resolve));
  });

  it("100 GETs and HEADs of the site's page consume nothing; the button's POST signs in once", async () => {
    const user = await h.createUser();
    const { data } = await siteApi.POST('/api/1/user/ticket', { body: { email: user.email, purpose: 'login' } });
    const ticket = issuedTicket(data!.result);
    const link = `${site.url}/login/link?ticket=${encodeURIComponent(ticket)}`;
    for (let i = 0; i < 100; i++) {
      const opened = await fetch(link, { method: i % 2 === 0 ? 'GET' : 'HEAD', redirect: 'manual' });
      expect(opened.status).toBe(200);
      const page = await opened.text();
      if (i % 2 === 0) expect(page).toContain('<button>Sign in to Example</button>');
    }
    // Nothing consumed: the ticket is there, the email unverified, no session, no redeem audited.
    expect(await h.target.sql('select purpose from tickets where user_id = $1', [user.id])).toEqual([
      { purpose: 'login' },
    ]);
    expect((await h.rowOf(user.id))!.email_verified_at).toBeNull();
    expect(await h.target.sql('select 1 from sessions where user_id = $1', [user.id])).toEqual([]);
    expect(
      await h.target.sql("select 1 from audit_log where operation = 'redeem' and user_id = $1", [user.id]),
    ).toEqual([]);

    const pressed = await fetch(`${site.url}/login/link`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded', 'User-Agent': 'Firefox/133.0' },
      body: new URLSearchParams({ ticket }).toString(),
      redirect: 'manual',
    });
    expect(pressed.status).toBe(303);
    const token = /session=([^;]+)/.exec(pressed.headers.get('set-cookie') ?? '')?.[1];
    expect(token).toMatch(/^uas_/);
    const checked = await siteApi.POST('/api/1/session/verify', { body: { token: token! } });
    expect(checked.data!.result).toMatchObject({ _userId: user.id, amr: ['otp'] });
    // The button pressed twice (or a scanner that posts the form afterwards): spent.
    const again = await fetch(`${site.url}/login/link`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ ticket }).toString(),
      redirect: 'manual',
    });
    expect(again.status).toBe(400);
  });
});
