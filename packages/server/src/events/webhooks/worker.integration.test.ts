// The webhook sender over a real embedded database and a real receiver on 127.0.0.1: the order
// per account, the type filter, giving up, disabling an endpoint, the address check at delivery
// time, and replay. The contract tests (webhooks.system.test.ts) cover processes, kills and two servers.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { type SQL, sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { type Database, type Db, rows } from '../../db/client.ts';
import { type EventType, enqueueEvents } from '../../kernel/outbox.ts';
import { inWrite } from '../../kernel/unit-of-work.ts';
import { silentLogger } from '../../testing/loggers.ts';
import { openMigratedPglite } from '../../testing/templates.ts';
import { EVENTS_CHANNEL, pruneEvents, formatSequence as seq } from '../queue.ts';
import { sequenceEvents, startSequencer } from '../sequencer.ts';
import { createWake } from '../wake.ts';
import { addEndpoint, replay } from './endpoints.ts';
import { claim, fanOut, retryDelayMs, startWebhookWorker, type WebhookWorker } from './worker.ts';

let database: Database;
let receiver: Server;
let url: string;
let answer = 204;
const got: { sequence: string; type: string; subject: string }[] = [];
const workers: WebhookWorker[] = [];
let sites = 0;

beforeAll(async () => {
  database = await openMigratedPglite();
  receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (chunk: Buffer) => {
      body += chunk.toString();
    });
    req.on('end', () => {
      if (answer < 300) got.push(JSON.parse(body) as (typeof got)[number]);
      res.writeHead(answer).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/hooks`;
});
afterEach(async () => {
  await Promise.all(workers.splice(0).map((w) => w.stop()));
  got.length = 0;
  answer = 204;
});
afterAll(async () => {
  receiver.close();
  await database.close();
});

const db = () => database.db;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A site of its own, with accounts to write events about. */
async function site(accounts: number) {
  const name = `wh-${sites++}`;
  const ids: string[] = [];
  for (let i = 0; i < accounts; i++) {
    const [row] = await rows<{ id: string }>(
      db(),
      sql`insert into users (site, email, name, origin) values (${name}, ${`${name}-${i}@example.com`}, 'Ada', 'api') returning id::text as id`,
    );
    ids.push(row!.id);
  }
  return { name, ids };
}

async function write(siteName: string, events: [EventType, string][]) {
  await db().transaction((tx) =>
    enqueueEvents(
      tx,
      siteName,
      events.map(([type, userId]) => ({ type, userId })),
    ),
  );
  await sequenceEvents(db());
}

const worker = (allowPrivate = true, on: Db = db()) => {
  const w = startWebhookWorker({ db: on, logger: silentLogger(), allowPrivate, pollMs: 50, timeoutMs: 2_000 });
  workers.push(w);
  return w;
};

async function until(check: () => Promise<boolean> | boolean, ms = 5_000) {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error('not within the time');
    await sleep(20);
  }
}

const dialect = new PgDialect();
const isClaim = (text: string) => text.includes('set leased_until = now() +');

/** `on`, calling `each` with every statement's text before running it, in transactions too. */
function watched(on: Db, each: (text: string) => Promise<void> | void): Db {
  return new Proxy(on, {
    get(target, key, receiver) {
      if (key === 'execute')
        return async (query: SQL) => {
          await each(dialect.sqlToQuery(query).sql);
          return target.execute(query);
        };
      if (key === 'transaction')
        return (run: (tx: Db) => Promise<unknown>) => target.transaction((tx) => run(watched(tx as Db, each)));
      return Reflect.get(target, key, receiver);
    },
  }) as Db;
}

/**
 * The database as the worker sees it, holding the first statement that `matches` until
 * `release()`, and counting claims: a stop() can then land in the middle of a cycle.
 */
function held(matches: (text: string) => boolean) {
  let release = () => {};
  const opened = new Promise<void>((resolve) => {
    release = resolve;
  });
  let arrive = () => {};
  const reached = new Promise<void>((resolve) => {
    arrive = resolve;
  });
  let holding = true;
  const gate = { claims: 0, reached, release: () => release(), db: db() };
  gate.db = watched(db(), async (text) => {
    if (holding && matches(text)) {
      holding = false;
      arrive();
      await opened;
    }
    if (isClaim(text)) gate.claims++;
  });
  return gate;
}

/** Starts a worker on the gated database, and stops it while the gated statement is held. */
async function stopWhileHeld(gate: ReturnType<typeof held>) {
  const w = worker(true, gate.db);
  await gate.reached;
  const stopping = w.stop();
  gate.release();
  await stopping;
}

/** Until the endpoint's deliveries are all recorded delivered: a receiver has one before its sender records it. */
const recorded = (endpointId: string) =>
  until(async () => (await attemptsOf(endpointId)).every((d) => d.state === 'delivered'));

/** Disables the endpoints earlier tests left, whose deliveries would take part in a claim. */
async function onlyTheseEndpoints() {
  await db().execute(sql`update webhook_endpoints set disabled_at = now() where disabled_at is null`);
}

const attemptsOf = (endpointId: string) =>
  rows<{ state: string; attempts: number; leased: boolean }>(
    db(),
    sql`select state, attempts, leased_until is not null as leased from webhook_deliveries where endpoint_id = ${endpointId}`,
  );

describe('the webhook sender', () => {
  it('claims only the earliest pending delivery of each account, so an account’s events go out in order', async () => {
    const s = await site(2);
    await addEndpoint(db(), { site: s.name, url, types: ['user.*'] });
    await write(s.name, [
      ['user.created', s.ids[0]!],
      ['user.created', s.ids[1]!],
      ['user.updated', s.ids[0]!],
    ]);
    await fanOut(db());
    const first = await claim(db(), 10, 15);
    expect(first.filter((d) => d.site === s.name).map((d) => d.seq)).toEqual(['1', '2']);
    // Sequence 3 waits for 1, even once 1's lease has run out and 2 is gone.
    const second = await claim(db(), 10, 15);
    expect(second.filter((d) => d.site === s.name)).toEqual([]);
  });

  it("serves sites and endpoints in turn: a backlog on one endpoint does not delay another's first delivery", async () => {
    await onlyTheseEndpoints();
    const evil = await site(10);
    const shop = await site(1);
    const two = await site(4);
    const e = await addEndpoint(db(), { site: evil.name, url, types: ['*'] });
    const s = await addEndpoint(db(), { site: shop.name, url, types: ['*'] });
    const t1 = await addEndpoint(db(), { site: two.name, url, types: ['*'] });
    const t2 = await addEndpoint(db(), { site: two.name, url, types: ['*'] });
    await write(
      evil.name,
      evil.ids.map((id) => ['user.created', id]),
    );
    await write(
      two.name,
      two.ids.map((id) => ['user.created', id]),
    );
    await write(shop.name, [['user.created', shop.ids[0]!]]);
    await fanOut(db());
    // Three slots free: one for each site's oldest, though evil's 10 and two's 8 are older than shop's.
    const first = await claim(db(), 3, 15, 3);
    expect(first.map((d) => d.site).sort()).toEqual([evil.name, shop.name, two.name].sort());
    // A site's endpoints take turns too: two's next is its other endpoint's first.
    const second = await claim(db(), 2, 15, 3);
    const otherOfTwo = first.find((d) => d.site === two.name)!.endpointId === t1.id ? t2.id : t1.id;
    expect(second.map((d) => d.endpointId).sort()).toEqual([e.id, otherOfTwo].sort());
    expect(first.map((d) => d.endpointId)).toContain(s.id);
  });

  it('leases at most perEndpoint deliveries of an endpoint at once, across claims (servers), until their leases end', async () => {
    await onlyTheseEndpoints();
    const evil = await site(10);
    const { id } = await addEndpoint(db(), { site: evil.name, url, types: ['*'] });
    await write(
      evil.name,
      evil.ids.map((user) => ['user.created', user]),
    );
    await fanOut(db());
    expect((await claim(db(), 16, 15, 3)).length).toBe(3);
    // Another server with 16 free slots: nothing more for this endpoint while those are in flight.
    expect(await claim(db(), 16, 15, 3)).toEqual([]);
    // One attempt recorded (retried later): room for one more.
    await db().execute(sql`update webhook_deliveries set leased_until = null, next_attempt_at = now() + interval '1 hour'
      where id = (select min(id) from webhook_deliveries where endpoint_id = ${id})`);
    expect((await claim(db(), 16, 15, 3)).length).toBe(1);
    // A server that died: its leases run out, and their deliveries are claimed again, still 3 at most.
    await db().execute(sql`update webhook_deliveries set leased_until = now() - interval '1 second'
      where endpoint_id = ${id} and leased_until is not null`);
    expect((await claim(db(), 16, 15, 3)).length).toBe(3);
    const [leased] = await rows<{ n: number }>(
      db(),
      sql`select count(*)::int as n from webhook_deliveries where endpoint_id = ${id} and leased_until > now()`,
    );
    expect(leased!.n).toBe(3);
  });

  it('sends only the types an endpoint asked for', async () => {
    const s = await site(1);
    await addEndpoint(db(), { site: s.name, url, types: ['user.deleted'] });
    await write(s.name, [
      ['user.created', s.ids[0]!],
      ['user.deleted', s.ids[0]!],
    ]);
    worker();
    await until(() => got.some((e) => e.subject === s.ids[0]));
    await sleep(200);
    expect(got.filter((e) => e.subject === s.ids[0]).map((e) => e.type)).toEqual(['user.deleted']);
  });

  it('retries a failed delivery later, and gives it up once it has failed for 3 days since its first attempt', async () => {
    const s = await site(1);
    const { id } = await addEndpoint(db(), { site: s.name, url, types: ['user.*'] });
    answer = 500;
    await write(s.name, [['user.created', s.ids[0]!]]);
    worker();
    const state = async () =>
      (
        await rows<{ state: string; attempts: number; last_status: number | null; next: boolean }>(
          db(),
          sql`select state, attempts, last_status, next_attempt_at > now() as next from webhook_deliveries where endpoint_id = ${id}`,
        )
      )[0];
    await until(async () => (await state())?.attempts === 1 && (await state())?.last_status === 500);
    expect(await state()).toMatchObject({ state: 'pending', next: true });
    // Made 4 days ago but first tried just now (it waited behind an earlier delivery): retried still.
    await db().execute(
      sql`update webhook_deliveries set created_at = now() - interval '4 days', next_attempt_at = now() where endpoint_id = ${id}`,
    );
    await until(async () => (await state())?.attempts === 2 && (await state())?.next === true);
    expect(await state()).toMatchObject({ state: 'pending', last_status: 500 });
    await db().execute(
      sql`update webhook_deliveries set first_attempt_at = now() - interval '3 days 1 minute', next_attempt_at = now() where endpoint_id = ${id}`,
    );
    await until(async () => (await state())?.state === 'failed');
    expect(got).toEqual([]);
  });

  it('disables an endpoint whose every attempt failed for 5 days, and says so in the audit trail', async () => {
    const s = await site(1);
    const { id } = await addEndpoint(db(), { site: s.name, url, types: ['user.*'] });
    answer = 503;
    await db().execute(
      sql`update webhook_endpoints set failing_since = now() - interval '5 days 1 minute' where id = ${id}`,
    );
    await write(s.name, [['user.created', s.ids[0]!]]);
    worker();
    const endpoint = async () =>
      (
        await rows<{ disabled: boolean; reason: string | null }>(
          db(),
          sql`select disabled_at is not null as disabled, disabled_reason as reason from webhook_endpoints where id = ${id}`,
        )
      )[0]!;
    await until(async () => (await endpoint()).disabled);
    expect((await endpoint()).reason).toMatch(/failed for 5 days; last: answered 503/);
    const audit = await rows<{ operation: string; outcome: string }>(
      db(),
      sql`select operation, outcome from audit_log where site = ${s.name} and token_id = 'webhooks'`,
    );
    expect(audit).toEqual([{ operation: 'webhook', outcome: expect.stringMatching(/^endpoint disabled: /) }]);
    // A replay switches it back on; its delivery, still pending, is sent (not a second one).
    answer = 204;
    expect((await replay(db(), id, 1))?.made).toBe(0);
    await db().execute(sql`update webhook_deliveries set next_attempt_at = now() where endpoint_id = ${id}`);
    await until(() => got.some((e) => e.subject === s.ids[0]));
    expect((await endpoint()).disabled).toBe(false);
  });

  it('refuses, at delivery time, a host name that resolves to a private address', async () => {
    const s = await site(1);
    const port = (receiver.address() as AddressInfo).port;
    const { id } = await addEndpoint(db(), { site: s.name, url: `https://localhost:${port}/hooks`, types: ['user.*'] });
    await write(s.name, [['user.created', s.ids[0]!]]);
    worker(false);
    const last = async () =>
      (
        await rows<{ error: string | null }>(
          db(),
          sql`select last_error as error from webhook_deliveries where endpoint_id = ${id}`,
        )
      )[0]?.error;
    await until(async () => (await last()) != null);
    expect(await last()).toMatch(/127\.0\.0\.1|::1|private|loopback/i);
    expect(got).toEqual([]);
  });

  it('replays delivered events from a sequence number on', async () => {
    const s = await site(1);
    const { id } = await addEndpoint(db(), { site: s.name, url, types: ['user.*'] });
    await write(s.name, [
      ['user.created', s.ids[0]!],
      ['user.updated', s.ids[0]!],
      ['user.updated', s.ids[0]!],
    ]);
    worker();
    await until(() => got.filter((e) => e.subject === s.ids[0]).length === 3);
    await recorded(id); // else one still pending is (rightly) not replayed
    expect(await replay(db(), id, 2)).toEqual({ made: 2, prunedThrough: 0 });
    await until(() => got.filter((e) => e.subject === s.ids[0]).length === 5);
    expect(got.filter((e) => e.subject === s.ids[0]).map((e) => e.sequence)).toEqual([
      seq(1),
      seq(2),
      seq(3),
      seq(2),
      seq(3),
    ]);
  });

  it('says how far the retention removed events when a replay starts before them', async () => {
    const s = await site(1);
    const { id } = await addEndpoint(db(), { site: s.name, url, types: ['user.*'] });
    await write(s.name, [
      ['user.created', s.ids[0]!],
      ['user.updated', s.ids[0]!],
      ['user.updated', s.ids[0]!],
    ]);
    worker();
    await until(() => got.filter((e) => e.subject === s.ids[0]).length === 3);
    await recorded(id);
    await db().execute(sql`update events set time = now() - interval '8 days' where site = ${s.name} and seq <= 2`);
    await pruneEvents(db(), 7 * 86_400_000);
    expect(await replay(db(), id, 1)).toEqual({ made: 1, prunedThrough: 2 });
  });

  it('replays no further than the events the endpoint has had, once whole batches of them were pruned', async () => {
    const s = await site(1);
    const { id } = await addEndpoint(db(), { site: s.name, url, types: ['user.*'] });
    // Each write numbered by a run of its own: a batch each.
    for (const type of ['user.created', 'user.updated', 'user.updated'] as const)
      await write(s.name, [[type, s.ids[0]!]]);
    worker();
    await until(() => got.filter((e) => e.subject === s.ids[0]).length === 3);
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    // Two more the endpoint has not had (no sender running), and the first batch pruned.
    for (const type of ['user.updated', 'user.updated'] as const) await write(s.name, [[type, s.ids[0]!]]);
    await db().execute(sql`update events set time = now() - interval '8 days' where site = ${s.name} and seq <= 1`);
    await pruneEvents(db(), 7 * 86_400_000);
    expect(await replay(db(), id, 1)).toEqual({ made: 2, prunedThrough: 1 });
    const [queued] = await rows<{ seqs: string }>(
      db(),
      sql`select string_agg(seq::text, ',' order by seq) as seqs from webhook_deliveries
        where endpoint_id = ${id} and state = 'pending'`,
    );
    expect(queued!.seqs).toBe('2,3');
  });

  it('replays no event that is still pending: each is delivered once when the receiver is back', async () => {
    const s = await site(1);
    const { id } = await addEndpoint(db(), { site: s.name, url, types: ['user.*'] });
    answer = 500;
    await write(s.name, [
      ['user.created', s.ids[0]!],
      ['user.updated', s.ids[0]!],
    ]);
    worker();
    const attempts = async () =>
      (
        await rows<{ n: number }>(
          db(),
          sql`select coalesce(sum(attempts), 0)::int as n from webhook_deliveries where endpoint_id = ${id}`,
        )
      )[0]!.n;
    await until(async () => (await attempts()) >= 1);
    expect((await replay(db(), id, 1))?.made).toBe(0);
    answer = 204;
    await db().execute(sql`update webhook_deliveries set next_attempt_at = now() where endpoint_id = ${id}`);
    await until(() => got.filter((e) => e.subject === s.ids[0]).length === 2);
    await sleep(300);
    expect(got.filter((e) => e.subject === s.ids[0]).map((e) => e.sequence)).toEqual([seq(1), seq(2)]);
  });

  it('claims nothing once stop() is called, even in a cycle already under way', async () => {
    const s = await site(1);
    const { id } = await addEndpoint(db(), { site: s.name, url, types: ['user.*'] });
    await write(s.name, [['user.created', s.ids[0]!]]);
    const gate = held((text) => text.includes('cross join lateral')); // the fan-out, before the claim
    await stopWhileHeld(gate);
    await sleep(200);
    expect(gate.claims).toBe(0);
    expect(await attemptsOf(id)).toEqual([{ state: 'pending', attempts: 0, leased: false }]);
    expect(got).toEqual([]);
  });

  it('waits in stop() for what a claim under way took: sent and recorded, none left leased', async () => {
    const s = await site(1);
    const { id } = await addEndpoint(db(), { site: s.name, url, types: ['user.*'] });
    await write(s.name, [['user.created', s.ids[0]!]]);
    const gate = held(isClaim);
    await stopWhileHeld(gate);
    expect(await attemptsOf(id)).toEqual([{ state: 'delivered', attempts: 1, leased: false }]);
    expect(got.map((e) => e.subject)).toContain(s.ids[0]);
    const claims = gate.claims;
    await sleep(200);
    expect(gate.claims).toBe(claims);
  });

  it('runs no statement for a notification about a site without endpoints, and reads them again when told one was added', async () => {
    const hooked = await site(1);
    const quiet = await site(1);
    const wake = createWake();
    let statements = 0;
    const counting = watched(db(), () => {
      statements++;
    });
    // No poll within the test: only notifications make it work.
    const w = startWebhookWorker({ db: counting, logger: silentLogger(), allowPrivate: true, wake, pollMs: 600_000 });
    workers.push(w);
    await until(() => statements >= 3); // its first cycle: the endpoints, a fan-out, a claim
    // Until its first cycle is over (under load it outlasts a fixed pause): no statement for 300 ms.
    for (let seen = -1; seen !== statements; ) {
      seen = statements;
      await sleep(300);
    }
    const before = statements;
    for (let i = 0; i < 5; i++) wake.notify(quiet.name);
    await sleep(100);
    expect(statements).toBe(before);

    await addEndpoint(db(), { site: hooked.name, url, types: ['*'] });
    wake.notify(); // what addEndpoint's notification, with no site, becomes at the listener
    await write(hooked.name, [['user.created', hooked.ids[0]!]]);
    wake.notify(hooked.name);
    await until(() => got.some((e) => e.subject === hooked.ids[0]));
  });

  it('delivers a write on its commit, with no poll on the path: the sequencer and the sender woken, also for a commit during a run', async () => {
    // Issue 63: neither polls within the test (10 minutes), so every delivery came by a wake-up:
    // the commit's kick of the sequencer, its NOTIFY heard by the listener, the sender's wake.
    await onlyTheseEndpoints();
    const s = await site(3);
    const endpoint = await addEndpoint(db(), { site: s.name, url, types: ['*'] });
    const wake = createWake();
    const listening = await database.listen(EVENTS_CHANNEL, {
      notified: (site) => wake.notify(site === '' ? undefined : site),
      confirmed: () => {},
      live: () => {},
    });
    // The hold point: the sequencer's first run held once its transaction committed (before the
    // run ends), so that a commit meanwhile must be numbered by a run of its own, started when
    // that one ends (not by the next poll).
    let releaseRun = () => {};
    const runHeld = new Promise<void>((resolve) => {
      releaseRun = resolve;
    });
    let runReached = () => {};
    const inRun = new Promise<void>((resolve) => {
      runReached = resolve;
    });
    let runs = 0;
    const sequencing = new Proxy(db(), {
      get(target, key, receiver) {
        if (key === 'transaction')
          return async (work: (tx: Db) => Promise<unknown>) => {
            const done = await target.transaction((tx) => work(tx as Db));
            if (runs++ === 0) {
              runReached();
              await runHeld;
            }
            return done;
          };
        return Reflect.get(target, key, receiver);
      },
    }) as Db;
    const sequencer = startSequencer(
      sequencing,
      (error) => {
        throw error;
      },
      600_000,
    );
    const w = startWebhookWorker({ db: db(), logger: silentLogger(), allowPrivate: true, wake, pollMs: 600_000 });
    workers.push(w);
    const update = (userId: string) =>
      inWrite(
        { site: s.name, actor: 'test', requestId: `wake-${userId}` },
        { db: db(), sequencer },
        'update',
        { userId, status: 200, outcome: 'user updated', changed: ['name'] },
        async () => userId,
      );
    const delivered = (userId: string) => until(() => got.some((e) => e.subject === userId), 10_000);
    try {
      const started = performance.now();
      await update(s.ids[0]!);
      await inRun; // numbered and committed; the run not ended yet
      await delivered(s.ids[0]!);
      const first = performance.now() - started;
      // A commit while the run is held: it waits for no poll, only for that run to end.
      await update(s.ids[1]!);
      releaseRun();
      await delivered(s.ids[1]!);
      // And one after it, on an idle sequencer again.
      await update(s.ids[2]!);
      await delivered(s.ids[2]!);
      expect(runs).toBe(3);
      // Well within the polls' 10 minutes (and the 1 s and 100 ms they are in production).
      expect(first).toBeLessThan(5_000);
      await recorded(endpoint.id);
    } finally {
      releaseRun();
      await sequencer.stop();
      await listening.close();
    }
  });

  it('backs off exponentially with jitter, up to an hour', () => {
    const policy = { baseMs: 1_000, maxMs: 3_600_000, giveUpMs: 0, disableAfterMs: 0 };
    expect(retryDelayMs(1, policy, () => 0)).toBe(500);
    expect(retryDelayMs(1, policy, () => 1)).toBe(1_000);
    expect(retryDelayMs(4, policy, () => 1)).toBe(8_000);
    expect(retryDelayMs(30, policy, () => 1)).toBe(3_600_000);
  });
});
