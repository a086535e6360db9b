// Every write goes through runWrite: it owns the transaction, the deadline's point of no return
// and the audit row, so that a handler cannot forget any of them. The audit middleware of the
// operation (audit.ts) records every other outcome (refusals, failures, replays) and refuses an
// answer to a write that did not come through here.
import { sql } from 'drizzle-orm';
import type { Context } from 'hono';
import type { Db } from '../db/client.ts';
import { appendEvents, type EventType, ensureEventSequence } from '../events/queue.ts';
import type { AppEnv } from '../http/context.ts';
import { activeTraceparent } from '../ops/tracing.ts';
import { auditInsert, type WriteOperation } from './audit.ts';

/** The change event of each write that changes accounts (events/queue.ts); verify and export have none. */
const EVENT_OF: Partial<Record<WriteOperation, EventType>> = {
  create: 'user.created',
  update: 'user.updated',
  delete: 'user.deleted',
  disable: 'user.disabled',
  enable: 'user.enabled',
  import: 'user.created',
};

/** How a write request went, as the audit middleware needs to know. */
export interface WriteRecord {
  operation: WriteOperation;
  /** The account the write is about, once the handler named it. */
  userId: string | undefined;
  /** True once runWrite committed the write and its audit row. */
  committed: boolean;
}

export interface WriteDone {
  /** The account written; undefined for a write of many (import), which lists them in `userIds`. */
  userId: string | undefined;
  /** Each account a write of many created: an audit row each (none: one row for the request). */
  userIds?: string[];
  /** The status and status text the handler will answer with, for the audit row. */
  status: number;
  outcome: string;
  /** update: the fields the request set, for its event's changedfields. */
  changed?: string[];
  /** false when the write found nothing to change (disable of a disabled account): no event. */
  emits?: boolean;
}

/**
 * Runs `work` in one transaction. When it returns something (what it wrote), the audit row is
 * written in the same transaction (`done` may be worked out from what was written, by an import
 * whose accounts are known only then) and the deadline's commit point is passed (past the deadline,
 * it throws and everything rolls back: a 503 means nothing changed). When it returns
 * `undefined` it wrote nothing: the transaction commits empty and the handler answers the
 * refusal, which the audit middleware records.
 */
export async function runWrite<T>(
  c: Context<AppEnv>,
  done: WriteDone | ((written: T) => WriteDone),
  work: (tx: Db) => Promise<T | undefined>,
): Promise<T | undefined> {
  const record = c.get('write');
  if (typeof done !== 'function') record.userId = done.userId;
  const { database, outbox } = c.get('deps');
  const tracing = c.get('deps').tracer !== undefined;
  if (outbox !== false && EVENT_OF[record.operation] !== undefined)
    await ensureEventSequence(database.db, c.get('token').site);
  const written = await database.db.transaction(async (tx) => {
    const result = await work(tx);
    if (result === undefined) return undefined;
    const { userIds, changed, emits, ...entry } = typeof done === 'function' ? done(result) : done;
    const token = c.get('token');
    const source = { site: token.site, tokenId: token.id, requestId: c.get('requestId') };
    const ids = userIds ?? (entry.userId === undefined ? [] : [entry.userId]);
    // An audit row per account written (import), else one for the request.
    const audited = (userIds === undefined || userIds.length === 0 ? [entry.userId] : userIds).map((userId) => ({
      operation: record.operation,
      ...entry,
      userId,
    }));
    const audit = auditInsert(tx, source, audited);
    const type = EVENT_OF[record.operation];
    if (type !== undefined && emits !== false && outbox !== false && ids.length > 0) {
      // The audit rows and the events in one statement: a round trip less in every write.
      const events = ids.map((userId) => ({ type, userId, ...(changed === undefined ? {} : { changed }) }));
      // Tracing on: the events keep the write's trace (their column's default reads this setting,
      // local to the transaction), and each webhook delivery of them joins it (webhooks/worker.ts).
      const traceparent = tracing ? activeTraceparent() : undefined;
      if (traceparent !== undefined)
        await tx.execute(sql`select set_config('user_accounts.traceparent', ${traceparent}, true)`);
      await appendEvents(tx, token.site, events, audit.getSQL());
    } else {
      await audit;
    }
    // The last thing before COMMIT, so that nothing of the transaction outlives the deadline.
    c.get('deadline')?.commit();
    return result;
  });
  record.committed = written !== undefined;
  // With the outbox off there is nothing of ours to number (the poll still numbers other servers').
  if (written !== undefined && outbox !== false) c.get('deps').sequencer?.kick();
  return written;
}
