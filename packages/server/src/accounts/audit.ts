// The audit trail: one row per write request that got past authentication and the rate limit.
// It says who (site, token id), what (operation, account id), when, which request, and how it
// ended; never an email, a password, a hash or a token.

import { desc, eq } from 'drizzle-orm';
import type { Context, MiddlewareHandler } from 'hono';
import type { Db } from '../db/client.ts';
import { auditLog } from '../db/schema.ts';
import type { AppEnv } from '../http/context.ts';
import { describeError, problemCode } from '../http/errors.ts';
import { isUuid } from './ids.ts';

export type WriteOperation = 'create' | 'update' | 'delete' | 'disable' | 'enable' | 'verify' | 'import' | 'export';

export interface AuditEntry {
  operation: WriteOperation;
  userId: string | undefined;
  status: number;
  /** The status text of a success (`user created`), the problem `code` of a failure. */
  outcome: string;
}

/** Writes the row, in the transaction of the write when there is one (runWrite's). */
export async function insertAuditRow(db: Db, c: Context<AppEnv>, entry: AuditEntry): Promise<void> {
  const token = c.get('token');
  await insertAuditRows(db, { site: token.site, tokenId: token.id, requestId: c.get('requestId') }, [entry]);
}

/** Who wrote: a token of a site in a request, or the operator's CLI (token id `cli`). */
export interface AuditSource {
  site: string;
  tokenId: string;
  requestId: string;
}

/** Writes rows of one request at once (an import writes one per account it creates). */
export async function insertAuditRows(db: Db, source: AuditSource, entries: AuditEntry[]): Promise<void> {
  if (entries.length === 0) return;
  await auditInsert(db, source, entries);
}

/** The INSERT of the rows, not yet run: runWrite runs it in one statement with the write's events. */
export function auditInsert(db: Db, source: AuditSource, entries: AuditEntry[]) {
  return db.insert(auditLog).values(
    entries.map((entry) => ({
      ...source,
      operation: entry.operation,
      // Only an id that could name an account: anything else the caller sent stays out of the log.
      userId: entry.userId !== undefined && isUuid(entry.userId) ? entry.userId : null,
      status: entry.status,
      outcome: entry.outcome,
    })),
  );
}

/**
 * The audit middleware of a write operation. A success is recorded by runWrite, in the write's
 * own transaction; this records every other outcome (refusals, failures, idempotent replays),
 * best effort: when the database is down the row is lost, and logged. A success that did not
 * come through runWrite is a bug of ours, refused here so that tests find it.
 */
export function auditWrites(operation: WriteOperation): MiddlewareHandler<AppEnv> {
  return async function auditWritesMiddleware(c, next) {
    const record = { operation, userId: undefined, committed: false };
    c.set('write', record);
    await next();
    if (record.committed) return;
    const replayed = c.res.headers.get('Idempotent-Replayed') === 'true';
    if (c.res.status < 400 && !replayed) {
      throw new Error(`${operation} answered ${c.res.status} without runWrite: no audit row, no deadline check`);
    }
    const outcome = replayed ? 'replayed' : ((await problemCode(c)) ?? String(c.res.status));
    try {
      await insertAuditRow(c.get('deps').database.db, c, {
        operation,
        // A replayed create names its account only in the answer it replays.
        userId: record.userId ?? bodyUserId(c.get('body')) ?? (replayed ? await answeredUserId(c.res) : undefined),
        status: c.res.status,
        outcome,
      });
    } catch (failure) {
      c.get('log').warn({ err: describeError(failure) }, 'audit row not written');
    }
  };
}

/** The `_userId` of a success's answer (`{"result": {"_userId": …}}`), when it has one. */
async function answeredUserId(response: Response): Promise<string | undefined> {
  try {
    const id = ((await response.clone().json()) as { result?: { _userId?: unknown } }).result?._userId;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

/** The `_userId` the caller named, when the body got far enough to name one. */
function bodyUserId(body: unknown): string | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const id = (body as Record<string, unknown>)._userId;
  return typeof id === 'string' ? id : undefined;
}

export async function latestAuditRows(db: Db, options: { limit: number; site?: string | undefined }) {
  return db
    .select()
    .from(auditLog)
    .where(options.site === undefined ? undefined : eq(auditLog.site, options.site))
    .orderBy(desc(auditLog.id))
    .limit(options.limit);
}
