// The event queue (events/) and the feed that reads it (this route) over a real embedded
// database: numbering per site, a rollback giving its numbers back, today's numbers carried over
// by the migrations, the retention (events pruned, a reader behind them told 410), and what wakes
// a long-poll. Here beside the route rather than in events/, since it reads through the route.

import { randomUUID } from 'node:crypto';
import { cpSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type SQL, sql } from 'drizzle-orm';
import { migrate } from 'drizzle-orm/postgres-js/migrator';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../config/env.ts';
import { type Database, type Db, openPglite, openPostgres, rows } from '../../db/client.ts';
import {
  EVENTS_CHANNEL,
  feedBounds,
  PRUNE_BATCH,
  pruneEvents,
  readEvents,
  formatSequence as seq,
} from '../../events/queue.ts';
import { numberSite, SEQUENCE_BATCH, sequenceEvents, startSequencer } from '../../events/sequencer.ts';
import { createWake, type Wake } from '../../events/wake.ts';
import { enqueueEvents } from '../../kernel/outbox.ts';
import { MIGRATIONS_DIR } from '../../resources.ts';
import { openMigratedPglite } from '../../testing/templates.ts';
import { problemOf, type TestRow, testPipeline } from '../testing.ts';
import { listEvents } from './list-events.ts';

let database: Database;
beforeAll(async () => {
  database = await openMigratedPglite();
});
afterAll(() => database.close());

async function site(accounts: number, on = database) {
  // Unique on a PostgreSQL that earlier runs wrote to as well.
  const name = `ev-${randomUUID().slice(0, 8)}`;
  const ids: string[] = [];
  for (let i = 0; i < accounts; i++) {
    const [row] = await rows<{ id: string }>(
      on.db,
      sql`insert into users (site, email, name, origin) values (${name}, ${`${name}-${i}@example.com`}, 'Ada', 'api') returning id::text as id`,
    );
    ids.push(row!.id);
  }
  return { name, ids };
}

async function created(siteName: string, ids: string[], on = database) {
  await on.db.transaction((tx) =>
    enqueueEvents(
      tx,
      siteName,
      ids.map((userId) => ({ type: 'user.created' as const, userId })),
    ),
  );
  await sequenceEvents(on.db);
}

function feed(siteName: string, on = database, wake?: Wake) {
  const app = testPipeline([listEvents as TestRow], {
    deps: { database: on, ...(wake === undefined ? {} : { wake }) },
    vars: { token: { id: 't', site: siteName, scopes: ['events'] } as never },
  });
  return (query: string) => app.request(`${listEvents.path}${query}`);
}

/**
 * A database as a server of an earlier version left it (the migrations before `tag`), for `body`
 * to write in as that version did and then migrate (`old.migrate()`).
 */
async function beforeMigration(tag: string, body: (old: Database) => Promise<void>) {
  const old = await openPglite(undefined);
  const folder = mkdtempSync(join(tmpdir(), 'ua-migrations-'));
  try {
    cpSync(MIGRATIONS_DIR, folder, { recursive: true });
    const journal = JSON.parse(readFileSync(join(folder, 'meta', '_journal.json'), 'utf8')) as {
      entries: { tag: string }[];
    };
    journal.entries = journal.entries.filter((e) => e.tag < tag);
    writeFileSync(join(folder, 'meta', '_journal.json'), JSON.stringify(journal));
    await migrate(old.db, { migrationsFolder: folder });
    await body(old);
  } finally {
    rmSync(folder, { recursive: true, force: true });
    await old.close();
  }
}

describe('the outbox', () => {
  it('numbers the events of the last writes when the sequencer stops, not at some later start', async () => {
    const s = await site(1);
    const sequencer = startSequencer(
      database.db,
      (error) => {
        throw error;
      },
      600_000,
    );
    await database.db.transaction((tx) => enqueueEvents(tx, s.name, [{ type: 'user.created', userId: s.ids[0]! }]));
    sequencer.kick();
    await sequencer.stop();
    expect((await readEvents(database.db, s.name, undefined, 10)).map((e) => e.sequence)).toEqual([seq(1)]);
  });

  it('numbers each site on its own, and a rolled-back write gives its numbers back', async () => {
    const a = await site(3);
    const b = await site(1);
    await created(a.name, a.ids.slice(0, 2));
    await created(b.name, b.ids);
    await expect(
      database.db.transaction(async (tx) => {
        await enqueueEvents(tx, a.name, [{ type: 'user.created', userId: a.ids[2]! }]);
        throw new Error('the write failed after its event');
      }),
    ).rejects.toThrow('the write failed');
    await created(a.name, [a.ids[2]!]);
    expect((await readEvents(database.db, a.name, undefined, 10)).map((e) => [e.sequence, e.subject])).toEqual([
      [seq(1), a.ids[0]],
      [seq(2), a.ids[1]],
      [seq(3), a.ids[2]],
    ]);
    expect((await readEvents(database.db, b.name, undefined, 10)).map((e) => e.sequence)).toEqual([seq(1)]);
  });

  it('carries over, in migration 0015, the numbers 0014 gave, numbers what it had not, and goes on densely', async () => {
    await beforeMigration('0015', async (old) => {
      const [user] = await rows<{ id: string }>(
        old.db,
        sql`insert into users (site, email, name, origin) values ('shop', 'a@example.com', 'Ada', 'api') returning id::text as id`,
      );
      // As servers of 0014 wrote: 300 numbered (two batches), the first 3 pruned, 2 not numbered
      // yet; and a site with nothing numbered yet.
      await old.db.execute(
        sql`insert into event_sequences (site, last, snapshot) values ('shop', 0, pg_current_snapshot())`,
      );
      const write = (site: string, n: number) =>
        old.db.execute(sql`insert into events (site, type, subject, data)
          select ${site}, 'user.updated', ${user!.id}::uuid, jsonb_build_object('i', i) from generate_series(1, ${n}) i`);
      await write('shop', 300);
      await old.db.execute(sql`select sequence_events()`);
      await old.db.execute(sql`delete from events where pos in (select pos from site_events('shop', 0, 3))`);
      await old.db.execute(sql`update event_sequences set pruned_through = 3 where site = 'shop'`);
      await write('shop', 2);
      await write('new', 1);
      await old.migrate();
      const shop = await readEvents(old.db, 'shop', 3, 1000);
      expect(shop.map((e) => e.sequence)).toEqual(Array.from({ length: 299 }, (_, i) => seq(i + 4)));
      expect(shop.map((e) => (e.data as { i: number }).i)).toEqual([
        ...Array.from({ length: 297 }, (_, i) => i + 4),
        1,
        2,
      ]);
      expect(await feedBounds(old.db, 'shop')).toEqual({ last: 302, prunedThrough: 3 });
      expect((await readEvents(old.db, 'new', undefined, 10)).map((e) => e.sequence)).toEqual([seq(1)]);
      await created('shop', [user!.id], old);
      await created('new', [user!.id], old);
      expect((await readEvents(old.db, 'shop', 302, 10)).map((e) => e.sequence)).toEqual([seq(303)]);
      expect((await readEvents(old.db, 'new', 1, 10)).map((e) => e.sequence)).toEqual([seq(2)]);
      // No PL/pgSQL of the events, nor transaction ids or snapshots, left in the tables.
      const [left] = await rows<{ functions: number; columns: number }>(
        old.db,
        sql`select (select count(*)::int from pg_proc where proname in ('sequence_events', 'number_site_events', 'site_events')) as functions,
          (select count(*)::int from information_schema.columns where table_schema = 'public'
            and data_type in ('xid8', 'pg_snapshot')) as columns`,
      );
      expect(left).toEqual({ functions: 0, columns: 0 });
    });
  }, 30_000);
});

describe('the feed', () => {
  it('is a pure read: it answers on a connection that may not write', async () => {
    const fresh = await openMigratedPglite();
    try {
      const s = await site(2, fresh);
      await created(s.name, s.ids, fresh);
      // One queued and not numbered yet: the read waits for the sequencer a while, writing nothing.
      await fresh.db.transaction((tx) => enqueueEvents(tx, s.name, [{ type: 'user.updated', userId: s.ids[0]! }]));
      await fresh.db.execute(sql`set default_transaction_read_only = on`);
      const answer = await feed(s.name, fresh)('?after=0');
      expect(answer.status).toBe(200);
      const page = (await answer.json()) as { result: { events: { sequence: string }[]; next: string } };
      expect(page.result.events.map((e) => e.sequence)).toEqual([seq(1), seq(2)]);
    } finally {
      await fresh.close();
    }
  }, 30_000);

  it('answers what its site had queued when it came, once numbered: a client reads its own writes', async () => {
    const s = await site(1);
    await database.db.transaction((tx) => enqueueEvents(tx, s.name, [{ type: 'user.created', userId: s.ids[0]! }]));
    const sequencer = startSequencer(
      database.db,
      (error) => {
        throw error;
      },
      600_000,
    );
    try {
      const app = testPipeline([listEvents as TestRow], {
        deps: { database, sequencer },
        vars: { token: { id: 't', site: s.name, scopes: ['events'] } as never },
      });
      const page = (await (await app.request(`${listEvents.path}?after=0`)).json()) as {
        result: { events: { sequence: string; subject: string }[] };
      };
      expect(page.result.events.map((e) => [e.sequence, e.subject])).toEqual([[seq(1), s.ids[0]]]);
    } finally {
      await sequencer.stop();
    }
  });
});

describe('the retention', () => {
  it('removes old events, and answers a reader behind them 410 events_expired, a reader without after from the oldest kept', async () => {
    const s = await site(4);
    await created(s.name, s.ids);
    await database.db.execute(
      sql`update events set time = now() - interval '8 days' where site = ${s.name} and seq <= 2`,
    );
    expect(await pruneEvents(database.db, 7 * 86_400_000)).toBeGreaterThanOrEqual(2);
    expect(await feedBounds(database.db, s.name)).toEqual({ last: 4, prunedThrough: 2 });

    const get = feed(s.name);
    for (const after of ['0', '1']) {
      const answer = await get(`?after=${after}`);
      expect(answer.status).toBe(410);
      const problem = await problemOf(answer);
      expect(problem.code).toBe('events_expired');
      expect(problem.detail).toContain('the oldest kept is 3');
    }
    const fromTwo = (await (await get('?after=2')).json()) as {
      result: { events: { sequence: string }[]; next: string };
    };
    expect(fromTwo.result.events.map((e) => e.sequence)).toEqual([seq(3), seq(4)]);
    const fromOldest = (await (await get('')).json()) as { result: { events: { sequence: string }[]; next: string } };
    expect(fromOldest.result.events.map((e) => e.sequence)).toEqual([seq(3), seq(4)]);
    expect(fromOldest.result.next).toBe(seq(4));
    expect((await get('?after=5')).status).toBe(400);

    // Filtered by account: a reader behind the pruned point is told 410 as well, even for an
    // account whose own events were all kept; from the point on, that account's events only.
    for (const after of ['0', '1']) {
      const answer = await get(`?after=${after}&subject=${s.ids[3]}`);
      expect(answer.status).toBe(410);
      expect((await problemOf(answer)).code).toBe('events_expired');
    }
    const filtered = (await (await get(`?after=2&subject=${s.ids[3]}`)).json()) as {
      result: { events: { sequence: string; subject: string }[]; next: string };
    };
    expect(filtered.result.events.map((e) => [e.sequence, e.subject])).toEqual([[seq(4), s.ids[3]]]);
    // A pruned account's filter: nothing kept, and next is where the site's feed stands.
    const prunedOnly = (await (await get(`?subject=${s.ids[0]}`)).json()) as {
      result: { events: unknown[]; next: string };
    };
    expect(prunedOnly.result).toEqual({ events: [], next: seq(4) });
  });

  it('removes only a prefix of the sequence: an old event after a recent one stays, so a reader sees no hole', async () => {
    const s = await site(5);
    await created(s.name, s.ids);
    // Times are when each write began: a long write can carry an older time than the one before it.
    await database.db.execute(
      sql`update events set time = now() - interval '8 days' where site = ${s.name} and seq in (1, 2, 4)`,
    );
    await pruneEvents(database.db, 7 * 86_400_000);
    expect(await feedBounds(database.db, s.name)).toEqual({ last: 5, prunedThrough: 2 });
    const fromTwo = (await (await feed(s.name)('?after=2')).json()) as { result: { events: { sequence: string }[] } };
    expect(fromTwo.result.events.map((e) => e.sequence)).toEqual([seq(3), seq(4), seq(5)]);
    // The two pruned take no place in a page.
    const oldest = (await (await feed(s.name)('?limit=2')).json()) as { result: { events: { sequence: string }[] } };
    expect(oldest.result.events.map((e) => e.sequence)).toEqual([seq(3), seq(4)]);
  });

  it(
    'numbers and prunes a backlog larger than one statement may take, in bounded statements',
    () => backlogInBoundedStatements(database),
    60_000,
  );

  it('is EVENTS_RETENTION, 7 days unless told, never under the 3 days of webhook retries', () => {
    expect(loadConfig({}).eventsRetentionMs).toBe(7 * 86_400_000);
    expect(loadConfig({ EVENTS_RETENTION: '72h' }).eventsRetentionMs).toBe(72 * 3_600_000);
    for (const bad of ['2d', '71h', 'week', '7']) {
      expect(() => loadConfig({ EVENTS_RETENTION: bad })).toThrow(/EVENTS_RETENTION must be/);
    }
  });
});

/** `on`, noting the count `n` each statement answers with (pruneEvents's: the events it removed). */
function countingStatements(on: Database) {
  const counts: number[] = [];
  const db = new Proxy(on.db, {
    get(target, key, receiver) {
      if (key !== 'execute') return Reflect.get(target, key, receiver);
      return async (query: SQL) => {
        const result = await target.execute(query);
        const [row] = result as unknown as { n?: unknown }[];
        if (typeof row?.n === 'number') counts.push(row.n);
        return result;
      };
    },
  }) as Db;
  return { db, counts };
}

/** A backlog, as after the sequencer stopped while an import wrote: numbered, then pruned, a batch per statement. */
async function backlogInBoundedStatements(on: Database) {
  const s = await site(1, on);
  const n = SEQUENCE_BATCH * 2 + 500;
  await on.db.execute(sql`insert into event_queue (site, type, subject, data)
    select ${s.name}, 'user.created', ${s.ids[0]!}::uuid, '{}'::jsonb from generate_series(1, ${n})`);
  // One run numbers one batch (what fits in statement_timeout); sequenceEvents runs until done.
  expect(await numberSite(on.db, s.name)).toBe(SEQUENCE_BATCH);
  expect(await sequenceEvents(on.db, s.name)).toBe(n - SEQUENCE_BATCH);
  const [dense] = await rows<{ count: number; min: string; max: string; distinct: number }>(
    on.db,
    sql`select count(*)::int as count, min(seq)::text as min, max(seq)::text as max, count(distinct seq)::int as distinct
      from events where site = ${s.name}`,
  );
  expect(dense).toEqual({ count: n, min: '1', max: String(n), distinct: n });
  await on.db.execute(sql`update events set time = now() - interval '8 days' where site = ${s.name}`);
  const pruning = countingStatements(on);
  // Other sites' old events too, on a PostgreSQL that other tests wrote to.
  expect(await pruneEvents(pruning.db, 7 * 86_400_000)).toBeGreaterThanOrEqual(n);
  expect(pruning.counts.length).toBeGreaterThanOrEqual(3);
  expect(Math.max(...pruning.counts)).toBeLessThanOrEqual(PRUNE_BATCH);
  expect(await feedBounds(on.db, s.name)).toEqual({ last: n, prunedThrough: n });
  const [left] = await rows<{ n: number }>(on.db, sql`select count(*)::int as n from events where site = ${s.name}`);
  expect(left!.n).toBe(0);
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A long-poll of site A through the route, woken as assemble.ts wires it (the notification names the
 * numbered site): B's write leaves it waiting its whole `wait`, A's own answers it at once rather
 * than at its next re-read.
 */
async function longPollWakesForItsOwnSiteOnly(on: Database) {
  const wake = createWake();
  let up = () => {};
  const listening = new Promise<void>((resolve) => {
    up = resolve;
  });
  const heard = await on.listen(EVENTS_CHANNEL, {
    notified: (payload) => wake.notify(payload === '' ? undefined : payload),
    live: (live) => live && up(),
    confirmed: () => {},
  });
  try {
    await listening;
    const a = await site(1, on);
    const b = await site(1, on);
    // When A's poll was woken before its wait ran out (the route re-reads every second anyway).
    const early: number[] = [];
    const watched: Wake = {
      ...wake,
      async next(ms, signal, forSite) {
        const started = performance.now();
        await wake.next(ms, signal, forSite);
        if (performance.now() - started < ms - 50) early.push(performance.now());
      },
    };
    const get = feed(a.name, on, watched);
    type Page = { result: { events: { sequence: string; subject: string }[]; next: string } };

    const started = performance.now();
    const quiet = get('?after=0&wait=2');
    await sleep(300);
    await created(b.name, b.ids, on);
    const answer = await quiet;
    expect(answer.status).toBe(200);
    expect(((await answer.json()) as Page).result).toEqual({ events: [], next: seq(0) });
    expect(performance.now() - started).toBeGreaterThanOrEqual(1_950);
    expect(early).toEqual([]);

    const woken = get('?after=0&wait=10');
    await sleep(300);
    const wrote = performance.now();
    await created(a.name, a.ids, on);
    const page = (await (await woken).json()) as Page;
    expect(page.result.events.map((e) => [e.sequence, e.subject])).toEqual([[seq(1), a.ids[0]]]);
    expect(performance.now() - wrote).toBeLessThan(1_000);
    expect(early).toHaveLength(1);
  } finally {
    await heard.close();
  }
}

describe('a long-poll', () => {
  it('is woken by its own site’s events only', () => longPollWakesForItsOwnSiteOnly(database), 15_000);
});

// PGlite runs one transaction at a time, in this process: only PostgreSQL has a write still open
// while others commit, a LISTEN on a connection of its own, and a statement_timeout.
const PG_URL = process.env.TEST_DATABASE_URL;
if (!PG_URL) console.warn('\n[events.test] events on PostgreSQL: SKIPPED, TEST_DATABASE_URL is not set\n');
describe.skipIf(!PG_URL)('events on PostgreSQL', () => {
  it('numbers only what committed: a write still open gets no number and holds back none of those that commit after it', async () => {
    const pg = await openPostgres(PG_URL!, { max: 4 });
    try {
      await pg.migrate();
      const name = `ev-pg-${randomUUID().slice(0, 8)}`;
      const ids: string[] = [];
      for (const i of [0, 1]) {
        const [row] = await rows<{ id: string }>(
          pg.db,
          sql`insert into users (site, email, name, origin) values (${name}, ${`${name}-${i}@example.com`}, 'Ada', 'api') returning id::text as id`,
        );
        ids.push(row!.id);
      }
      let release = () => {};
      const held = new Promise<void>((resolve) => {
        release = resolve;
      });
      const open = pg.db.transaction(async (tx) => {
        await enqueueEvents(tx, name, [{ type: 'user.created', userId: ids[0]! }]);
        await held;
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      await pg.db.transaction((tx) => enqueueEvents(tx, name, [{ type: 'user.created', userId: ids[1]! }]));
      await sequenceEvents(pg.db, name);
      const seen = async () => (await readEvents(pg.db, name, 0, 10)).map((e) => [e.sequence, e.subject]);
      expect(await seen()).toEqual([[seq(1), ids[1]]]);
      release();
      await open;
      await sequenceEvents(pg.db);
      expect(await seen()).toEqual([
        [seq(1), ids[1]],
        [seq(2), ids[0]],
      ]);
    } finally {
      await pg.close();
    }
  }, 30_000);

  it('numbers and prunes a backlog in statements that fit in statement_timeout', async () => {
    const pg = await openPostgres(PG_URL!, { max: 4 });
    try {
      await pg.migrate();
      await backlogInBoundedStatements(pg);
    } finally {
      await pg.close();
    }
  }, 60_000);

  it('wakes a long-poll for its own site’s events only', async () => {
    const pg = await openPostgres(PG_URL!, { max: 4 });
    try {
      await pg.migrate();
      await longPollWakesForItsOwnSiteOnly(pg);
    } finally {
      await pg.close();
    }
  }, 30_000);
});
