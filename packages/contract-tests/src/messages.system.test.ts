// Mail sent by us (issue 60, points 3–5) through the client, on PGlite and PostgreSQL, against a
// real SMTP server started here (smtp-server on a loopback port, STARTTLS with a self-signed
// certificate made here by openssl; what arrives parsed by mailparser): a reset link and a login
// code delivered, then redeemed; the name HTML-escaped; no ticket or code in any answer, log,
// audit row or event; a temporary failure retried and delivered; a permanent one reported and
// the address undeliverable; the SMTP server down, the ticket still 201 at once and the message
// sent when it is back; 409 no_transport; a link off the site's origins refused.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { UserAccountsClient } from '@user-accounts/client';
import { setSenders } from '@user-accounts/server/messages/senders';
import { type ParsedMail, simpleParser } from 'mailparser';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { useTarget } from './harness.ts';
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
    let shop: UserAccountsClient;
    let bare: UserAccountsClient;
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
    });
    afterAll(async () => {
      if (process.env.MESSAGES_DEBUG) {
        console.log(h.target.logs.filter((l) => l.includes('messag')).join('\n'));
        console.log(JSON.stringify(await h.target.sql('select status, attempts, created_at, sent_at from messages')));
        console.log(JSON.stringify(await h.target.sql('select site, mail_transport from site_senders')));
        console.log('RECEIVED', JSON.stringify(mail.received.map((r) => [r.mail.to, r.secure])));
      }
      await mail.stop().catch(() => {});
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
      expect(data!.result.status).toBe('ticket sent');
      const got = await arrived(user.email);
      expect(got.secure).toBe(true);
      expect(got.mail.messageId).toBe(`<${data!.result.messageId}@user-accounts>`);
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
        data!.result.messageId,
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
          messageId: data!.result.messageId,
          channel: 'email',
          purpose: 'verify_email',
          status: 'sent',
          attempts: 2,
        }),
      ]);
      expect(listed.messages[0]!.lastError).toBeUndefined();
      expect(listed.next).toBeNull();

      const gone = await newUser();
      mail.rules.refuseRcpt.add(gone.email.toLowerCase());
      const refused = await send({
        _userId: gone.id,
        purpose: 'verify_email',
        send: { channel: 'email', linkTemplate: 'https://shop.example/v?t={ticket}' },
      });
      const failed = await waitFor(async () => {
        const [r] = await h.target.sql(
          'select status, undeliverable, last_error, body_sealed from messages where id = $1',
          [refused.data!.result.messageId],
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
        messageId: refused.data!.result.messageId,
        channel: 'email',
        purpose: 'verify_email',
      });
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
