// Change events: the queue a write inserts its events into, in its own transaction, and the feed
// that reads them once numbered.
//
// Gap-free reading. Sequence numbers taken from a PostgreSQL sequence are handed out at one time
// and committed at another, so a reader that has seen 7 could later find 6 committed, and skip
// it for ever. What we do instead: a write inserts its events into event_queue, unnumbered, in its
// own transaction (enqueueEvents); the sequencer (sequencer.ts, which says why this is gap-free
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
// The price: a reader sees an event once the sequencer ran: within 10–30 ms of the write on its
// own server, within SEQUENCER_POLL_MS on the others. The feed waits for what was queued for its
// site before it read (waitForQueued), so a client reads its own writes.
import { type SQL, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { executePrepared, rows } from '../db/client.ts';
import { sqlArray } from '../db/sql-array.ts';

export const EVENTS_CHANNEL = 'ua_events';

/** Every change event's type, in the spec's order: the feed's, webhooks' and `cli webhook add --types`' one list. */
export const EVENT_TYPES = [
  'user.created',
  'user.updated',
  'user.deleted',
  'user.disabled',
  'user.enabled',
  'user.restored',
  'user.purged',
  'user.factor_added',
  'user.factor_removed',
  'user.password_breached',
  'session.created',
  'session.revoked',
  'user.identity_linked',
  'user.identity_unlinked',
  'org.created',
  'org.updated',
  'org.deleted',
  'org.member_added',
  'org.member_updated',
  'org.member_removed',
  'org.invitation_created',
  'org.invitation_accepted',
] as const;

export type EventType = (typeof EVENT_TYPES)[number];

export interface EventEntry {
  type: EventType;
  /** The event's subject: the account, or the organization for the org.* events. */
  userId: string;
  /** user.updated: the fields the request set. */
  changed?: string[];
  /** user.factor_added, user.factor_removed: which factor (never its secret). */
  factor?: { factorId: string; type: string };
  /**
   * The event's data as it is, when the write knows it whole (session.created, session.revoked:
   * sessions/rules.ts); never anything secret.
   */
  data?: Record<string, unknown>;
}

/** The order changedfields lists fields in, whatever order the request had them. */
const FIELD_ORDER = ['email', 'emailVerified', 'name', 'phone', 'phoneVerified', 'address', 'password', 'metadata'];

const iso = (column: SQL) => sql`to_char(${column} at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

/** The account's linked identities as get answers them (identities/identities.ts says the same), oldest first. */
const identitiesJson = (userId: SQL) => sql`coalesce((select jsonb_agg(jsonb_build_object('provider', i.provider,
    'subject', i.subject, 'email', i.email, 'emailVerified', i.email_verified, 'linkedAt', ${iso(sql`i.linked_at`)})
    order by i.linked_at, i.id) from user_identities i where i.user_id = ${userId}), '[]'::jsonb)`;

/** The account as get answers it, read in the write's transaction (after the change). */
const accountJson = (userId: SQL) => sql`(select jsonb_build_object(
    '_userId', u.id, 'email', u.email, 'name', u.name, 'phone', u.phone, 'address', u.address,
    'disabled', u.disabled, 'disabledUntil', ${iso(sql`u.disabled_until`)}, 'disabledReason', u.disabled_reason,
    'emailVerified', u.email_verified_at is not null, 'emailVerifiedAt', ${iso(sql`u.email_verified_at`)},
    'phoneVerified', u.phone_verified_at is not null, 'phoneVerifiedAt', ${iso(sql`u.phone_verified_at`)},
    'passwordBreached', u.password_breached,
    'metadata', u.metadata, 'identities', ${identitiesJson(sql`u.id`)}, 'createdAt', ${iso(sql`u.created_at`)}, 'updatedAt', ${iso(sql`u.updated_at`)})
  from users u where u.id = ${userId})`;

/**
 * user.deleted: the id and the grace period, read from the row still there in its grace (a delete
 * for good leaves none: 0). user.purged: the bare id, all that is left of the account.
 */
const deletedJson = (userId: SQL) => sql`jsonb_build_object('_userId', ${userId}, 'graceDays',
  coalesce((select extract(day from u.purge_at - u.deleted_at)::int from users u where u.id = ${userId}), 0))`;
const purgedJson = (userId: SQL) => sql`jsonb_build_object('_userId', ${userId})`;
/** user.factor_added and user.factor_removed: the account's id and which factor, nothing secret. */
const factorJson = (userId: SQL, factor: { factorId: string; type: string }) =>
  sql`jsonb_build_object('_userId', ${userId}, 'factorId', ${factor.factorId}::text, 'factorType', ${factor.type}::text)`;

/** The data of one event. */
function dataOf(entry: EventEntry, userId: SQL): SQL {
  if (entry.data !== undefined) return sql`${JSON.stringify(entry.data)}::jsonb`;
  if (entry.factor !== undefined) return factorJson(userId, entry.factor);
  if (entry.type === 'user.deleted') return deletedJson(userId);
  return entry.type === 'user.purged' ? purgedJson(userId) : accountJson(userId);
}

/**
 * Queues the events of one write, in its transaction, unnumbered (see above); with `alongside`
 * (another INSERT of the write), in one statement with it: a round trip less.
 */
export async function enqueueEvents(tx: Db, site: string, entries: EventEntry[], alongside?: SQL): Promise<void> {
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
      sql`${done}insert into event_queue (site, type, subject, changed, data)
        select ${site}, ${entry!.type}, ${userId}, ${changed[0]},
          ${dataOf(entry!, userId)}`,
    );
    return;
  }
  // Queued in the entries' order, which is the order the sequencer numbers them in.
  const types = entries.map((e) => e.type);
  const subjects = entries.map((e) => e.userId);
  // An import's user.factor_added events ride with its user.created ones: which factor, no secret.
  const factorIds = entries.map((e) => e.factor?.factorId ?? null);
  const factorTypes = entries.map((e) => e.factor?.type ?? null);
  const data = entries.map((e) => (e.data === undefined ? null : JSON.stringify(e.data)));
  await tx.execute(sql`${done}insert into event_queue (site, type, subject, changed, data)
    select ${site}, e.type, e.user_id, e.changed,
      case when e.data is not null then e.data::jsonb
        when e.factor_id is not null
          then jsonb_build_object('_userId', e.user_id, 'factorId', e.factor_id, 'factorType', e.factor_type)
        when e.type = 'user.deleted' then ${deletedJson(sql`e.user_id`)} when e.type = 'user.purged' then ${purgedJson(sql`e.user_id`)}
        else ${accountJson(sql`e.user_id`)} end
    from unnest(${sqlArray(types, 'text')}, ${sqlArray(subjects, 'uuid')},
      ${sqlArray(changed, 'text')}, ${sqlArray(factorIds, 'text')}, ${sqlArray(factorTypes, 'text')},
      ${sqlArray(data, 'text')})
      with ordinality as e(type, user_id, changed, factor_id, factor_type, data, ord)
    order by e.ord`);
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
