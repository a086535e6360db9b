// The sequencer: numbers each site's queued events (queue.ts) once their writes have committed.
//
// A run for a site, in a transaction of its own:
// 1. takes the site's advisory lock (pg_advisory_xact_lock, exclusive): runs on one site, from
//    any server, come one at a time, each after the one before has committed;
// 2. in one statement (so in one snapshot, taken once the lock is held): deletes the site's
//    queued rows it can see, moves them into `events` numbered last + 1, last + 2… in the order
//    they were queued, and records the new last in event_sequences;
// 3. commits, and NOTIFYs the site (heard at its commit: long-polls and the webhook sender wake).
// Why that is gap-free: a row is visible only once its write has committed, so a run numbers
// committed events only; a write still open is left for a later run, which numbers after this
// one. A reader that has seen n therefore never later finds a number below n, and an open write
// (a two-minute import) holds back none of the writes that commit after it.
// Why an account's events stay in order: a write of an account waits for the previous write of
// it to commit (the row lock on users), so it queues its event later (`pos`), and any run that
// sees it sees the earlier one too (it committed first): numbered before it, in this run or one
// before. Between accounts, numbers follow the order in which runs saw commits: what one run
// numbers committed before the next one's snapshot, which is all any reader can tell apart.
// Why the writes take no lock of the site: a shared lock held by each write until its COMMIT, for
// the run to wait on, would make the open import above hold back the site's whole feed (and each
// waiting run every new write of the site behind it); visibility already says what committed.
// Cost when idle: one query over the queue, which holds only the events not numbered yet (when
// it is empty, an empty table); nothing is read per site (sequence_events, before, looked at
// every site of event_sequences every 100 ms on every server).
import { sql } from 'drizzle-orm';
import { type Db, rows } from '../db/client.ts';
import { EVENTS_CHANNEL } from './queue.ts';

/** The advisory locks of the sequencer: (this, hashtext(site)), apart from the one-key locks (migrations). */
const SITE_LOCK_CLASS = 0x65_76_6e_74; // "evnt"

/** How many of a site's events one run numbers at most: a backlog goes in runs that fit in statement_timeout. */
export const SEQUENCE_BATCH = 10_000;

/** Numbers the site's queued events that committed, at most SEQUENCE_BATCH; returns how many. */
export async function numberSite(db: Db, site: string): Promise<number> {
  return db.transaction(async (tx) => {
    // Waits for another server's run of the site however long it takes (statement_timeout bounds
    // it), not the pool's lock_timeout (db/client.ts), which is a request's bound: set for this
    // transaction in the same statement, before the lock is asked for (the FROM comes first).
    await tx.execute(
      sql`select pg_advisory_xact_lock(${SITE_LOCK_CLASS}, hashtext(${site})) from (select set_config('lock_timeout', '0', true)) unbounded`,
    );
    const [done] = await rows<{ n: number }>(
      tx,
      sql`with moved as (
        delete from event_queue q
        where q.site = ${site} and q.pos <= (select max(pos) from (
          select pos from event_queue where site = ${site} order by pos limit ${SEQUENCE_BATCH}) first)
        returning q.*
      ), numbered as (
        insert into events (site, seq, id, type, subject, time, changed, data, traceparent)
        select site, coalesce((select last from event_sequences where site = ${site}), 0)
            + row_number() over (order by pos), id, type, subject, time, changed, data, traceparent
        from moved
        returning seq
      ), counted as (
        select count(*)::int as n, max(seq) as last from numbered
      ), recorded as (
        insert into event_sequences (site, last) select ${site}, last from counted where n > 0
        on conflict (site) do update set last = excluded.last
      )
      -- Heard at COMMIT, in the same round trip: a run is as few statements as it can be.
      select n, (select pg_notify(${EVENTS_CHANNEL}, ${site}) where n > 0) as notified from counted`,
    );
    return done?.n ?? 0;
  });
}

/** Numbers what is queued: every site with events in the queue (or only `site`), until none is left. */
export async function sequenceEvents(db: Db, site?: string): Promise<number> {
  if (site !== undefined) return sequenceSites(db, [site]);
  let total = 0;
  for (;;) {
    const sites = (await rows<{ site: string }>(db, sql`select distinct site from event_queue`)).map((r) => r.site);
    const numbered = await sequenceSites(db, sites);
    total += numbered;
    // Again only while a run stopped at its bound: what was queued since is the next kick's.
    if (numbered < SEQUENCE_BATCH) return total;
  }
}

/** Numbers what `sites` queued, each until none is left (no look at the queue for the others). */
async function sequenceSites(db: Db, sites: Iterable<string>): Promise<number> {
  let total = 0;
  for (const s of sites) {
    for (;;) {
      const numbered = await numberSite(db, s);
      total += numbered;
      if (numbered < SEQUENCE_BATCH) break;
    }
  }
  return total;
}

/**
 * Moved rows after which the sequencer VACUUMs the queue. Until then they stay in its pages, and
 * the idle look at the queue reads them all: on the embedded database, which has no autovacuum,
 * 8.6 ms a look after 50,000 events, 0.5 ms once vacuumed (75 ms). PostgreSQL's autovacuum would
 * get there too; this keeps both bounded by what is pending.
 */
export const VACUUM_EVERY = 10_000;

/** How often a server numbers what other servers queued (what it writes itself is numbered at once). */
export const SEQUENCER_POLL_MS = 100;

/**
 * The least time between the starts of two runs woken by commits (issue 63). A commit on an idle
 * sequencer is numbered at once (the run starts once the event loop's turn is over, so that the
 * commits of that turn share it); commits that come while a run is under way are numbered by the next
 * run, which starts when that one ends, but not sooner than this after its start: under load,
 * runs come every RUN_GAP_MS, each numbering the writes of its window. A run is four round trips
 * (begin, the advisory lock, the move, commit); at 100 ms between runs (before), a delivery
 * waited 50 ms on average, up to 100 ms, for its number; at 25 ms a run costs a write at 600
 * writes/s a fraction of a round trip.
 */
export const RUN_GAP_MS = 25;

export interface Sequencer {
  /**
   * Numbers now (after a write that queued events committed here): `site`'s queue alone, or,
   * without a site, every site's. Runs coalesce (see RUN_GAP_MS).
   */
  kick(site?: string): void;
  /**
   * Resolves once a run begun after this call has ended: everything committed before it is
   * numbered then. The feed's wait for what its site had queued (http/routes/list-events.ts).
   */
  numberNow(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Every server runs one: events queued anywhere get their numbers within SEQUENCER_POLL_MS (the
 * poll looks at every site's queue), what this server's writes queued as soon as they commit
 * (a kick names the site: its run looks at that site's queue alone, without the look at the
 * whole queue). Under load, runs come at most every RUN_GAP_MS.
 */
export function startSequencer(db: Db, onError: (error: unknown) => void, pollMs = SEQUENCER_POLL_MS): Sequencer {
  let running: Promise<void> | undefined;
  let scheduled: NodeJS.Timeout | undefined;
  let stopped = false;
  let lastStart = Number.NEGATIVE_INFINITY;
  let moved = 0;
  /** The sites kicked since the last run began; `everySite`: a kick or poll without one. */
  let sites = new Set<string>();
  let everySite = false;
  /** Callers of numberNow waiting for the next run to begin and end. */
  const waiting: (() => void)[] = [];
  const wanted = () => everySite || sites.size > 0;
  const numberWanted = async () => {
    const all = everySite;
    const these = sites;
    everySite = false;
    sites = new Set();
    moved += await (all ? sequenceEvents(db) : sequenceSites(db, these)).catch((error: unknown) => {
      onError(error);
      return 0;
    });
  };
  const vacuumNow = async () => {
    if (moved < VACUUM_EVERY) return;
    moved = 0;
    await db.execute(sql`vacuum event_queue`).catch(onError);
  };
  const run = async () => {
    lastStart = performance.now();
    const served = waiting.splice(0);
    // A reader (numberNow) waits for every site's commits, not only for the kicked ones'.
    if (served.length > 0) everySite = true;
    await numberWanted();
    for (const resolve of served) resolve();
    await vacuumNow();
    running = undefined;
    if (stopped) for (const resolve of waiting.splice(0)) resolve();
    // A reader waits at once, not for the next run's gap.
    else if (waiting.length > 0) running = run();
    else if (wanted()) schedule();
  };
  const now = () => {
    scheduled = undefined;
    if (stopped || running !== undefined) return;
    running = run();
  };
  /** The next run: at once when the last began RUN_GAP_MS ago or more, else when it has. */
  function schedule() {
    if (stopped || scheduled !== undefined || running !== undefined) return;
    // A timer of 0 runs after this turn's other callbacks: the commits of the same turn share the run.
    scheduled = setTimeout(now, Math.max(0, lastStart + RUN_GAP_MS - performance.now()));
  }
  const poll = () => {
    everySite = true;
    schedule();
  };
  const timer = setInterval(poll, pollMs);
  timer.unref();
  const cancel = () => {
    clearTimeout(scheduled);
    scheduled = undefined;
  };
  return {
    kick(site) {
      if (stopped) return;
      if (site === undefined) everySite = true;
      else sites.add(site);
      // While a run is under way, the next is scheduled when it ends (run()).
      schedule();
    },
    numberNow() {
      return new Promise<void>((resolve) => {
        if (stopped) return resolve();
        waiting.push(resolve);
        if (running === undefined) {
          cancel();
          running = run();
        }
      });
    },
    async stop() {
      // The last writes' events are numbered before the server goes: else they waited for another
      // server's poll, or for the next start of a server that runs alone.
      stopped = true;
      clearInterval(timer);
      cancel();
      await running;
      if (wanted()) {
        await numberWanted();
        await vacuumNow();
      }
    },
  };
}
