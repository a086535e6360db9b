// Change events: the outbox written in each write's transaction, and the feed that reads it.
//
// Gap-free reading. Sequence numbers taken from a PostgreSQL sequence are handed out at one time
// and committed at another, so a reader that has seen 7 could later find 6 committed, and skip
// it for ever. Two ways out: hand readers only events below the oldest still-open writer's
// position (pg_snapshot_xmin), which keeps writers apart but makes the feed lag behind the
// longest open transaction and needs a second ordering (by transaction id); or make events
// commit in their order. We do the second: a writer takes its site's next number with an upsert
// of the site's row in event_sequences, in the last statement before COMMIT, and holds that
// row's lock until it commits. The next writer of the site waits for it there, so numbers are
// dense (a rollback gives its numbers back) and commit in order: a snapshot that holds event n
// holds every event below n. The price is that one site's writes pass that point one at a time,
// for the time of one statement and a COMMIT (the bench's outbox scenario measures it).
import { type SQL, sql } from 'drizzle-orm';
import type { Db } from './db/client.ts';
import { rows } from './db/client.ts';

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
const accountJson = sql`(select jsonb_build_object(
    '_userId', u.id, 'email', u.email, 'name', u.name, 'phone', u.phone, 'address', u.address,
    'disabled', u.disabled, 'createdAt', ${iso(sql`u.created_at`)}, 'updatedAt', ${iso(sql`u.updated_at`)})
  from users u where u.id = e.user_id)`;

const textArray = (values: (string | null)[]) =>
  sql`array[${sql.join(
    values.map((v) => sql`${v}`),
    sql`, `,
  )}]::text[]`;

/**
 * Appends the events of one write, in its transaction: call it last before COMMIT (it takes the
 * site's sequence lock, see above). One statement whatever the number of events.
 */
export async function appendEvents(tx: Db, site: string, entries: EventEntry[]): Promise<void> {
  if (entries.length === 0) return;
  const changed = entries.map((e) =>
    e.changed === undefined ? null : FIELD_ORDER.filter((f) => e.changed!.includes(f)).join(','),
  );
  await tx.execute(sql`
    with n as (
      insert into event_sequences as s (site, last) values (${site}, ${entries.length})
      on conflict (site) do update set last = s.last + ${entries.length}
      returning last
    ), e as (
      select * from unnest(${textArray(entries.map((e) => e.type))}, ${textArray(entries.map((e) => e.userId))}::uuid[],
        ${textArray(changed)}) with ordinality as e(type, user_id, changed, ord)
    )
    insert into events (site, seq, type, subject, changed, data)
    select ${site}, n.last - ${entries.length} + e.ord, e.type, e.user_id, e.changed,
      case when e.type = 'user.deleted' then jsonb_build_object('_userId', e.user_id) else ${accountJson} end
    from n, e`);
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

interface EventRow extends Record<string, unknown> {
  seq: string;
  id: string;
  type: EventType;
  subject: string;
  time: string;
  changed: string | null;
  data: Record<string, unknown> | string;
}

export const sourceOf = (site: string) => `urn:user-accounts:site:${site}`;

export function toCloudEvent(site: string, row: EventRow): CloudEvent {
  return {
    specversion: '1.0',
    id: row.id,
    source: sourceOf(site),
    type: row.type,
    subject: row.subject,
    time: row.time,
    datacontenttype: 'application/json',
    sequence: String(row.seq),
    ...(row.changed === null ? {} : { changedfields: row.changed }),
    data: typeof row.data === 'string' ? JSON.parse(row.data) : row.data,
  };
}

const eventColumns = sql`seq::text as seq, id::text as id, type, subject::text as subject, ${iso(sql`time`)} as time, changed, data`;

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
    sql`select ${eventColumns} from events where site = ${site} and seq > ${after ?? 0} order by events.seq limit ${limit}`,
  );
  return found.map((row) => toCloudEvent(site, row));
}

/** One event, for a webhook delivery; undefined once pruned. */
export async function readEvent(db: Db, site: string, seq: number): Promise<CloudEvent | undefined> {
  const [row] = await rows<EventRow>(db, sql`select ${eventColumns} from events where site = ${site} and seq = ${seq}`);
  return row === undefined ? undefined : toCloudEvent(site, row);
}

/**
 * Removes events older than the retention, and records per site how far that went, so that a
 * reader behind it is told (410) rather than silently given what follows.
 */
export async function pruneEvents(db: Db, retentionMs: number): Promise<number> {
  const seconds = Math.floor(retentionMs / 1000);
  const removed = await rows<{ n: number }>(
    db,
    sql`with gone as (
      delete from events where time < now() - make_interval(secs => ${seconds}) returning site, seq
    ), upto as (
      select site, max(seq) as seq from gone group by site
    ), marked as (
      update event_sequences s set pruned_through = greatest(s.pruned_through, upto.seq)
      from upto where s.site = upto.site returning 1
    )
    select count(*)::int as n from gone`,
  );
  return removed[0]?.n ?? 0;
}
