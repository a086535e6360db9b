// Webhook deliveries and feed events read by the ecosystem's own tools, as a receiver that
// follows the standards reads them: the official CloudEvents SDK (`cloudevents`, `HTTP.toEvent` on
// the headers and body a real server sent), the Standard Webhooks library (`standardwebhooks`) for
// the signature, and the CloudEvents Sequence extension's rule for `sequence`: a string whose
// lexicographic order is the events' order (more than 9 events, so that "10" before "2" would show).
import { createServer, type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type ChangeEvent, createClient, type UserAccountsClient } from '@user-accounts/client';
import { processes } from '@user-accounts/server/testing/processes';
import { mintToken } from '@user-accounts/server/tokens';
import { CloudEvent, HTTP } from 'cloudevents';
import { Webhook } from 'standardwebhooks';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { TEST_HASHES } from './targets.ts';

const procs = processes();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});
afterAll(() => procs.cleanup());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

interface Delivery {
  headers: Record<string, string>;
  /** The body as it came, bytes decoded as UTF-8 and nothing else. */
  body: string;
}

/** Keeps every request as it arrived (headers and body) and answers 204. */
async function recordingReceiver() {
  const deliveries: Delivery[] = [];
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      const headers: Record<string, string> = {};
      for (const [name, value] of Object.entries(req.headers as IncomingHttpHeaders)) {
        if (typeof value === 'string') headers[name] = value;
      }
      deliveries.push({ headers, body: Buffer.concat(chunks).toString('utf8') });
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(() => new Promise((resolve) => server.close(() => resolve())));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`, deliveries };
}

async function feedOf(api: UserAccountsClient, after = '0'): Promise<ChangeEvent[]> {
  const events: ChangeEvent[] = [];
  for (;;) {
    const { data, error } = await api.GET('/api/1/events', { params: { query: { after, limit: 5 } } });
    expect(error).toBeUndefined();
    events.push(...data!.result.events);
    if (data!.result.events.length === 0) return events;
    after = data!.result.next;
  }
}

/** The ids in the order a receiver following the Sequence extension puts events in: by `sequence`, as strings. */
const idsBySequenceString = (events: { id: string; sequence: string }[]) =>
  [...events].sort((a, b) => (a.sequence < b.sequence ? -1 : a.sequence > b.sequence ? 1 : 0)).map((e) => e.id);

describe('change events, read with the CloudEvents SDK and Standard Webhooks', () => {
  it('delivers CloudEvents HTTP messages in structured mode, signed per Standard Webhooks, ordered by sequence as strings', async () => {
    const receiver = await recordingReceiver();
    const token = mintToken();
    const env = {
      DATA_DIR: await procs.migratedDataDir(),
      ...TEST_HASHES,
      API_TOKENS: token,
      WEBHOOK_ALLOW_PRIVATE: 'true',
    };
    const server = procs.server(env);
    await server.ready;
    const added = await procs.cli(['webhook', 'add', '--site', 'default', '--url', receiver.url], env);
    expect(added.code, added.stderr).toBe(0);
    const secret = /(whsec_[A-Za-z0-9+/=]+)/.exec(added.stdout)![1]!;
    const endpointId = /Added webhook ([0-9a-f-]{36})/.exec(added.stdout)![1]!;
    const api = createClient({ baseUrl: server.baseUrl, token });

    // 11 accounts, then an update and a delete: 13 events, numbered 1 to 13.
    const ids: string[] = [];
    for (let i = 0; i < 11; i++) {
      const { data } = await api.POST('/api/1/user/create', {
        body: { email: `cloud-${i}@example.com`, password: `a long passphrase ${i}`, name: `Cloud ${i}` },
      });
      ids.push(data!.result._userId);
    }
    expect(
      (await api.POST('/api/1/user/update', { body: { _userId: ids[0]!, phone: '+44 20 7946 0018' } })).response.status,
    ).toBe(200);
    expect((await api.DELETE('/api/1/user/delete', { body: { _userId: ids[1]! } })).response.status).toBe(200);

    const feed = await feedOf(api);
    expect(feed).toHaveLength(13);
    // The dense per-site order, as numbers, is still what it was: 1, 2, … 13.
    expect(feed.map((e) => Number(e.sequence))).toEqual(Array.from({ length: 13 }, (_, i) => i + 1));

    // Each feed event is a structured-mode CloudEvent for the SDK, and valid by its rules.
    for (const event of feed) {
      const parsed = HTTP.toEvent({
        headers: { 'content-type': 'application/cloudevents+json' },
        body: JSON.stringify(event),
      });
      expect(parsed).toBeInstanceOf(CloudEvent);
      expect((parsed as CloudEvent).validate()).toBe(true);
      expect(new CloudEvent(event as never).validate()).toBe(true);
    }
    // A receiver that follows the Sequence extension sorts by the string: the feed's order.
    expect(idsBySequenceString(feed)).toEqual(feed.map((e) => e.id));

    // `after` takes an event's `sequence` as it came (and the old short form names the same place).
    const tail = feed.slice(10).map((e) => e.id);
    expect((await feedOf(api, feed[9]!.sequence)).map((e) => e.id)).toEqual(tail);
    expect((await feedOf(api, '10')).map((e) => e.id)).toEqual(tail);
    // The client's iterator follows it, and restarts from a kept `sequence`.
    const followed: ChangeEvent[] = [];
    const stop = new AbortController();
    for await (const event of api.followEvents({ after: feed[2]!.sequence, limit: 4, wait: 1, signal: stop.signal })) {
      followed.push(event);
      if (followed.length === 10) stop.abort();
    }
    expect(followed.map((e) => e.id)).toEqual(feed.slice(3).map((e) => e.id));

    const deadline = Date.now() + 20_000;
    const delivered = () => new Set(receiver.deliveries.map((d) => d.headers['webhook-id']));
    while (feed.some((e) => !delivered().has(e.id)) && Date.now() < deadline) await sleep(100);
    expect(receiver.deliveries).toHaveLength(13);

    const webhook = new Webhook(secret);
    const received: CloudEvent[] = [];
    for (const delivery of receiver.deliveries) {
      // The CloudEvents SDK reads the HTTP message as it came…
      const parsed = HTTP.toEvent({ headers: delivery.headers, body: delivery.body });
      expect(delivery.headers['content-type']).toBe('application/cloudevents+json');
      expect(parsed).toBeInstanceOf(CloudEvent);
      const event = parsed as CloudEvent;
      expect(event.validate()).toBe(true);
      // …and the Standard Webhooks library verifies its signature over those same bytes.
      const verified = webhook.verify(delivery.body, delivery.headers) as ChangeEvent;
      expect(verified.id).toBe(delivery.headers['webhook-id']);
      expect(event.id).toBe(delivery.headers['webhook-id']);
      const same = feed.find((e) => e.id === event.id)!;
      expect(verified).toEqual(same);
      expect({
        specversion: event.specversion,
        id: event.id,
        source: event.source,
        type: event.type,
        subject: event.subject,
        time: event.time,
        datacontenttype: event.datacontenttype,
        sequence: event.sequence,
        data: event.data,
      }).toEqual({
        specversion: same.specversion,
        id: same.id,
        source: same.source,
        type: same.type,
        subject: same.subject,
        time: same.time,
        datacontenttype: same.datacontenttype,
        sequence: same.sequence,
        data: same.data,
      });
      received.push(event);
    }
    // Sorted by `sequence` as strings, the deliveries come in the feed's order.
    expect(idsBySequenceString(received.map((e) => ({ id: e.id, sequence: String(e.sequence) })))).toEqual(
      feed.map((e) => e.id),
    );

    // The CLI takes a `sequence` as it came: a replay from the 11th event sends the last three again.
    const replayed = await procs.cli(['webhook', 'replay', endpointId, '--from', feed[10]!.sequence], env);
    expect(replayed.code, replayed.stderr).toBe(0);
    expect(replayed.stdout).toMatch(/^Queued 3 deliveries/);
  }, 180_000);
});
