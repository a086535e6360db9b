// Mail sent by us (issue 60, points 3–5) through the client, on PGlite and PostgreSQL, against a
// real SMTP server started here (smtp-server on a loopback port, STARTTLS with a self-signed
// certificate made here by openssl; what arrives parsed by mailparser): a reset link and a login
// code delivered, then redeemed; the name HTML-escaped; no ticket or code in any answer, log,
// audit row or event; a temporary failure retried and delivered; a permanent one reported and
// the address undeliverable; the SMTP server down, the ticket still 201 at once and the message
// sent when it is back; 409 no_transport; a link off the site's origins refused. Also: an
// invitation mailed (to an account's address and to one no account holds), its link accepting;
// `emailDeliverable` false after a bounce (with a new ETag) and true once verified again; texts
// through a local HTTP receiver playing Twilio's shape (a code that redeems, the key in its
// header, a country not listed and an unknown one refused, the daily limit's 429
// sms_limit_reached, the API's 4xx a permanent failure). One server per database for all of it.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { UserAccountsClient } from '@user-accounts/client';
import { setSenders } from '@user-accounts/server/messages/senders';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issuedTicket, sentMessageId, useTarget } from './harness.ts';
import { pgliteTarget, postgresTarget, type TargetSpec } from './targets.ts';

const dir = mkdtempSync(join(tmpdir(), 'smtp-'));
execFileSync('openssl', [
  'req',
  '-x509',
  '-newkey',
  'ec',
  '-pkeyopt',
  'ec_paramgen_curve:prime256v1',
  '-nodes',
  '-keyout',
  join(dir, 'key.pem'),
  '-out',
  join(dir, 'cert.pem'),
  '-days',
  '1',
  '-subj',
  '/CN=localhost',
]);
const TLS = { key: readFileSync(join(dir, 'key.pem')), cert: readFileSync(join(dir, 'cert.pem')) };

interface Received {
  mail: ParsedMail;
  secure: boolean;
}

/** A real SMTP server: STARTTLS offered, every message parsed; `refuse` answers RCPT or DATA as told. */
function smtp() {
  const received: Received[] = [];
  const rules = { dataFailures: 0, refuseRcpt: new Set<string>() };
  let server: SMTPServer;
  const make = () =>
    new SMTPServer({
      ...TLS,
      authOptional: true,
      logger: false,
      onRcptTo(address, _session, callback) {
        if (rules.refuseRcpt.has(address.address.toLowerCase())) {
          const error = Object.assign(new Error('5.1.1 No such user here'), { responseCode: 550 });
          return callback(error);
        }
        callback();
      },
      onData(stream, session, callback) {
        const chunks: Buffer[] = [];
        stream.on('data', (c: Buffer) => chunks.push(c));
        stream.on('end', async () => {
          if (rules.dataFailures > 0) {
            rules.dataFailures--;
            return callback(Object.assign(new Error('4.3.0 Try again later'), { responseCode: 451 }));
          }
          received.push({ mail: await simpleParser(Buffer.concat(chunks)), secure: session.secure });
          callback();
        });
      },
    });
  return {
    received,
    rules,
    port: 0,
    async start(port = 0) {
      server = make();
      await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', () => resolve()));
      this.port = (server.server.address() as AddressInfo).port;
    },
    async stop() {
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

interface Text {
  path: string;
  authorization: string | undefined;
  body: { To: string; Body: string };
}

/** A text-message API in Twilio's shape: POST …/Messages.json, 201 with a sid; `answers` the next statuses to give. */
function textApi() {
  const texts: Text[] = [];
  const answers: number[] = [];
  const server = createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (c: Buffer) => chunks.push(c));
    request.on('end', () => {
      const status = answers.shift() ?? 201;
      if (status === 201)
        texts.push({
          path: request.url ?? '',
          authorization: request.headers.authorization,
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')),
        });
      response.writeHead(status, { 'content-type': 'application/json' });
      response.end(
        status === 201
          ? JSON.stringify({ sid: `SM${texts.length}`, status: 'queued' })
          : JSON.stringify({ code: 21211, message: 'Invalid To phone number', status }),
      );
    });
  });
  return {
    texts,
    answers,
    url: '',
    async start() {
      await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
      this.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/2010-04-01/Accounts/AC0123/Messages.json`;
    },
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

const waitFor = async <T>(what: () => T | undefined | Promise<T | undefined>, ms = 20_000): Promise<T> => {
  const until = Date.now() + ms;
  for (;;) {
    const found = await what();
    if (found !== undefined) return found;
    if (Date.now() > until) throw new Error('timed out');
    await new Promise((r) => setTimeout(r, 50));
  }
};

function defineMessagesSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) {
    describe.skip(`${spec.name}: mail sent by us (${spec.skip ?? 'stateless'})`, () => {
      it('skipped', () => {});
    });
    return;
  }
  describe(`${spec.name}: mail sent by us`, () => {
    const h = useTarget(spec);
    const mail = smtp();
    const sms = textApi();
    let shop: UserAccountsClient;
    let bare: UserAccountsClient;
    let texts: UserAccountsClient;
    const site = `mail-${Date.now().toString(36)}`;
    const secrets: string[] = [];

    beforeAll(async () => {
      await mail.start();
      const deps = h.target.deps!();
      await setSenders(
        deps.database.db,
        site,
        {
          mailFrom: 'Shop <no-reply@shop.example>',
          mailTransport: `smtp://127.0.0.1:${mail.port}`,
          linkOrigins: ['https://shop.example'],
        },
        deps.factorKeys,
      );
      shop = h.clientFor(
        (await h.target.createToken({ site, scopes: ['read', 'write', 'events'], label: 'mail' })).token,
      );
      bare = h.clientFor(
        (await h.target.createToken({ site: `${site}-bare`, scopes: ['read', 'write'], label: 'bare' })).token,
      );
      await sms.start();
      await setSenders(
        deps.database.db,
        `${site}-sms`,
        {
          sms: { url: sms.url, header: 'Authorization', body: '{"To":"{{to}}","Body":"{{text}}"}' },
          smsKey: 'Basic QUMwMTIzOnNlY3JldA==',
          smsCountries: ['GB'],
          smsDailyLimit: 3,
        },
        deps.factorKeys,
      );
      texts = h.clientFor(
        (await h.target.createToken({ site: `${site}-sms`, scopes: ['read', 'write'], label: 'sms' })).token,
      );
    });
    afterAll(async () => {
      if (process.env.MESSAGES_DEBUG) {
        console.log(h.target.logs.filter((l) => l.includes('messag')).join('\n'));
        console.log(JSON.stringify(await h.target.sql('select status, attempts, created_at, sent_at from messages')));
        console.log(JSON.stringify(await h.target.sql('select site, mail_transport from site_senders')));
        console.log('RECEIVED', JSON.stringify(mail.received.map((r) => [r.mail.to, r.secure])));
      }
      await mail.stop().catch(() => {});
      await sms.stop().catch(() => {});
    });

    const arrived = (to: string) =>
      waitFor(() =>
        mail.received.find((r) =>
          JSON.stringify(r.mail.to ?? '')
            .toLowerCase()
            .includes(`"address":"${to.toLowerCase()}"`),
        ),
      );
    const newUser = async (name = 'Ada Lovelace') => {
      const email = h.uniqueEmail('mail');
      const { data } = await shop.POST('/api/1/user/create', {
        body: { email, password: h.password(), name } as never,
      });
      return { id: data!.result._userId, email };
    };
    const send = (body: Record<string, unknown>) => shop.POST('/api/1/user/ticket', { body: body as never });

    it('mails a reset link over STARTTLS, with no ticket in the answer; the link redeems; the name is escaped in the HTML', async () => {
      const user = await newUser('<script>alert(1)</script>');
      const { data, error, response } = await send({
        _userId: user.id,
        purpose: 'reset_password',
        send: { channel: 'email', linkTemplate: 'https://shop.example/reset?ticket={ticket}' },
      });
      expect(error).toBeUndefined();
      expect(response.status).toBe(201);
      expect(Object.keys(data!.result).sort()).toEqual(['_userId', 'expiresAt', 'messageId', 'purpose', 'status']);
      const result = data!.result;
      // The typed client narrows on status: a sent ticket has a messageId and no ticket.
      if (result.status !== 'ticket sent') throw new Error(`not sent: ${result.status}`);
      const got = await arrived(user.email);
      expect(got.secure).toBe(true);
      expect(got.mail.messageId).toBe(`<${result.messageId}@user-accounts>`);
      expect(got.mail.subject).toBe(`Reset your password for ${site}`);
      const ticket = /https:\/\/shop\.example\/reset\?ticket=([A-Za-z0-9_-]{43})/.exec(got.mail.text ?? '')?.[1];
      expect(ticket).toBeDefined();
      secrets.push(ticket!);
      // Escaped too (`/` and `=` as entities), which a mail reader decodes.
      expect(String(got.mail.html).replaceAll('&#x2F;', '/').replaceAll('&#x3D;', '=')).toContain(
        `href="https://shop.example/reset?ticket=${ticket}"`,
      );
      expect(got.mail.html).not.toContain('<script>');
      expect(got.mail.html).toContain('&lt;script&gt;alert(1)&lt;&#x2F;script&gt;');
      const redeemed = await shop.POST('/api/1/user/ticket/redeem', {
        body: { ticket: ticket!, purpose: 'reset_password', password: h.password() },
      });
      expect(redeemed.response.status).toBe(200);
      // Sent: the body (with the link) is gone, the recipient and status kept.
      const [row] = await h.target.sql('select status, body_sealed, recipient from messages where id = $1', [
        result.messageId,
      ]);
      expect(row).toEqual({ status: 'sent', body_sealed: null, recipient: user.email });
    });

    it('mails a login code that redeems with the account’s id', async () => {
      const user = await newUser();
      const { data } = await send({ _userId: user.id, purpose: 'login', delivery: 'code', send: { channel: 'email' } });
      expect(data!.result).not.toHaveProperty('ticket');
      const got = await arrived(user.email);
      const code = /\b(\d{6})\b/.exec(got.mail.text ?? '')?.[1];
      secrets.push(code!);
      const redeemed = await shop.POST('/api/1/user/ticket/redeem', {
        body: { ticket: code!, purpose: 'login', _userId: user.id },
      });
      expect(redeemed.response.status).toBe(200);
    });

    it('retries a temporary failure and delivers; reports a permanent one', async () => {
      const user = await newUser();
      mail.rules.dataFailures = 1;
      const { data } = await send({
        _userId: user.id,
        purpose: 'verify_email',
        send: { channel: 'email', linkTemplate: 'https://shop.example/v?t={ticket}' },
      });
      await arrived(user.email);
      const listed = await waitFor(async () => {
        const { data: page } = await shop.GET('/api/1/message/list', { params: { query: { _userId: user.id } } });
        return page?.result.messages[0]?.status === 'sent' ? page.result : undefined;
      });
      expect(listed.messages).toEqual([
        expect.objectContaining({
          messageId: sentMessageId(data!.result),
          channel: 'email',
          purpose: 'verify_email',
          status: 'sent',
          attempts: 2,
        }),
      ]);
      expect(listed.messages[0]!.lastError).toBeUndefined();
      expect(listed.next).toBeNull();

      const gone = await newUser();
      const getGone = () => shop.GET('/api/1/user/get', { params: { query: { _userId: gone.id } } });
      const fresh = await getGone();
      expect(fresh.data!.result.emailDeliverable).toBe(true);
      mail.rules.refuseRcpt.add(gone.email.toLowerCase());
      const refused = await send({
        _userId: gone.id,
        purpose: 'verify_email',
        send: { channel: 'email', linkTemplate: 'https://shop.example/v?t={ticket}' },
      });
      const failed = await waitFor(async () => {
        const [r] = await h.target.sql(
          'select status, undeliverable, last_error, body_sealed from messages where id = $1',
          [sentMessageId(refused.data!.result)],
        );
        return r?.status === 'failed' ? r : undefined;
      });
      expect(failed).toMatchObject({ undeliverable: true, body_sealed: null });
      expect(String(failed.last_error)).toMatch(/550/);
      const events = await waitFor(async () => {
        const { data: feed } = await shop.GET('/api/1/events', { params: { query: { subject: gone.id, limit: 100 } } });
        const bounced = feed?.result.events.find((e) => e.type === 'message.bounced');
        return bounced === undefined ? undefined : feed!.result.events;
      });
      expect(events.find((e) => e.type === 'message.bounced')!.data).toMatchObject({
        _userId: gone.id,
        messageId: sentMessageId(refused.data!.result),
        channel: 'email',
        purpose: 'verify_email',
      });
      // Undeliverable now, in get (a new ETag: the answer changed) and in list, until verified again.
      const bounced = await getGone();
      expect(bounced.data!.result.emailDeliverable).toBe(false);
      expect(bounced.response.headers.get('etag')).not.toBe(fresh.response.headers.get('etag'));
      const listed2 = await shop.GET('/api/1/user/list', { params: { query: { email: gone.email } } });
      expect(listed2.data!.result.users.map((u) => [u._userId, u.emailDeliverable])).toEqual([[gone.id, false]]);
      const verified = await shop.POST('/api/1/user/update', { body: { _userId: gone.id, emailVerified: true } });
      expect(verified.response.status).toBe(200);
      expect((await getGone()).data!.result.emailDeliverable).toBe(true);
    });

    it('mails an invitation with no ticket in the answer; its link accepts; an address with no account too', async () => {
      const roles = await shop.POST('/api/1/org/roles', { body: { roles: [{ role: 'member', permissions: [] }] } });
      expect(roles.response.status).toBe(200);
      const org = (await shop.POST('/api/1/org/create', { body: { name: 'Analytical <Engines>' } })).data!.result.orgId;
      const invitee = await newUser();
      const invite = (email: string, send: Record<string, unknown>) =>
        shop.POST('/api/1/org/invitation/create', {
          body: { orgId: org, email, roles: ['member'], send: send as never },
        });
      const link = { channel: 'email', linkTemplate: 'https://shop.example/join?t={ticket}' };
      const { data, error, response } = await invite(invitee.email, link);
      expect(error).toBeUndefined();
      expect(response.status).toBe(201);
      const result = data!.result;
      if (result.status !== 'invitation sent') throw new Error(`not sent: ${result.status}`);
      expect(Object.keys(result).sort()).toEqual(['expiresAt', 'invitationId', 'messageId', 'status']);
      const got = await arrived(invitee.email);
      expect(got.mail.messageId).toBe(`<${result.messageId}@user-accounts>`);
      expect(got.mail.subject).toBe(`You are invited to Analytical <Engines> on ${site}`);
      expect(got.mail.html).toContain('Analytical &lt;Engines&gt;');
      const ticket = /join\?t=([A-Za-z0-9_-]{43})/.exec(got.mail.text ?? '')?.[1];
      expect(ticket).toBeDefined();
      secrets.push(ticket!);
      // The account's own messages show it (its address is an account's).
      const mine = await waitFor(async () => {
        const { data: page } = await shop.GET('/api/1/message/list', { params: { query: { _userId: invitee.id } } });
        return page?.result.messages.find((m) => m.status === 'sent');
      });
      expect(mine).toMatchObject({ messageId: result.messageId, purpose: 'invitation', channel: 'email' });
      await shop.POST('/api/1/user/update', { body: { _userId: invitee.id, emailVerified: true } });
      const accepted = await shop.POST('/api/1/org/invitation/accept', {
        body: { ticket: ticket!, _userId: invitee.id },
      });
      expect(accepted.error).toBeUndefined();
      expect(accepted.response.status).toBe(200);

      // An address no account holds: the message names the organization alone (the event's subject).
      const stranger = h.uniqueEmail('stranger');
      const second = await invite(stranger, link);
      const secondId = sentMessageId(second.data!.result);
      await arrived(stranger);
      const event = await waitFor(async () => {
        const { data: feed } = await shop.GET('/api/1/events', { params: { query: { subject: org, limit: 100 } } });
        return feed?.result.events.find((e) => e.type === 'message.sent' && JSON.stringify(e.data).includes(secondId));
      });
      expect(event.data).toEqual({ orgId: org, messageId: secondId, channel: 'email', purpose: 'invitation' });

      // By text, or without a link: 400, and no invitation made.
      const bySms = await invite(h.uniqueEmail('sms'), { channel: 'sms' });
      expect(bySms.response.status).toBe(400);
      expect(bySms.error).toMatchObject({ errors: [{ pointer: '/send/channel', code: 'not_allowed' }] });
      const noLink = await invite(h.uniqueEmail('nolink'), { channel: 'email' });
      expect(noLink.response.status).toBe(400);
      expect(noLink.error).toMatchObject({ errors: [{ pointer: '/send/linkTemplate', code: 'required' }] });
      const pending = await shop.GET('/api/1/org/invitation/list', { params: { query: { orgId: org } } });
      expect(pending.data!.result.invitations.map((i) => i.email)).toEqual([stranger]);
      // Without send, the ticket as before (the other branch of the union).
      const plain = await shop.POST('/api/1/org/invitation/create', {
        body: { orgId: org, email: h.uniqueEmail('plain'), roles: ['member'] },
      });
      expect(issuedTicket(plain.data!.result)).toMatch(/^[A-Za-z0-9_-]{43}$/);
    });

    it('texts a phone code through a Twilio-shaped API; refuses other countries and an unknown one; 429 past the daily limit', async () => {
      const make = async (phone: string) => {
        const { data, error } = await texts.POST('/api/1/user/create', {
          body: { email: h.uniqueEmail('sms'), password: h.password(), name: 'Ada', phone } as never,
        });
        expect(error).toBeUndefined();
        return data!.result._userId;
      };
      const code = (userId: string) =>
        texts.POST('/api/1/user/ticket', {
          body: { _userId: userId, purpose: 'verify_phone', send: { channel: 'sms' } } as never,
        });
      const gb = await make('+44 20 7946 0031');
      const first = await code(gb);
      expect(first.response.status).toBe(201);
      const firstId = sentMessageId(first.data!.result);
      const text = await waitFor(() => sms.texts.find((t) => t.body.To === '+44 20 7946 0031'));
      expect(text.path).toBe('/2010-04-01/Accounts/AC0123/Messages.json');
      expect(text.authorization).toBe('Basic QUMwMTIzOnNlY3JldA==');
      const sent = /\b(\d{6})\b/.exec(text.body.Body)?.[1];
      expect(sent).toBeDefined();
      secrets.push(sent!);
      const redeemed = await texts.POST('/api/1/user/ticket/redeem', {
        body: { ticket: sent!, purpose: 'verify_phone', _userId: gb },
      });
      expect(redeemed.response.status).toBe(200);
      const listed = await texts.GET('/api/1/message/list', { params: { query: { _userId: gb } } });
      expect(listed.data!.result.messages).toEqual([
        expect.objectContaining({ messageId: firstId, channel: 'sms', purpose: 'verify_phone', status: 'sent' }),
      ]);

      // France is not one of the site's countries; +44 7700 900123 is no valid number: refused, nothing issued.
      for (const phone of ['+33 6 12 34 56 78', '+44 7700 900123']) {
        const other = await make(phone);
        const refused = await code(other);
        expect(refused.response.status, phone).toBe(400);
        expect(refused.error).toMatchObject({ errors: [{ pointer: '/send/channel', code: 'not_allowed' }] });
        expect(await h.target.sql('select 1 from tickets where user_id = $1', [other])).toEqual([]);
      }

      // The API's 4xx is a permanent failure: failed at once, with its status, never retried.
      sms.answers.push(400);
      const second = await make('+44 20 7946 0032');
      const failedId = sentMessageId((await code(second)).data!.result);
      const failed = await waitFor(async () => {
        const { data: page } = await texts.GET('/api/1/message/list', { params: { query: { _userId: second } } });
        return page?.result.messages.find((m) => m.messageId === failedId && m.status === 'failed');
      });
      expect(failed).toMatchObject({ attempts: 1, lastError: 'the text API answered 400' });

      // The third text of the day is the last (--sms-daily-limit 3): the fourth is 429 with Retry-After.
      const third = await make('+44 20 7946 0033');
      expect((await code(third)).response.status).toBe(201);
      const fourth = await make('+44 20 7946 0034');
      const over = await code(fourth);
      expect(over.response.status).toBe(429);
      expect(over.error).toMatchObject({ code: 'sms_limit_reached' });
      expect(Number(over.response.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(await h.target.sql('select 1 from tickets where user_id = $1', [fourth])).toEqual([]);
    });

    it('answers 201 at once with the SMTP server down, and sends when it is back', async () => {
      const user = await newUser();
      const port = mail.port;
      await mail.stop();
      const started = Date.now();
      const { response } = await send({
        _userId: user.id,
        purpose: 'verify_email',
        send: { channel: 'email', linkTemplate: 'https://shop.example/v?t={ticket}' },
      });
      expect(response.status).toBe(201);
      expect(Date.now() - started).toBeLessThan(2_000);
      await new Promise((r) => setTimeout(r, 1_500));
      await mail.start(port);
      await waitFor(
        () =>
          mail.received.find((r) =>
            JSON.stringify(r.mail.to ?? '')
              .toLowerCase()
              .includes(user.email.toLowerCase()),
          ),
        40_000,
      );
    }, 60_000);

    it('refuses a send without a transport (409 no_transport) and a link off the site’s origins (400), issuing nothing', async () => {
      const { data: made, error: refusal } = await bare.POST('/api/1/user/create', {
        body: { email: h.uniqueEmail('bare'), password: h.password(), name: 'Bare' } as never,
      });
      expect(refusal).toBeUndefined();
      const none = await bare.POST('/api/1/user/ticket', {
        body: {
          _userId: made!.result._userId,
          purpose: 'login',
          delivery: 'code',
          send: { channel: 'email' },
        } as never,
      });
      expect(none.response.status).toBe(409);
      expect(none.error).toMatchObject({ code: 'no_transport' });
      const user = await newUser();
      const off = await send({
        _userId: user.id,
        purpose: 'reset_password',
        send: { channel: 'email', linkTemplate: 'https://evil.example/r?t={ticket}' },
      });
      expect(off.response.status).toBe(400);
      expect(off.error).toMatchObject({ errors: [{ pointer: '/send/linkTemplate', code: 'not_allowed' }] });
      expect(await h.target.sql('select 1 from tickets where user_id = $1', [user.id])).toEqual([]);
    });

    it('a person’s data lists the account’s messages: address, status and dates, never the content', async () => {
      const user = await newUser();
      const { data } = await send({
        _userId: user.id,
        purpose: 'reset_password',
        send: { channel: 'email', linkTemplate: 'https://shop.example/reset?ticket={ticket}' },
      });
      const messageId = sentMessageId(data!.result);
      const got = await arrived(user.email);
      secrets.push(/ticket=([A-Za-z0-9_-]{43})/.exec(got.mail.text ?? '')![1]!);
      const exporter = h.clientFor((await h.target.createToken({ site, scopes: ['export'], label: 'data' })).token);
      const answer = await waitFor(async () => {
        const { data: held } = await exporter.GET('/api/1/user/data', { params: { query: { _userId: user.id } } });
        return held?.result.messages[0]?.status === 'sent' ? held.result : undefined;
      });
      expect(answer.messages).toEqual([
        {
          messageId,
          channel: 'email',
          purpose: 'reset_password',
          address: user.email,
          status: 'sent',
          attempts: 1,
          createdAt: expect.any(String),
          sentAt: expect.any(String),
        },
      ]);
      expect(answer.account.emailDeliverable).toBe(true);
    });

    it('holds no ticket or code in any answer, log line, audit row or event', async () => {
      expect(secrets.length).toBeGreaterThanOrEqual(2);
      const audit = JSON.stringify(await h.target.sql('select * from audit_log'));
      const events = JSON.stringify(await h.target.sql('select * from events'));
      for (const secret of secrets) {
        for (const body of h.bodies) expect(body).not.toContain(secret);
        for (const line of h.target.logs) expect(line).not.toContain(secret);
        expect(audit).not.toContain(secret);
        expect(events).not.toContain(secret);
      }
    });
  });
}

defineMessagesSuite(pgliteTarget);
defineMessagesSuite(await postgresTarget());
afterAll(() => rmSync(dir, { recursive: true, force: true }));
