// The outbox and the feed over a real embedded database: numbering per site, a rollback giving
// its numbers back, and the retention (events pruned, a reader behind them told 410).

import { randomUUID } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openPglite, openPostgres, rows } from './db/client.ts';
import { loadConfig } from './env.ts';
import { appendEvents, feedBounds, pruneEvents, readEvents, SEQUENCE_BATCH, sequenceEvents } from './events.ts';
import { listEvents } from './routes/list-events.ts';
import { problemOf, testApp } from './testing/hono.ts';

let database: Database;
beforeAll(async () => {
  database = await openPglite(undefined);
  await database.migrate();
});
afterAll(() => database.close());

let sites = 0;
async function site(accounts: number) {
  const name = `ev-${sites++}`;
  const ids: string[] = [];
  for (let i = 0; i < accounts; i++) {
    const [row] = await rows<{ id: string }>(
      database.db,
      sql`insert into users (site, email, name, origin) values (${name}, ${`${name}-${i}@example.com`}, 'Ada', 'api') returning id::text as id`,
    );
    ids.push(row!.id);
  }
  return { name, ids };
}

async function created(siteName: string, ids: string[]) {
  await database.db.transaction((tx) =>
    appendEvents(
      tx,
      siteName,
      ids.map((userId) => ({ type: 'user.created' as const, userId })),
    ),
  );
  await sequenceEvents(database.db);
}

function feed(siteName: string) {
  const app = testApp({
    deps: { database },
    vars: { token: { id: 't', site: siteName, scopes: ['events'] } as never },
  });
  app.get(listEvents.path, (c) => listEvents.handle(c, listEvents.parse(c)));
  return (query: string) => app.request(`${listEvents.path}${query}`);
}

describe('the outbox', () => {
  it('numbers each site on its own, and a rolled-back write gives its numbers back', async () => {
    const a = await site(3);
    const b = await site(1);
    await created(a.name, a.ids.slice(0, 2));
    await created(b.name, b.ids);
    await expect(
      database.db.transaction(async (tx) => {
        await appendEvents(tx, a.name, [{ type: 'user.created', userId: a.ids[2]! }]);
        throw new Error('the write failed after its event');
      }),
    ).rejects.toThrow('the write failed');
    await created(a.name, [a.ids[2]!]);
    expect((await readEvents(database.db, a.name, undefined, 10)).map((e) => [e.sequence, e.subject])).toEqual([
      ['1', a.ids[0]],
      ['2', a.ids[1]],
      ['3', a.ids[2]],
    ]);
    expect((await readEvents(database.db, b.name, undefined, 10)).map((e) => e.sequence)).toEqual(['1']);
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
    expect(fromTwo.result.events.map((e) => e.sequence)).toEqual(['3', '4']);
    const fromOldest = (await (await get('')).json()) as { result: { events: { sequence: string }[]; next: string } };
    expect(fromOldest.result.events.map((e) => e.sequence)).toEqual(['3', '4']);
    expect(fromOldest.result.next).toBe('4');
    expect((await get('?after=5')).status).toBe(400);
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
    expect(fromTwo.result.events.map((e) => e.sequence)).toEqual(['3', '4', '5']);
  });

  it('numbers and prunes a backlog larger than one statement may take, in bounded statements', async () => {
    const s = await site(1);
    const n = SEQUENCE_BATCH * 2 + 500;
    // A backlog, as after the sequencer stopped while an import wrote.
    await database.db.execute(sql`insert into events (site, type, subject, data)
      select ${s.name}, 'user.created', ${s.ids[0]!}::uuid, '{}'::jsonb from generate_series(1, ${n})`);
    // One call numbers one batch (what fits in statement_timeout); sequenceEvents calls until done.
    const [one] = await rows<{ n: number }>(database.db, sql`select sequence_events(${s.name}) as n`);
    expect(one!.n).toBe(SEQUENCE_BATCH);
    expect(await sequenceEvents(database.db, s.name)).toBe(n - SEQUENCE_BATCH);
    const [dense] = await rows<{ count: number; min: string; max: string; distinct: number }>(
      database.db,
      sql`select count(*)::int as count, min(seq)::text as min, max(seq)::text as max, count(distinct seq)::int as distinct
        from events where site = ${s.name}`,
    );
    expect(dense).toEqual({ count: n, min: '1', max: String(n), distinct: n });
    await database.db.execute(sql`update events set time = now() - interval '8 days' where site = ${s.name}`);
    expect(await pruneEvents(database.db, 7 * 86_400_000)).toBe(n);
    expect(await feedBounds(database.db, s.name)).toEqual({ last: n, prunedThrough: n });
  }, 60_000);

  it('is EVENTS_RETENTION, 7 days unless told, never under the 3 days of webhook retries', () => {
    expect(loadConfig({}).eventsRetentionMs).toBe(7 * 86_400_000);
    expect(loadConfig({ EVENTS_RETENTION: '72h' }).eventsRetentionMs).toBe(72 * 3_600_000);
    for (const bad of ['2d', '71h', 'week', '7']) {
      expect(() => loadConfig({ EVENTS_RETENTION: bad })).toThrow(/EVENTS_RETENTION must be/);
    }
  });
});

// PGlite runs one transaction at a time; only PostgreSQL has a write still open while others commit.
const PG_URL = process.env.TEST_DATABASE_URL;
if (!PG_URL) console.warn('\n[events.test] numbering on PostgreSQL: SKIPPED, TEST_DATABASE_URL is not set\n');
describe.skipIf(!PG_URL)('numbering on PostgreSQL', () => {
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
        await appendEvents(tx, name, [{ type: 'user.created', userId: ids[0]! }]);
        await held;
      });
      await new Promise((resolve) => setTimeout(resolve, 100));
      await pg.db.transaction((tx) => appendEvents(tx, name, [{ type: 'user.created', userId: ids[1]! }]));
      await sequenceEvents(pg.db, name);
      const seen = async () => (await readEvents(pg.db, name, 0, 10)).map((e) => [e.sequence, e.subject]);
      expect(await seen()).toEqual([['1', ids[1]]]);
      release();
      await open;
      await sequenceEvents(pg.db);
      expect(await seen()).toEqual([
        ['1', ids[1]],
        ['2', ids[0]],
      ]);
    } finally {
      await pg.close();
    }
  }, 30_000);
});
