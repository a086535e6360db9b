// `node src/queue-reads.ts` (from packages/bench): what the sequencer and the retention read on
// an embedded database where one site has 20,000 events: rows by sequential scans, rows by
// index or bitmap scans, and entries of events' primary key (site, seq), from PostgreSQL's
// per-transaction counters. A figure of the plan, not something a user sees: queue.test.ts
// asserted these bounds until issue 34 (point 5) moved them here. Not part of `pnpm bench`.
// Bounds the tests held (a run of the sequencer read fewer than 50 of them; a pruning read no
// row by a sequential scan and fewer than 5,000 by key: 22,302 when each statement looked at
// 10,000 of the other site's events).
import { randomUUID } from 'node:crypto';
import { type Database, type Db, openPglite } from '@user-accounts/server/db';
import { pruneEvents } from '@user-accounts/server/events/queue';
import { sequenceEvents } from '@user-accounts/server/events/sequencer';
import { enqueueEvents } from '@user-accounts/server/kernel/outbox';

/** The rows of a statement (its values are this script's own: names it generated, numbers). */
async function rows<T>(db: Db, statement: string): Promise<T[]> {
  const result = (await db.execute(statement)) as unknown;
  return Array.isArray(result) ? (result as T[]) : (result as { rows: T[] }).rows;
}

interface Read {
  scanned: number;
  fetched: number;
  byKey: number;
}

/** What `work` read of events, in one transaction (the counters are the transaction's own). */
async function readWhile(on: Database, work: (tx: Db) => Promise<unknown>): Promise<Read> {
  return on.db.transaction(async (tx) => {
    const counters = async () => {
      const [row] = await rows<{ scanned: number; fetched: number; byKey: number }>(
        tx,
        `select pg_stat_get_xact_tuples_returned('events'::regclass)::int as scanned,
          pg_stat_get_xact_tuples_fetched('events'::regclass)::int as fetched,
          pg_stat_get_xact_tuples_returned('events_site_seq_pk'::regclass)::int as "byKey"`,
      );
      return row!;
    };
    const before = await counters();
    await work(tx);
    const after = await counters();
    return {
      scanned: after.scanned - before.scanned,
      fetched: after.fetched - before.fetched,
      byKey: after.byKey - before.byKey,
    };
  });
}

/** A site with one account and `n` events queued for it. */
async function siteWith(on: Database, n: number): Promise<{ name: string; userId: string }> {
  const name = `ev-${randomUUID().slice(0, 8)}`;
  const [user] = await rows<{ id: string }>(
    on.db,
    `insert into users (site, email, name, origin) values ('${name}', '${name}@example.com', 'Ada', 'api') returning id::text as id`,
  );
  await on.db.execute(`insert into event_queue (site, type, subject, data)
    select '${name}', 'user.created', '${user!.id}'::uuid, '{}'::jsonb from generate_series(1, ${n})`);
  return { name, userId: user!.id };
}

async function fresh<T>(work: (database: Database) => Promise<T>): Promise<T> {
  const database = await openPglite(undefined);
  try {
    await database.migrate();
    return await work(database);
  } finally {
    await database.close();
  }
}

const figures: [string, Read][] = [];
await fresh(async (database) => {
  const site = await siteWith(database, 20_000);
  await sequenceEvents(database.db);
  await database.db.transaction((tx) => enqueueEvents(tx, site.name, [{ type: 'user.updated', userId: site.userId }]));
  figures.push(['sequencer: 1 new event on a site of 20,000', await readWhile(database, (tx) => sequenceEvents(tx))]);
  figures.push([
    'sequencer: a site with nothing queued',
    await readWhile(database, (tx) => sequenceEvents(tx, `ev-${randomUUID().slice(0, 8)}`)),
  ]);
});
await fresh(async (database) => {
  const due = await siteWith(database, 500);
  await siteWith(database, 20_000);
  await sequenceEvents(database.db);
  await database.db.execute(`update events set time = now() - interval '8 days' where site = '${due.name}'`);
  figures.push([
    'retention: 500 due on one site, 20,000 kept on another',
    await readWhile(database, (tx) => pruneEvents(tx, 7 * 86_400_000)),
  ]);
});

console.log('| what | rows by sequential scan | rows by index | primary-key entries |');
console.log('| --- | ---: | ---: | ---: |');
for (const [what, read] of figures) console.log(`| ${what} | ${read.scanned} | ${read.fetched} | ${read.byKey} |`);
