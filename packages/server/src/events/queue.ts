// Change events: the feed that reads them once numbered, and their pruning. A write inserts its
// events into the queue in its own transaction (kernel/outbox.ts, the unit of work's).
//
// Gap-free reading. Sequence numbers taken from a PostgreSQL sequence are handed out at one time
// and committed at another, so a reader that has seen 7 could later find 6 committed, and skip
// it for ever. What we do instead: a write inserts its events into event_queue, unnumbered, in its
// own transaction (kernel/outbox.ts enqueueEvents); the sequencer (sequencer.ts, which says why this is gap-free
// and in order) moves the committed ones into `events`, numbered per site, one run at a time per
// site. The feed and the webhook sender read `events` only: plain SELECTs, which a read replica
// can serve.
// Why not the alternatives we measured (`./pnpmw bench --only events`, update throughput with
// events against the same server without, bench/results/2026-11-2*.md):
// - numbering in the write itself, under the site's lock held to its COMMIT, makes one site's
//   commits pass one at a time: 0.40× (09-42), and 0.43× with the number taken by a deferred
//   trigger in the commit itself (09-51); a NOTIFY per write serializes commits across sites;
// - handing out only events below pg_snapshot_xmin makes every site's feed wait for the longest
//   open transaction anywhere (one site's 2-minute import would hold up every feed);
// - PL/pgSQL numbering by transaction ids and snapshots kept in our tables (migrations 0008 to
//   0011, replaced by 0015): only its author could change it, ids of another cluster needed
//   clearing after a restore, and every server looked at every site every 100 ms.
// The price: a reader sees an event once the sequencer ran: at the commit on its own server when
// the sequencer is idle, within its RUN_GAP_MS under load (sequencer.ts), within SEQUENCER_POLL_MS
// on the others. The feed waits for what was queued for its
// site before it read (waitForQueued), so a client reads its own writes.
import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { rows } from '../db/client.ts';
import type { EventType } from '../kernel/outbox.ts';

export const EVENTS_CHANNEL = 'ua_events';

const iso = (column: SQL) => sql`to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

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

/** An event's columns as toCloudEvent reads them, from `events e`. */
export const eventColumns = sql`e.seq::text as seq, e.id::text as id, e.type, e.subject::text as subject, ${iso(sql`e.time`)} as time, e.changed, e.data`;

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

/**
 * The site's events after `after` (from the oldest kept when undefined), in order; with `subject`,
 * only that account's (through events_site_subject_idx), and none past `upto` when given.
 */
export async function readEvents(
  db: Db,
  site: string,
  after: number | undefined,
  limit: number,
  { subject, upto }: { subject?: string; upto?: number } = {},
): Promise<CloudEvent[]> {
  const ofSubject = subject === undefined ? sql`` : sql` and e.subject = ${subject}::uuid`;
  const until = upto === undefined ? sql`` : sql` and e.seq <= ${upto}`;
  const found = await rows<EventRow>(
    db,
    sql`select ${eventColumns} from events e where e.site = ${site}${ofSubject} and e.seq > ${after ?? 0}${until} order by e.seq limit ${limit}`,
  );
  return found.map((row) => toCloudEvent(site, row));
}

/** The last position queued for the site, if any event of it waits for its number. */
export async function lastQueued(db: Db, site: string): Promise<string | undefined> {
  const [row] = await rows<{ pos: string | null }>(
    db,
    sql`select max(pos)::text as pos from event_queue where site = ${site}`,
  );
  return row?.pos ?? undefined;
}

/** Whether the site's events queued up to `pos` all have their numbers. */
export async function numberedUpTo(db: Db, site: string, pos: string): Promise<boolean> {
  const [row] = await rows<{ waiting: boolean }>(
    db,
    sql`select exists (select 1 from event_queue where site = ${site} and pos <= ${pos}) as waiting`,
  );
  return row?.waiting === false;
}

/** How many events one pruning statement removes at most: it fits in statement_timeout. */
export const PRUNE_BATCH = 10_000;

/**
 * Removes events older than the retention, as a prefix of each site's sequence: up to the event
 * before the oldest one still within the retention (times are when each write began, so they are
 * not quite in sequence order: a prefix by time alone would leave holes a reader could not tell
 * from events never written). Records per site how far it went (`pruned_through`: a reader behind
 * it gets 410), in statements of at most PRUNE_BATCH events per site.
 */
export async function pruneEvents(db: Db, retentionMs: number): Promise<number> {
  const seconds = Math.floor(retentionMs / 1000);
  let total = 0;
  for (;;) {
    const [removed] = await rows<{ n: number; cut: number }>(
      db,
      sql`with cut as (
        -- The first event still within the retention, looking no further than one statement's
        -- worth: the next statement goes on from where this one stops.
        select s.site, s.pruned_through as after, least(s.last, s.pruned_through + ${PRUNE_BATCH}, (
          select e.seq - 1 from events e
          where e.site = s.site and e.seq > s.pruned_through and e.seq <= s.pruned_through + ${PRUNE_BATCH}
            and e.time >= now() - make_interval(secs => ${seconds})
          order by e.seq limit 1)) as upto
        from event_sequences s
      ), moved as (
        update event_sequences s set pruned_through = cut.upto
        from cut where s.site = cut.site and cut.upto > s.pruned_through returning 1
      ), gone as (
        delete from events e using cut
        where e.site = cut.site and e.seq > cut.after and e.seq <= cut.upto returning 1
      )
      select (select count(*)::int from gone) as n, (select count(*)::int from moved) as cut`,
    );
    total += removed?.n ?? 0;
    if ((removed?.cut ?? 0) === 0) return total;
  }
}
