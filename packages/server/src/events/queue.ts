// Change events: the outbox written in each write's transaction, and the feed that reads it.
//
// Gap-free reading. Sequence numbers taken from a PostgreSQL sequence are handed out at one time
// and committed at another, so a reader that has seen 7 could later find 6 committed, and skip
// it for ever. What we do instead: a write inserts its events without a number, in its own
// transaction; a sequencer (the SQL function sequence_events, migrations 0008 to 0011) numbers the
// events it can see, which are exactly those that committed, under the site's row lock in
// event_sequences, and commits. Numbering runs are one at a time per site, each numbers after
// the last, so a reader that has seen n never later finds a number below n. An account's events
// keep their order: a write waits for the account's previous write to commit, so its event is
// inserted later (`pos`) and numbered after it, in the same run or a later one.
// How a run finds what is new (migration 0010), as PgQ's ticker does: each event records the
// transaction that wrote it (`txid`), each site the snapshot of its last run; what that run could
// not see was written by a transaction then in progress or begun after, a few index lookups.
// Where the numbers go (migration 0011): a run writes one row of event_batches per 200 events it
// numbers, (site, last_seq, pos[]), and the events themselves are never updated. The feed, the
// webhook sender and pruning read them through site_events(site, after, limit), which unnests the
// batches after `after` and joins the events by `pos`.
// Why not the alternatives we measured (`./pnpmw bench --only events`, update throughput with
// events against the same server without, bench/results/2026-11-2*.md):
// - numbering in the write itself, under the site's lock held to its COMMIT, makes one site's
//   commits pass one at a time: 0.40× (09-42), and 0.43× with the number taken by a deferred
//   trigger in the commit itself (09-51); a NOTIFY per write serializes commits across sites;
// - handing out only events below pg_snapshot_xmin makes every site's feed wait for the longest
//   open transaction anywhere (one site's 2-minute import would hold up every feed);
// - a `seq` column in each event, set by the run (0008 to 0010): every event written twice, the
//   second time its whole row (a non-HOT update, `seq` being indexed) and three index entries.
//   Writes with events kept 0.86× of the throughput without (2026-11-24 05:06); with batches but
//   the cached plan below, 0.88× (two runs, reports not kept); with both, 0.96–0.99× (05:44, 05:47, 06:35, 06:53).
// Each run is planned anew (plan_cache_mode = force_custom_plan in 0011): the plan a session
// cached while the table was nearly empty read every event of the site in each run, longer as
// events accumulated, until an ANALYZE (which the embedded database never runs).
// The price: a reader sees an event once a sequencer ran: within 10–30 ms of the write on its own
// server, within SEQUENCER_POLL_MS on the others, and at once for the feed, which numbers its site
// before it reads.
import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { executePrepared, rows } from '../db/client.ts';

export const EVENTS_CHANNEL = 'ua_events';

export type EventType = 'user.created' | 'user.updated' | 'user.deleted' | 'user.disabled' | 'user.enabled';

export interface EventEntry {
  type: EventType;
  userId: string;
  /** user.updated: the fields the request set. */
  changed?: string[];
}

/** The order changedfields lists fields in, whatever order the request had them. */
const FIELD_ORDER = ['name', 'phone', 'address', 'password'];

const iso = (column: SQL) => sql`to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** The account as get answers it, read in the write's transaction (after the change). */
const accountJson = (userId: SQL) => sql`(select jsonb_build_object(
    '_userId', u.id, 'email', u.email, 'name', u.name, 'phone', u.phone, 'address', u.address,
    'disabled', u.disabled, 'createdAt', ${iso(sql`u.created_at`)}, 'updatedAt', ${iso(sql`u.updated_at`)})
  from users u where u.id = ${userId})`;

const textArray = (values: (string | null)[]) =>
  sql`array[${sql.join(
    values.map((v) => sql`${v}`),
    sql`, `,
  )}]::text[]`;

/** The sites each database is known to have a row in event_sequences for (see ensureEventSequence). */
const knownSites = new WeakMap<Db, Set<string>>();

/**
 * Makes the site's row in event_sequences, which the sequencer visits, before the first write of
 * its events; once per site and process. In a statement of its own, never in the write's
 * transaction: a row made there would hold every other write of the site until that transaction
 * ended (a site whose first write is a two-minute import).
 */
export async function ensureEventSequence(db: Db, site: string): Promise<void> {
  const known = knownSites.get(db) ?? new Set<string>();
  knownSites.set(db, known);
  if (known.has(site)) return;
  // It starts from the snapshot of now: every event of the site is written later, by a transaction
  // that begins after this (its id is not visible in it). Unless a server older than migration
  // 0010 wrote some already: then its first run looks at all of them.
  await db.execute(sql`insert into event_sequences (site, last, snapshot)
    select ${site}, 0, case when exists (select 1 from events where site = ${site} and txid is not null)
      then null else pg_current_snapshot() end
    on conflict (site) do nothing`);
  known.add(site);
}

/**
 * Appends the events of one write, in its transaction, unnumbered (see above); with `alongside`,
 * in one statement with it. The site has its row in event_sequences (ensureEventSequence).
 */
export async function appendEvents(tx: Db, site: string, entries: EventEntry[], alongside?: SQL): Promise<void> {
  if (entries.length === 0) return;
  const changed = entries.map((e) =>
    e.changed === undefined ? null : FIELD_ORDER.filter((f) => e.changed!.includes(f)).join(','),
  );
  const done = alongside === undefined ? sql`` : sql`with done as (${alongside}) `;
  if (entries.length === 1) {
    // A write of one account (all but import): one row, a plain statement whose generic plan
    // PostgreSQL keeps, prepared (executePrepared). With unnest it planned it anew every time.
    const [entry] = entries;
    const userId = sql`${entry!.userId}::uuid`;
    await executePrepared(
      tx,
      sql`${done}insert into events (site, type, subject, changed, data)
        select ${site}, ${entry!.type}, ${userId}, ${changed[0]},
          ${entry!.type === 'user.deleted' ? sql`jsonb_build_object('_userId', ${userId})` : accountJson(userId)}`,
    );
    return;
  }
  // Inserted in the entries' order, which is the order the sequencer numbers them in.
  // `alongside`: another INSERT of the write, run in the same statement (a round trip less).
  await tx.execute(sql`${done}insert into events (site, type, subject, changed, data)
    select ${site}, e.type, e.user_id, e.changed,
      case when e.type = 'user.deleted' then jsonb_build_object('_userId', e.user_id) else ${accountJson(sql`e.user_id`)} end
    from unnest(${textArray(entries.map((e) => e.type))}, ${textArray(entries.map((e) => e.userId))}::uuid[],
      ${textArray(changed)}) with ordinality as e(type, user_id, changed, ord)
    order by e.ord`);
}

/** What one sequence_events call numbers of a site at most (migration 0009): it fits in statement_timeout. */
export const SEQUENCE_BATCH = 10_000;

/**
 * Numbers the events that committed (see above); with a site, that site's, waiting for any run
 * on it. Calls again while a call may have stopped at its bound.
 */
export async function sequenceEvents(db: Db, site?: string): Promise<number> {
  let total = 0;
  for (;;) {
    const [row] = await rows<{ n: number }>(
      db,
      site === undefined ? sql`select sequence_events() as n` : sql`select sequence_events(${site}) as n`,
    );
    const n = row?.n ?? 0;
    total += n;
    if (n < SEQUENCE_BATCH) return total;
  }
}

/** How often a server numbers what other servers wrote (its own writes are numbered at once). */
export const SEQUENCER_POLL_MS = 100;

export interface Sequencer {
  /** Numbers now (after a write committed here); runs coalesce. */
  kick(): void;
  stop(): Promise<void>;
}

/**
 * Every server runs one: events committed anywhere get their numbers within SEQUENCER_POLL_MS.
 * A kick (a write committed here) runs it within BATCH_MS after a quiet spell; under load, runs
 * come at most every GAP_MS, each numbering the writes of its window: a run per 10 ms cost
 * writes 4% more of their throughput than a run per 30 ms (`_exp` pairs, see issue 15's note).
 */
export function startSequencer(db: Db, onError: (error: unknown) => void, pollMs = SEQUENCER_POLL_MS): Sequencer {
  const BATCH_MS = 10;
  const GAP_MS = 30;
  let running: Promise<void> | undefined;
  let scheduled: NodeJS.Timeout | undefined;
  let again = false;
  let stopped = false;
  let lastStart = Number.NEGATIVE_INFINITY;
  const run = async () => {
    lastStart = performance.now();
    await sequenceEvents(db).catch(onError);
    running = undefined;
    if (again && !stopped) {
      again = false;
      kick();
    }
  };
  const now = () => {
    scheduled = undefined;
    if (stopped) return;
    if (running !== undefined) {
      again = true;
      return;
    }
    running = run();
  };
  function kick() {
    if (stopped || scheduled !== undefined) return;
    scheduled = setTimeout(now, Math.max(BATCH_MS, lastStart + GAP_MS - performance.now()));
  }
  const timer = setInterval(now, pollMs);
  timer.unref();
  return {
    kick,
    async stop() {
      // The last writes' events are numbered before the server goes: else they waited for another
      // server's poll, or for the next start of a server that runs alone.
      const pending = scheduled !== undefined || again;
      stopped = true;
      clearInterval(timer);
      clearTimeout(scheduled);
      await running;
      if (pending) await sequenceEvents(db).catch(onError);
    },
  };
}

export interface CloudEvent {
  specversion: '1.0';
  id: string;
  source: string;
  type: EventType;
  subject: string;
  time: string;
  datacontenttype: 'application/json';
  sequence: string;
  changedfields?: string;
  data: Record<string, unknown>;
}

export interface EventRow extends Record<string, unknown> {
  seq: string;
  id: string;
  type: EventType;
  subject: string;
  time: string;
  changed: string | null;
  data: Record<string, unknown> | string;
}

export const sourceOf = (site: string) => `urn:user-accounts:site:${site}`;

/**
 * How many digits `sequence` (and the feed's `next`) is written with, zero-padded: the CloudEvents
 * Sequence extension wants a string whose lexicographic order is the events' order ("10" sorts
 * before "2"; "00000000000000000010" after "00000000000000000002"). 20 digits hold any bigint
 * (and any unsigned 64-bit number). The value is the same number as before: `after` takes both
 * forms, and comparing as numbers still works.
 */
export const SEQUENCE_DIGITS = 20;

/** A sequence number as `sequence` and `next` carry it. */
export const formatSequence = (n: number | bigint | string) => String(n).padStart(SEQUENCE_DIGITS, '0');

/** A sequence number as a request may give it: the short decimal form or the 20-digit one. */
export const SEQUENCE_TEXT = /^(?:0|[1-9][0-9]{0,17}|[0-9]{20})$/;

export function toCloudEvent(site: string, row: EventRow): CloudEvent {
  return {
    specversion: '1.0',
    id: row.id,
    source: sourceOf(site),
    type: row.type,
    subject: row.subject,
    time: row.time,
    datacontenttype: 'application/json',
    sequence: formatSequence(row.seq),
    ...(row.changed === null ? {} : { changedfields: row.changed }),
    data: typeof row.data === 'string' ? JSON.parse(row.data) : row.data,
  };
}

/** An event's columns as toCloudEvent reads them, from `site_events(…) n join events e on e.pos = n.pos`. */
export const eventColumns = sql`n.seq::text as seq, e.id::text as id, e.type, e.subject::text as subject, ${iso(sql`e.time`)} as time, e.changed, e.data`;

/** The numbered events of a site after `after`, at most `limit`, as `n` joined to their rows `e`. */
export const numberedEvents = (site: SQL | string, after: SQL | number, limit: SQL | number | null) =>
  sql`site_events(${site}, ${after}, ${limit}) n join events e on e.pos = n.pos`;

/** Where a site's feed stands: its last sequence number and the last one pruned. */
export async function feedBounds(db: Db, site: string): Promise<{ last: number; prunedThrough: number }> {
  const [row] = await rows<{ last: string; pruned: string }>(
    db,
    sql`select last::text as last, pruned_through::text as pruned from event_sequences where site = ${site}`,
  );
  return row === undefined
    ? { last: 0, prunedThrough: 0 }
    : { last: Number(row.last), prunedThrough: Number(row.pruned) };
}

/** The site's events after `after` (from the oldest kept when undefined), in order. */
export async function readEvents(
  db: Db,
  site: string,
  after: number | undefined,
  limit: number,
): Promise<CloudEvent[]> {
  const found = await rows<EventRow>(
    db,
    sql`select ${eventColumns} from ${numberedEvents(site, after ?? 0, limit)} order by n.seq`,
  );
  return found.map((row) => toCloudEvent(site, row));
}

/** How many events one pruning statement removes at most: it fits in statement_timeout. */
export const PRUNE_BATCH = 10_000;

/**
 * Removes events older than the retention, as a prefix of each site's sequence: up to the event
 * before the oldest one still within the retention (times are when each write began, so they are
 * not quite in sequence order: a prefix by time alone would leave holes a reader could not tell
 * from events never written). Records per site how far it went (`pruned_through`: a reader behind
 * it gets 410), in statements of at most PRUNE_BATCH events per site. A batch of numbers goes
 * once all its events have; the feed joins batches to events, so one partly pruned shows the rest.
 */
export async function pruneEvents(db: Db, retentionMs: number): Promise<number> {
  const seconds = Math.floor(retentionMs / 1000);
  let total = 0;
  for (;;) {
    const [removed] = await rows<{ n: number; cut: number }>(
      db,
      sql`with cut as (
        -- Looking no further than one batch: the next run goes on from where this one stops. The
        -- first event still within the retention, batch by batch in order: a batch costs at most
        -- 200 lookups, and when nothing is due, the first batch is the last one looked at.
        select s.site, s.pruned_through as after, least(s.last, s.pruned_through + ${PRUNE_BATCH}, (
          select b.last_seq - cardinality(b.pos) + kept.ord - 1
          from event_batches b cross join lateral (
            select min(o.ord) as ord from unnest(b.pos) with ordinality o(pos, ord) join events e on e.pos = o.pos
            where e.time >= now() - make_interval(secs => ${seconds})
          ) kept
          where b.site = s.site and b.last_seq > s.pruned_through
            and b.last_seq < s.pruned_through + ${PRUNE_BATCH + 200} and kept.ord is not null
          order by b.last_seq limit 1)) as upto
        from event_sequences s
      ), moved as (
        update event_sequences s set pruned_through = cut.upto
        from cut where s.site = cut.site and cut.upto > s.pruned_through returning 1
      ), gone as (
        -- By primary key, whatever the planner guesses of the batches (= any of an array).
        delete from events e where e.pos = any (array(
          select n.pos from cut cross join lateral site_events(cut.site, cut.after, cut.upto - cut.after) n
          where cut.upto > cut.after
        )) returning 1
      ), emptied as (
        delete from event_batches b using cut
        where b.site = cut.site and cut.upto > cut.after and b.last_seq <= cut.upto returning 1
      )
      select (select count(*)::int from gone) as n, (select count(*)::int from moved) as cut,
        (select count(*)::int from emptied) as batches`,
    );
    total += removed?.n ?? 0;
    if ((removed?.cut ?? 0) === 0) return total;
  }
}
