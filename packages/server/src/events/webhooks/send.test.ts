// One delivery attempt against real receivers on 127.0.0.1: the signature as a receiver checks
// it (with the standardwebhooks library, not our code), failures, the time limit, and the
// address checks that keep webhooks off private networks.
import { createHmac } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type RequestListener } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Webhook } from 'standardwebhooks';
import { describe, expect, it, onTestFinished } from 'vitest';
import { newWebhookSecret, sendWebhook } from './send.ts';
import { checkWebhookUrl, forbiddenAddress } from './target.ts';

interface Received {
  method: string | undefined;
  url: string | undefined;
  headers: IncomingHttpHeaders;
  body: string;
}

/** A receiver for this test alone: what it was sent, and how many connections it accepted. */
async function receiver(answer: (req: Received, res: Parameters<RequestListener>[1]) => void) {
  const requests: Received[] = [];
  let connections = 0;
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on('end', () => {
      const received = { method: req.method, url: req.url, headers: req.headers, body };
      requests.push(received);
      answer(received, res);
    });
  });
  server.on('connection', () => connections++);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onTestFinished(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });
  const port = (server.address() as AddressInfo).port;
  return { port, requests, connections: () => connections };
}

const event = (url: string, secret: string, allowPrivate = true, timeoutMs?: number) => ({
  url,
  secret,
  id: 'evt_01HZXJ3M5N8Q',
  timestamp: new Date(),
  body: JSON.stringify({ id: 'evt_01HZXJ3M5N8Q', type: 'user.created', data: { name: 'Ada Lovelace — ✓' } }),
  allowPrivate,
  ...(timeoutMs === undefined ? {} : { timeoutMs }),
});

describe('sendWebhook', () => {
  it('delivers a body the receiver verifies as Standard Webhooks', async () => {
    const secret = newWebhookSecret();
    let verified: unknown;
    const { port, requests } = await receiver((req, res) => {
      verified = new Webhook(secret).verify(req.body, req.headers as Record<string, string>);
      res.writeHead(200).end('thanks');
    });
    const sent = event(`http://127.0.0.1:${port}/hooks?site=a`, secret);
    const attempt = await sendWebhook(sent);
    expect(attempt).toMatchObject({ ok: true, status: 200 });
    expect(attempt.error).toBeUndefined();
    expect(attempt.ms).toBeGreaterThan(0);
    expect(requests).toHaveLength(1);
    const [got] = requests;
    expect(got).toMatchObject({ method: 'POST', url: '/hooks?site=a', body: sent.body });
    expect(got!.headers).toMatchObject({
      // A CloudEvents HTTP message in structured mode (the body is the event).
      'content-type': 'application/cloudevents+json',
      'user-agent': 'user-accounts-webhooks/1',
      'webhook-id': sent.id,
      'webhook-timestamp': String(Math.floor(sent.timestamp.getTime() / 1000)),
    });
    expect(got!.headers['webhook-signature']).toMatch(/^v1,[A-Za-z0-9+/]+=*$/);
    expect(verified).toEqual(JSON.parse(sent.body));
    // The signature covers exactly the id, the timestamp and the body's bytes, headers aside.
    const signed = `${sent.id}.${got!.headers['webhook-timestamp']}.${sent.body}`;
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    expect(got!.headers['webhook-signature']).toBe(`v1,${createHmac('sha256', key).update(signed).digest('base64')}`);
  });

  it('fails on a 500 with its status', async () => {
    const { port } = await receiver((_req, res) => res.writeHead(500).end('broken'));
    expect(await sendWebhook(event(`http://127.0.0.1:${port}/`, newWebhookSecret()))).toMatchObject({
      ok: false,
      status: 500,
    });
  });

  it('does not follow a redirect', async () => {
    const { port, requests } = await receiver((req, res) =>
      req.url === '/moved' ? res.writeHead(302, { location: '/elsewhere' }).end() : res.writeHead(200).end(),
    );
    const attempt = await sendWebhook(event(`http://127.0.0.1:${port}/moved`, newWebhookSecret()));
    expect(attempt).toMatchObject({ ok: false, status: 302 });
    expect(requests.map((r) => r.url)).toEqual(['/moved']);
  });

  it('stops reading a long answer and judges it by its status', async () => {
    const { port } = await receiver((_req, res) => {
      res.writeHead(200);
      // Far more than is read, and never ended: the attempt must not wait for the rest.
      const chunk = 'x'.repeat(16 * 1024);
      for (let i = 0; i < 16; i++) res.write(chunk);
    });
    const attempt = await sendWebhook(event(`http://127.0.0.1:${port}/`, newWebhookSecret(), true, 5_000));
    expect(attempt).toMatchObject({ ok: true, status: 200 });
    expect(attempt.ms).toBeLessThan(5_000);
  });

  it('gives up on a receiver that never answers, within its time limit', async () => {
    const { port, requests } = await receiver(() => {});
    const attempt = await sendWebhook(event(`http://127.0.0.1:${port}/`, newWebhookSecret(), true, 300));
    expect(attempt).toMatchObject({ ok: false, error: 'timed out after 300 ms' });
    expect(attempt.status).toBeUndefined();
    expect(attempt.ms).toBeGreaterThanOrEqual(290);
    expect(attempt.ms).toBeLessThan(1_000);
    expect(requests).toHaveLength(1);
  });

  it('reports a network error', async () => {
    const { port } = await receiver((_req, res) => res.end());
    const closed = createServer();
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve));
    const unused = (closed.address() as AddressInfo).port;
    await new Promise((resolve) => closed.close(resolve));
    expect(unused).not.toBe(port);
    const attempt = await sendWebhook(event(`http://127.0.0.1:${unused}/`, newWebhookSecret()));
    expect(attempt.ok).toBe(false);
    expect(attempt.error).toContain('ECONNREFUSED');
  });

  it('never throws, even for a secret that is not one', async () => {
    const { connections } = await receiver((_req, res) => res.end());
    const attempt = await sendWebhook(event('http://127.0.0.1:9/', 'whsec_not*base64'));
    expect(attempt.ok).toBe(false);
    expect(attempt.error).toMatch(/secret/);
    expect(connections()).toBe(0);
  });

  describe('without private targets', () => {
    it('refuses http and a loopback literal without connecting', async () => {
      const { port, connections } = await receiver((_req, res) => res.end());
      for (const url of [
        `http://127.0.0.1:${port}/`,
        `https://127.0.0.1:${port}/`,
        `https://[::ffff:127.0.0.1]:${port}/`,
        `https://[::1]:${port}/`,
        `https://2130706433:${port}/`,
      ]) {
        const attempt = await sendWebhook(event(url, newWebhookSecret(), false));
        expect(attempt, url).toMatchObject({ ok: false });
        expect(attempt.status, url).toBeUndefined();
        expect(attempt.error, url).toBeTruthy();
      }
      expect(connections()).toBe(0);
    });

    it('refuses a host name that resolves to loopback, at the lookup', async () => {
      const { port, connections } = await receiver((_req, res) => res.end());
      const attempt = await sendWebhook(event(`https://localhost:${port}/`, newWebhookSecret(), false));
      expect(attempt.ok).toBe(false);
      expect(attempt.error).toMatch(/^localhost resolves to (127\.0\.0\.1|::1), which is not a public address$/);
      expect(connections()).toBe(0);
    });
  });
});

describe('forbiddenAddress', () => {
  it.each([
    '127.0.0.1',
    '::1',
    '10.1.2.3',
    '172.16.0.1',
    '172.31.255.255',
    '192.168.1.1',
    '169.254.169.254',
    '100.64.0.1',
    '0.0.0.0',
    '::',
    'fe80::1',
    'fc00::1',
    'fd12:3456::1',
    '::ffff:10.0.0.1',
    '::ffff:127.0.0.1',
    '::127.0.0.1',
    '224.0.0.1',
    '255.255.255.255',
    '240.0.0.1',
    '192.0.2.1',
    '2001:db8::1',
    '64:ff9b::a00:1',
    '2002:a00:1::',
    'ff02::1',
    '127.1',
    'localhost',
    '',
  ])('forbids %j', (address) => {
    expect(forbiddenAddress(address)).toBe(true);
  });

  it.each(['93.184.216.34', '8.8.8.8', '172.32.0.1', '2606:4700:4700::1111', '::ffff:8.8.8.8'])(
    'allows %s',
    (address) => {
      expect(forbiddenAddress(address)).toBe(false);
    },
  );
});

describe('checkWebhookUrl', () => {
  it.each([
    ['not a URL', 'hooks.example.com/in', false],
    ['ftp', 'ftp://example.com/hooks', false],
    ['http without private targets', 'http://example.com/hooks', false],
    ['a user name', 'https://user@example.com/hooks', false],
    ['a password', 'https://user:secret@example.com/hooks', false],
    ['a fragment', 'https://example.com/hooks#part', false],
    ['an empty fragment', 'https://example.com/hooks#', false],
    ['a private literal', 'https://10.0.0.1/hooks', false],
    ['a metadata literal', 'https://169.254.169.254/latest', false],
    ['a mapped loopback literal', 'https://[::ffff:127.0.0.1]/', false],
    ['over 2,048 characters', `https://example.com/${'a'.repeat(2_030)}`, false],
    ['ftp even with private targets', 'ftp://10.0.0.1/', true],
    ['userinfo even with private targets', 'http://u:p@10.0.0.1/', true],
  ])('refuses %s', (_name, url, allowPrivate) => {
    expect(checkWebhookUrl(url, allowPrivate)).toMatch(/./);
  });

  it.each([
    ['https://example.com/hooks', false],
    ['https://93.184.216.34:8443/in?site=a', false],
    [`https://example.com/${'a'.repeat(2_028)}`, false],
    ['http://127.0.0.1:8080/hooks', true],
    ['https://[::1]/hooks', true],
  ])('accepts %s (private targets allowed: %s)', (url, allowPrivate) => {
    expect(checkWebhookUrl(url, allowPrivate)).toBeUndefined();
  });
});

describe('newWebhookSecret', () => {
  it('makes a Standard Webhooks secret of 32 random bytes', () => {
    const secret = newWebhookSecret();
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/);
    expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32);
    expect(() => new Webhook(secret)).not.toThrow();
    expect(newWebhookSecret()).not.toBe(secret);
  });
});
