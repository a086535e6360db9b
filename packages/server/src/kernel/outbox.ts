// The outbox: the change events a write queues in its own transaction (the unit of work's,
// kernel/unit-of-work.ts), unnumbered, for the sequencer to number once committed. Why a queue
// and then numbers, and the feed that reads them: events/queue.ts and events/sequencer.ts.
import { type SQL, sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import type { Db } from '../db/client.ts';
import { executePrepared } from '../db/client.ts';
import { sqlArray } from '../db/sql-array.ts';
import { emailDeliverableSql } from './email-deliverable.ts';

/** Every change event's type, in the spec's order: the feed's, webhooks' and `cli webhook add --types`' one list. */
export const EVENT_TYPES = [
  'user.created',
  'user.updated',
  'user.deleted',
  'user.disabled',
  'user.enabled',
  'user.unlocked',
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
  'message.sent',
  'message.failed',
  'message.bounced',
  'org.domain_verified',
  'org.connection_created',
  'org.connection_updated',
  'org.connection_deleted',
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

/** The account's linked identities as get answers them (accounts/linked-identities.ts says the same), oldest first. */
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
    'emailDeliverable', ${emailDeliverableSql(sql`u.site`, 'u')},
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

/**
 * The data of the events whose data the database reads (the account, a deletion, a purge), as
 * text rendered once (issue 63: drizzle built and rendered the account's 1.5 KB anew at every
 * write), of the subject `e.subject` (enqueueEvents' one row); they hold no parameter.
 */
const dialect = new PgDialect();
const rendered = (data: SQL) => sql.raw(dialect.sqlToQuery(data).sql);
const SUBJECT = sql.raw('e.subject');
const READ_DATA = {
  account: rendered(accountJson(SUBJECT)),
  deleted: rendered(deletedJson(SUBJECT)),
  purged: rendered(purgedJson(SUBJECT)),
};

/** The data of one event, of the subject `e.subject`. */
function dataOf(entry: EventEntry): SQL {
  if (entry.data !== undefined) return sql`${JSON.stringify(entry.data)}::jsonb`;
  if (entry.factor !== undefined) return factorJson(SUBJECT, entry.factor);
  if (entry.type === 'user.deleted') return READ_DATA.deleted;
  return entry.type === 'user.purged' ? READ_DATA.purged : READ_DATA.account;
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
    await executePrepared(
      tx,
      sql`${done}insert into event_queue (site, type, subject, changed, data)
        select ${site}, ${entry!.type}, e.subject, ${changed[0]}, ${dataOf(entry!)}
        from (select ${entry!.userId}::uuid as subject) e`,
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
