// Tickets through the client (issue 28, point 3): each purpose end to end, every miss one 422,
// single use under concurrent redeems, expiry, what ends a ticket, code burning, and secrecy.
// Each test works in a site of its own. Server targets only.
import type { components } from '@user-accounts/client';
import { describe, expect, it } from 'vitest';
import { issuedTicket, useTarget, withoutRequestId } from './harness.ts';
import { type TargetSpec, TEST_METRICS_TOKEN } from './targets.ts';

type Purpose = components['schemas']['TicketPurpose'];

export function defineTicketsSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: tickets`, () => {
    const h = useTarget(spec);
    let sites = 0;
    const newSite = async () => {
      const site = `tickets-${Date.now().toString(36)}-${sites++}`;
      const scopes = ['read', 'write', 'verify', 'export'] as const;
      const { token } = await h.target.createToken({ site, scopes: [...scopes], label: 'tickets' });
      return { site, token, client: h.clientFor(token) };
    };
    type Client = Awaited<ReturnType<typeof newSite>>['client'];
    const issue = async (client: Client, body: Record<string, unknown>) => {
      const { data, error, response } = await client.POST('/api/1/user/ticket', {
        body: body as { purpose: Purpose; _userId: string },
      });
      return { result: data?.result, error, status: response.status };
    };
    const redeem = async (client: Client, body: Record<string, unknown>) => {
      const { data, error, response } = await client.POST('/api/1/user/ticket/redeem', {
        body: body as { ticket: string; purpose: Purpose },
      });
      return { result: data?.result, error, status: response.status };
    };
    const get = async (client: Client, id: string) =>
      (await client.GET('/api/1/user/get', { params: { query: { _userId: id } } })).data!.result;
    const issued: string[] = [];
    const ticketOf = async (client: Client, body: Record<string, unknown>) => {
      const answer = await issue(client, body);
      expect(answer.status, JSON.stringify(answer.error)).toBe(201);
      issued.push(issuedTicket(answer.result!));
      return issuedTicket(answer.result!);
    };

    it('verify_email: issued for the account, redeemed once, and the email is verified', async () => {
      const { client } = await newSite();
      const user = await h.createUser({}, client);
      const before = Date.now();
      const answer = await issue(client, { _userId: user.id, purpose: 'verify_email' });
      expect(answer.status).toBe(201);
      expect(answer.result).toMatchObject({ _userId: user.id, purpose: 'verify_email', status: 'ticket issued' });
      expect(issuedTicket(answer.result!)).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const lifetime = Date.parse(answer.result!.expiresAt) - before;
      expect(lifetime).toBeGreaterThan(24 * 3600_000 - 60_000);
      expect(lifetime).toBeLessThan(24 * 3600_000 + 60_000);
      issued.push(issuedTicket(answer.result!));

      const used = await redeem(client, { ticket: issuedTicket(answer.result!), purpose: 'verify_email' });
      expect(used).toMatchObject({ status: 200, result: { _userId: user.id, status: 'email verified' } });
      expect(await get(client, user.id)).toMatchObject({ emailVerified: true });
      expect((await redeem(client, { ticket: issuedTicket(answer.result!), purpose: 'verify_email' })).status).toBe(
        422,
      );
    });

    it('reset_password: a weak password is 400 and keeps the ticket; the reset signs in with the new password only', async () => {
      const { client } = await newSite();
      const user = await h.createUser({}, client);
      const ticket = await ticketOf(client, { email: user.email.toUpperCase(), purpose: 'reset_password' });
      for (const weak of ['password123', user.email]) {
        const refused = await redeem(client, { ticket, purpose: 'reset_password', password: weak });
        expect(refused.status, weak).toBe(400);
        expect(refused.error?.code).toBe('weak_password');
      }
      const password = h.password();
      const reset = await redeem(client, { ticket, purpose: 'reset_password', password });
      expect(reset).toMatchObject({ status: 200, result: { _userId: user.id, status: 'password reset' } });
      const login = (p: string) => client.POST('/api/1/user/verify', { body: { email: user.email, password: p } });
      expect((await login(password)).response.status).toBe(200);
      expect((await login(user.password)).response.status).toBe(422);
      expect((await redeem(client, { ticket, purpose: 'reset_password', password: h.password() })).status).toBe(422);
    });

    it('change_email: 409 at issue for a taken email; redeemed, the new email is the account’s, verified', async () => {
      const { client } = await newSite();
      const user = await h.createUser({}, client);
      const other = await h.createUser({}, client);
      const taken = await issue(client, { _userId: user.id, purpose: 'change_email', newEmail: other.email });
      expect(taken.status).toBe(409);
      expect(taken.error?.code).toBe('email_taken');
      expect((await issue(client, { _userId: user.id, purpose: 'change_email' })).status).toBe(400);
      expect(
        (await issue(client, { _userId: user.id, purpose: 'verify_email', newEmail: 'x@example.com' })).status,
      ).toBe(400);

      const newEmail = h.uniqueEmail('changed');
      const ticket = await ticketOf(client, { _userId: user.id, purpose: 'change_email', newEmail });
      // Taken meanwhile: 409, and the ticket stays usable once the email is free again.
      const squatter = await h.createUser({ email: newEmail.toLowerCase() }, client);
      expect((await redeem(client, { ticket, purpose: 'change_email' })).status).toBe(409);
      await client.DELETE('/api/1/user/delete', { body: { _userId: squatter.id } });
      const changed = await redeem(client, { ticket, purpose: 'change_email' });
      expect(changed).toMatchObject({ status: 200, result: { status: 'email changed' } });
      expect(await get(client, user.id)).toMatchObject({ email: newEmail, emailVerified: true });
    });

    it('verify_phone: 409 without a phone; a 6-digit code for the account, burned after 5 wrong tries', async () => {
      const { client } = await newSite();
      const phoneless = await h.createUser({}, client);
      const none = await issue(client, { _userId: phoneless.id, purpose: 'verify_phone' });
      expect(none.status).toBe(409);
      expect(none.error?.code).toBe('no_phone');

      const user = await h.createUser({ phone: '+44 20 7946 0018' }, client);
      const code = await ticketOf(client, { _userId: user.id, purpose: 'verify_phone' });
      expect(code).toMatch(/^\d{6}$/);
      const wrong = code === '000000' ? '000001' : '000000';
      expect((await redeem(client, { ticket: code, purpose: 'verify_phone' })).status).toBe(400); // no _userId
      expect((await redeem(client, { ticket: code, purpose: 'verify_phone', _userId: phoneless.id })).status).toBe(422);
      for (let i = 0; i < 4; i++) {
        expect((await redeem(client, { ticket: wrong, purpose: 'verify_phone', _userId: user.id })).status).toBe(422);
      }
      const right = await redeem(client, { ticket: code, purpose: 'verify_phone', _userId: user.id });
      expect(right).toMatchObject({ status: 200, result: { status: 'phone verified' } });
      expect(await get(client, user.id)).toMatchObject({ phoneVerified: true });

      const burned = await ticketOf(client, { _userId: user.id, purpose: 'verify_phone' });
      const miss = burned === '000000' ? '000001' : '000000';
      for (let i = 0; i < 5; i++) await redeem(client, { ticket: miss, purpose: 'verify_phone', _userId: user.id });
      expect((await redeem(client, { ticket: burned, purpose: 'verify_phone', _userId: user.id })).status).toBe(422);
    });

    it('verify_phone: 50 wrong codes at once, then the right one while they run: refused (issue 41, F3)', async () => {
      const { client } = await newSite();
      const user = await h.createUser({ phone: '+44 20 7946 0019' }, client);
      const code = await ticketOf(client, { _userId: user.id, purpose: 'verify_phone' });
      const wrong = Array.from({ length: 50 }, (_, i) => String((Number(code) + 1 + i) % 1_000_000).padStart(6, '0'));
      let answered = 0;
      let fifth: () => void = () => {};
      const fiveAnswered = new Promise<void>((resolve) => {
        fifth = resolve;
      });
      const burst = wrong.map(async (ticket) => {
        const answer = await redeem(client, { ticket, purpose: 'verify_phone', _userId: user.id });
        if (++answered === 5) fifth();
        return answer.status;
      });
      // Five tries answered: the code has had its five, whatever the other 45 are doing.
      await fiveAnswered;
      // Refused: the code burned (422), or the account locked meanwhile by the wrong codes in
      // flight (429: they count per account too, issue 57, G4), whichever came first.
      const right = await redeem(client, { ticket: code, purpose: 'verify_phone', _userId: user.id });
      expect([422, 429]).toContain(right.status);
      expect(right.error?.code).toBe(right.status === 422 ? 'invalid_ticket' : 'too_many_attempts');
      const statuses = await Promise.all(burst);
      expect(statuses.filter((s) => s !== 422 && s !== 429)).toEqual([]);
      expect(statuses.filter((s) => s === 422).length).toBeGreaterThanOrEqual(5);
      expect(await get(client, user.id)).toMatchObject({ phoneVerified: false });
    });

    it('answers every miss with one 422 invalid_ticket body', async () => {
      const { client, site } = await newSite();
      const other = await newSite();
      const user = await h.createUser({}, client);
      const misses: [string, () => Promise<Awaited<ReturnType<typeof redeem>>>][] = [];
      misses.push(['unknown', () => redeem(client, { ticket: 'x'.repeat(43), purpose: 'verify_email' })]);
      const used = await ticketOf(client, { _userId: user.id, purpose: 'verify_email' });
      await redeem(client, { ticket: used, purpose: 'verify_email' });
      misses.push(['used', () => redeem(client, { ticket: used, purpose: 'verify_email' })]);
      const expired = await ticketOf(client, { _userId: user.id, purpose: 'verify_email' });
      await h.target.sql(`update tickets set expires_at = now() - interval '1 second' where site = $1`, [site]);
      misses.push(['expired', () => redeem(client, { ticket: expired, purpose: 'verify_email' })]);
      const purpose = await ticketOf(client, { _userId: user.id, purpose: 'verify_email' });
      misses.push(['another purpose', () => redeem(client, { ticket: purpose, purpose: 'change_email' })]);
      misses.push(['another site', () => redeem(other.client, { ticket: purpose, purpose: 'verify_email' })]);
      const beforePassword = await ticketOf(client, { _userId: user.id, purpose: 'reset_password' });
      await client.POST('/api/1/user/update', { body: { _userId: user.id, password: h.password() } });
      misses.push([
        'a reset before a password change',
        () => redeem(client, { ticket: beforePassword, purpose: 'reset_password', password: h.password() }),
      ]);
      const beforeEmail = await ticketOf(client, { _userId: user.id, purpose: 'reset_password' });
      const verifyBeforeEmail = await ticketOf(client, { _userId: user.id, purpose: 'verify_email' });
      await client.POST('/api/1/user/update', { body: { _userId: user.id, email: h.uniqueEmail('moved') } });
      misses.push([
        'a reset before an email change',
        () => redeem(client, { ticket: beforeEmail, purpose: 'reset_password', password: h.password() }),
      ]);
      misses.push([
        'a verify_email before an email change',
        () => redeem(client, { ticket: verifyBeforeEmail, purpose: 'verify_email' }),
      ]);
      const bodies = [];
      for (const [name, miss] of misses) {
        const answer = await miss();
        expect(answer.status, name).toBe(422);
        bodies.push(withoutRequestId(answer.error));
      }
      expect(new Set(bodies.map((b) => JSON.stringify(b))).size).toBe(1);
      expect(bodies[0]).toMatchObject({ code: 'invalid_ticket', status: 422 });
    });

    it('lets exactly one of 20 concurrent redeems use a ticket', async () => {
      const { client } = await newSite();
      const user = await h.createUser({}, client);
      const ticket = await ticketOf(client, { _userId: user.id, purpose: 'verify_email' });
      const answers = await Promise.all(
        Array.from({ length: 20 }, () => redeem(client, { ticket, purpose: 'verify_email' })),
      );
      expect(answers.map((a) => a.status).sort()).toEqual([200, ...Array(19).fill(422)]);
      const events = await h.target.sql(
        `select count(*)::int as n from audit_log where operation = 'redeem' and user_id = $1 and status = 200`,
        [user.id],
      );
      expect(events[0]!.n).toBe(1);
    });

    it('bounds expiresIn by purpose, and ends an account’s tickets with it', async () => {
      const { client } = await newSite();
      const user = await h.createUser({ phone: '555-0100' }, client);
      const long = await issue(client, { _userId: user.id, purpose: 'reset_password', expiresIn: 24 * 3600 + 1 });
      expect(long.status).toBe(400);
      expect(long.error?.errors?.[0]?.pointer).toBe('/expiresIn');
      expect(
        (await issue(client, { _userId: user.id, purpose: 'verify_email', expiresIn: 7 * 24 * 3600 })).status,
      ).toBe(201);
      await ticketOf(client, { _userId: user.id, purpose: 'verify_phone' });
      await client.DELETE('/api/1/user/delete', { body: { _userId: user.id } });
      const left = await h.target.sql('select count(*)::int as n from tickets where user_id = $1', [user.id]);
      expect(left[0]!.n).toBe(0);
      expect((await issue(client, { _userId: user.id, purpose: 'verify_email' })).status).toBe(404);
    });

    // The spec's lifetimes (TicketRequest.expiresIn): a default and a maximum per purpose, 60 s at least.
    it.each([
      ['verify_email', 24 * 3600, 7 * 24 * 3600],
      ['change_email', 24 * 3600, 7 * 24 * 3600],
      ['reset_password', 3600, 24 * 3600],
      ['verify_phone', 600, 3600],
    ] as const)('%s lives %i s unless told, %i s at most, 60 s at least', async (purpose, byDefault, most) => {
      const { client } = await newSite();
      const user = await h.createUser({ phone: '+44 20 7946 0018' }, client);
      const body = (extra: Record<string, unknown>) => ({
        _userId: user.id,
        purpose,
        ...(purpose === 'change_email' && { newEmail: h.uniqueEmail('lifetime') }),
        ...extra,
      });
      for (const [extra, seconds] of [
        [{}, byDefault],
        [{ expiresIn: most }, most],
        [{ expiresIn: 60 }, 60],
      ] as const) {
        // The server is in this process: its clock is ours, so expiresAt lies between the request's
        // start and its answer, plus the lifetime (expiresAt has whole milliseconds).
        const before = Date.now();
        const answer = await issue(client, body(extra));
        const after = Date.now();
        expect(answer.status, JSON.stringify(answer.error)).toBe(201);
        issued.push(issuedTicket(answer.result!));
        const expiresAt = Date.parse(answer.result!.expiresAt);
        expect(expiresAt, JSON.stringify(extra)).toBeGreaterThanOrEqual(before + seconds * 1000);
        expect(expiresAt, JSON.stringify(extra)).toBeLessThanOrEqual(after + seconds * 1000);
      }
      for (const expiresIn of [most + 1, 59]) {
        const refused = await issue(client, body({ expiresIn }));
        expect(refused.status, String(expiresIn)).toBe(400);
        expect(refused.error?.errors?.[0]?.pointer).toBe('/expiresIn');
      }
    });

    it('needs the write scope: a verify token can neither issue nor redeem', async () => {
      const { site, client } = await newSite();
      const user = await h.createUser({}, client);
      const { token } = await h.target.createToken({ site, scopes: ['verify'], label: 'login only' });
      const login = h.clientFor(token);
      expect((await issue(login, { _userId: user.id, purpose: 'verify_email' })).status).toBe(403);
      expect((await redeem(login, { ticket: 'x', purpose: 'verify_email' })).status).toBe(403);
    });

    it('keeps every ticket and code out of the audit trail, events, logs, metrics, export and the database', async () => {
      const { token, client } = await newSite();
      await h.createUser({}, client);
      expect(issued.length).toBeGreaterThan(10);
      const exported = await (
        await fetch(`${h.target.baseUrl}/api/1/user/export`, { headers: { Authorization: token } })
      ).text();
      const audit = JSON.stringify(await h.target.sql('select * from audit_log'));
      const events = JSON.stringify(await h.target.sql('select * from events'));
      const stored = JSON.stringify(await h.target.sql('select * from tickets'));
      const logs = h.target.logs.join('\n');
      const metrics = await (
        await fetch(`${h.target.baseUrl}/metrics`, { headers: { Authorization: `Bearer ${TEST_METRICS_TOKEN}` } })
      ).text();
      expect(metrics).toMatch(/^# HELP /m);
      expect(issued.filter((t) => t.length === 6).length).toBeGreaterThan(2);
      for (const ticket of issued) {
        // A phone's code is six digits, which a time or a count can hold by chance: looked for as
        // a JSON string or a label's value, as it would be written if it leaked.
        const needle = ticket.length > 6 ? ticket : `"${ticket}"`;
        for (const [where, text] of Object.entries({ exported, audit, events, stored, logs, metrics })) {
          expect(text.includes(needle), `a ticket in ${where}`).toBe(false);
        }
      }
    });
  });
}
