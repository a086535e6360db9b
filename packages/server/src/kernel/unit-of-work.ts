// The unit of work: every write — an HTTP request, the CLI's import, a background job — goes
// through inWrite, which owns the transaction, the deadline's point of no return, the audit rows
// and the change events, so that no caller can forget any of them. It knows nothing of HTTP: a
// caller describes itself with a WriteScope.
import { and, eq, type SQL, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { auditLog, idempotencyKeys } from '../db/schema.ts';
import { lockWaitConflict } from '../errors.ts';
import type { TransactionShare } from '../limits/transactions.ts';
import { activeTraceparent } from '../tracing.ts';
import { auditInsert, type WriteOperation } from './audit.ts';
import { type EventEntry, type EventType, enqueueEvents } from './outbox.ts';
import type { KeyRing } from './secret-box.ts';
import type { SignInGate } from './sign-in-gate.ts';

/** Who writes, for whom and until when: what a write needs to know of its caller. */
export interface WriteScope {
  /** The site whose accounts are written. */
  site: string;
  /** Who writes, as the audit trail names them: a token's id, `cli` (the operator) or `job`. */
  actor: string;
  /** Groups the audit rows of one request, or of one CLI run. */
  requestId: string;
  /**
   * The point of no return, called inside the transaction just before it commits: throws (and so
   * rolls back) once the caller can no longer be told the write happened. Absent: no deadline.
   */
  deadline?: { commit(): void; readonly signal?: AbortSignal } | undefined;
  /**
   * The Idempotency-Key the caller claimed for this write: its answer is kept in the write's own
   * transaction, so that a retry after a crash finds either nothing done or the answer to replay.
   */
  idempotency?: { key: string; maxBody: number } | undefined;
  /** Told how the write goes, as it goes (the HTTP audit step records the rest from it). */
  report?: ((news: WriteNews) => void) | undefined;
  /** The sign-in provider the write came through (provider/callback), for its audit rows. */
  provider?: string | undefined;
}

/** What a write tells its caller's report as it goes. */
export interface WriteNews {
  /** The account the write is about, once named. */
  userId?: string | undefined;
  /** The write and its audit rows committed. */
  committed?: boolean;
  /** The answer for the caller's Idempotency-Key was kept in the write's transaction. */
  answerKept?: boolean;
}

/** What a write may use: the database and what follows a commit. */
export interface WriteDeps {
  db: Db;
  /** false only in the benchmark (OUTBOX_DISABLED): writes then queue no events. */
  outbox?: boolean | undefined;
  /** Tracing on: the events keep the write's trace. */
  tracing?: boolean | undefined;
  /** Numbers committed events; kicked after a write that queued some, so that they are out at once. */
  sequencer?: { kick(site?: string): void } | undefined;
  /**
   * The site's share of the pool's connections (limits/transactions.ts): the write waits for a
   * slot of its site before it begins, without a connection. Absent: no bound (the CLI, tests).
   */
  share?: TransactionShare | undefined;
  /** FACTOR_ENCRYPTION_KEY's ring (or the embedded database's key file): what keys the login tickets. */
  factorKeys?: KeyRing | undefined;
  /** Which logins the site's organizations refuse (kernel/sign-in-gate.ts); absent: none (the CLI, tests). */
  signInGate?: SignInGate | undefined;
}

/** The change event of each write that changes accounts (kernel/outbox.ts); verify and export have none. */
const EVENT_OF: Partial<Record<WriteOperation, EventType>> = {
  create: 'user.created',
  update: 'user.updated',
  delete: 'user.deleted',
  disable: 'user.disabled',
  enable: 'user.enabled',
  unlock: 'user.unlocked',
  restore: 'user.restored',
  purge: 'user.purged',
  import: 'user.created',
  // An account made from an identity (identities/): its user.identity_linked follows (moreEvents).
  identity_create: 'user.created',
  // A factor counts once enabled: a pending one is no factor yet (factors/factors.ts); a TOTP
  // factor's add is pending (no event), a passkey's is enabled at once (factors/passkeys.ts).
  factor_add: 'user.factor_added',
  factor_confirm: 'user.factor_added',
  factor_remove: 'user.factor_removed',
  // A ticket redeemed changes the account (issuing one does not).
  redeem: 'user.updated',
  // A right password at verify found in the breach corpus (passwords/screening.ts).
  password_breached: 'user.password_breached',
};

export interface WriteDone {
  /** The account written; undefined for a write of many (import), which lists them in `userIds`. */
  userId: string | undefined;
  /** Each account a write of many created: an audit row each (none: one row for the request). */
  userIds?: string[];
  /** The status and status text the caller will answer with, for the audit row. */
  status: number;
  outcome: string;
  /** session_impersonate: who impersonated the account and why, for its audit row. */
  impersonator?: { actor: string; reason: string };
  /** update: the fields the request set, for its event's changedfields. */
  changed?: string[];
  /** factor_confirm, factor_remove: the factor, for the event's data. */
  factor?: { factorId: string; type: string };
  /**
   * Factors the write enabled beside its own change (an import's TOTP factors): each one more
   * audit row (factor_add, `factor enabled`) and a user.factor_added event after the write's own.
   */
  factorsAdded?: { userId: string; factor: { factorId: string; type: string } }[];
  /** false when the write found nothing to change (disable of a disabled account): no event. */
  emits?: boolean;
  /**
   * Events after the write's own, whatever its operation (the sessions a password change, a
   * disable or a delete ended; a session made or ended: sessions/), in this order.
   */
  moreEvents?: EventEntry[];
  /** The answer the caller gives with `status`, kept for its Idempotency-Key (see WriteScope). */
  answer?: KeptAnswer;
}

/** What a write's work may use beside its transaction. */
export interface WriteTools {
  /**
   * The write's audit row as an INSERT for one of the work's own statements (a CTE), for a write
   * whose status is known only in that statement (verify's success: 200, or 403 when the account
   * has a second factor); `when` says whether it writes at all. Called, the unit of work writes no
   * row of its own: the row goes with the work's statement, a round trip less. Not for a write
   * with events, whose rows share the events' statement.
   */
  auditIn(entry: { userId: string; status: SQL; outcome: SQL; when: SQL }): SQL;
}

/** An answer as kept for an Idempotency-Key: its body as sent and the headers that are part of it. */
export interface KeptAnswer {
  body: string;
  /** Lower-case names: content-type, location, etag. */
  headers: Record<string, string>;
}

/**
 * The answer to keep with the write, if any: only for a claimed key, and only a body up to the
 * key's bound (a larger one is not kept, and the retry runs again).
 */
function answerToKeep(scope: WriteScope, answer: KeptAnswer | undefined): KeptAnswer | undefined {
  if (scope.idempotency === undefined || answer === undefined) return undefined;
  return Buffer.byteLength(answer.body) <= scope.idempotency.maxBody ? answer : undefined;
}

/** Stores the answer of a claimed key: from then on, each retry with the key replays it. */
export async function keepAnswer(db: Db, tokenId: string, key: string, status: number, answer: KeptAnswer) {
  await db
    .update(idempotencyKeys)
    .set({ status, body: answer.body, headers: answer.headers, lockedUntil: null })
    .where(and(eq(idempotencyKeys.tokenId, tokenId), eq(idempotencyKeys.key, key)));
}

/**
 * How many times a write runs at most when the database rolls it back for a collision with
 * concurrent writes (see RETRIED_STATES): enough for the few that collide on the same rows at
 * once, few enough that a write under contention is answered within its deadline.
 */
export const WRITE_ATTEMPTS = 3;

/**
 * SQLSTATEs after which a write may run again as it is: PostgreSQL rolled the whole transaction
 * back (deadlock_detected, serialization_failure), so nothing of it happened, and nothing outside
 * the database happened yet (a write's events are sent only after it commits). The caller's
 * refusal is 409 `conflict` once the attempts are spent (http/app.ts).
 */
export const RETRIED_STATES: ReadonlySet<string> = new Set(['40P01', '40001']);

/**
 * lock_not_available: a statement waited on a lock longer than the connection's lock_timeout
 * (db/client.ts), because another write holds the row or the lock. Rolled back whole as the others,
 * but not run again: it would queue on the same lock. The caller's refusal is the same 409.
 */
export const LOCK_TIMEOUT_STATE = '55P03';

/** The SQLSTATE of `error` or of its causes (drizzle wraps the driver's error), if any is one of `states`. */
function stateIn(error: unknown, states: ReadonlySet<string>): boolean {
  let e = error as { code?: unknown; cause?: unknown } | undefined;
  for (let depth = 0; e !== undefined && e !== null && depth < 5; depth++, e = e.cause as typeof e) {
    if (typeof e.code === 'string' && states.has(e.code)) return true;
  }
  return false;
}

/** Whether `error` (or its cause, as drizzle wraps the driver's error) is a collision worth a retry. */
export function isWriteCollision(error: unknown): boolean {
  return stateIn(error, RETRIED_STATES);
}

const LOCK_TIMEOUT: ReadonlySet<string> = new Set([LOCK_TIMEOUT_STATE]);

/**
 * Runs `work` in one transaction. A transaction the database rolled back for a collision with
 * concurrent writes (a deadlock, a serialization failure) runs again, `work` included, up to
 * WRITE_ATTEMPTS times in all and only while the caller's deadline has not passed (its signal not
 * aborted); then the collision is thrown. `work` and `done` must therefore do nothing outside the
 * transaction that a second run would repeat (they don't: hashes and checks come before inWrite). When it returns something (what it wrote), the audit rows and
 * the events are written in the same transaction (`done` may be worked out from what was written,
 * by an import whose accounts are known only then) and the deadline's commit point is passed (past
 * the deadline, it throws and everything rolls back: a 503 means nothing changed). When it returns
 * `undefined` it wrote nothing: the transaction commits empty and the caller tells the refusal.
 */
export async function inWrite<T>(
  scope: WriteScope,
  deps: WriteDeps,
  operation: WriteOperation,
  done: WriteDone | ((written: T) => WriteDone),
  work: (tx: Db, tools: WriteTools) => Promise<T | undefined>,
): Promise<T | undefined> {
  if (typeof done !== 'function') scope.report?.({ userId: done.userId });
  // The site's slot, held for every attempt: its other writes wait without a connection meanwhile.
  const leave = deps.share === undefined ? undefined : await deps.share.enter(scope.site, scope.deadline?.signal);
  try {
    for (let attempt = 1; ; attempt++) {
      try {
        return await writeOnce(scope, deps, operation, done, work);
      } catch (error) {
        // A lock waited for too long: the write's own refusal (outside a write, 55P03 is a 503).
        if (stateIn(error, LOCK_TIMEOUT)) throw lockWaitConflict(error);
        if (!isWriteCollision(error) || attempt >= WRITE_ATTEMPTS || scope.deadline?.signal?.aborted) throw error;
        // A short pause, longer each time and jittered, so that the colliding writes do not meet again at once.
        await new Promise((resolve) => setTimeout(resolve, attempt * (5 + Math.random() * 20)));
      }
    }
  } finally {
    leave?.();
  }
}

/** One run of inWrite's transaction. */
async function writeOnce<T>(
  scope: WriteScope,
  deps: WriteDeps,
  operation: WriteOperation,
  done: WriteDone | ((written: T) => WriteDone),
  work: (tx: Db, tools: WriteTools) => Promise<T | undefined>,
): Promise<T | undefined> {
  let queued = false;
  let answerKept = false;
  const written = await deps.db.transaction(async (tx) => {
    let auditedInWork = false;
    const tools: WriteTools = {
      auditIn: ({ userId, status, outcome, when }) => {
        auditedInWork = true;
        return sql`insert into ${auditLog} (site, token_id, operation, user_id, request_id, status, outcome, provider)
          select ${scope.site}, ${scope.actor}, ${operation}, ${userId}, ${scope.requestId}, ${status}, ${outcome}, ${scope.provider ?? null}
          where ${when}`;
      },
    };
    const result = await work(tx, tools);
    if (result === undefined) return undefined;
    const { userIds, changed, emits, answer, factor, factorsAdded, moreEvents, ...entry } =
      typeof done === 'function' ? done(result) : done;
    const source = { site: scope.site, tokenId: scope.actor, requestId: scope.requestId, provider: scope.provider };
    const ids = userIds ?? (entry.userId === undefined ? [] : [entry.userId]);
    // An audit row per account written (import), else one for the request.
    const audited = (userIds === undefined || userIds.length === 0 ? [entry.userId] : userIds).map((userId) => ({
      operation,
      ...entry,
      userId,
    }));
    const added = factorsAdded ?? [];
    for (const { userId } of added)
      audited.push({ operation: 'factor_add', status: entry.status, outcome: 'factor enabled', userId });
    const audit = auditInsert(tx, source, audited);
    const type = EVENT_OF[operation];
    const own = type !== undefined && emits !== false && ids.length > 0;
    const more = moreEvents ?? [];
    if ((own || more.length > 0) && deps.outbox !== false) {
      if (auditedInWork) throw new Error('auditIn is not for a write with events: they share one statement');
      // The audit rows and the events in one statement: a round trip less in every write.
      const events: EventEntry[] = own
        ? ids.map((userId) => ({
            type,
            userId,
            ...(changed === undefined ? {} : { changed }),
            ...(factor === undefined ? {} : { factor }),
          }))
        : [];
      if (own) for (const { userId, factor } of added) events.push({ type: 'user.factor_added', userId, factor });
      events.push(...more);
      // Tracing on: the events keep the write's trace (their column's default reads this setting,
      // local to the transaction), and each webhook delivery of them joins it (events/webhooks/worker.ts).
      const traceparent = deps.tracing ? activeTraceparent() : undefined;
      if (traceparent !== undefined)
        await tx.execute(sql`select set_config('user_accounts.traceparent', ${traceparent}, true)`);
      await enqueueEvents(tx, scope.site, events, audit.getSQL());
      queued = true;
    } else if (auditedInWork) {
      // The work's own statement wrote the row (tools.auditIn).
      if (audited.length !== 1) throw new Error('auditIn writes one row: a write of one account');
    } else {
      await audit;
    }
    const kept = answerToKeep(scope, answer);
    if (kept !== undefined) await keepAnswer(tx, scope.actor, scope.idempotency!.key, entry.status, kept);
    answerKept = kept !== undefined;
    // The last thing before COMMIT, so that nothing of the transaction outlives the deadline.
    scope.deadline?.commit();
    return result;
  });
  if (written === undefined) return undefined;
  scope.report?.({ committed: true, answerKept });
  // Only a write that queued events has something to number: verify and export never run the sequencer.
  if (queued) deps.sequencer?.kick(scope.site);
  return written;
}
