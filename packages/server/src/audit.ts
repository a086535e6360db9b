// The audit trail: one row per write request that got past authentication and the rate limit.
// It says who (site, token id), what (operation, account id), when, which request, and how it
// ended; never an email, a password, a hash or a token.
import type { Context, MiddlewareHandler } from 'hono';
import { desc, eq } from 'drizzle-orm';
import type { AppEnv } from './context.ts';
import type { Db } from './db/client.ts';
import { auditLog } from './db/schema.ts';
import { ApiError, describeError } from './errors.ts';
import { isUuid } from './ids.ts';

export type WriteOperation = 'create' | 'update' | 'delete';

export interface AuditEntry {
  operation: WriteOperation;
  userId: string | undefined;
  status: number;
  /** The status text of a success (`user created`), the problem `code` of a failure. */
  outcome: string;
}

/**
 * Writes the row; pass the transaction of the write so that both land or neither does, and set
 * `audited` once it has committed. It is the last statement of every write's transaction, so it
 * is also where a write that missed its deadline is rolled back.
 */
export async function recordAudit(db: Db, c: Context<AppEnv>, entry: AuditEntry): Promise<void> {
  c.get('deadline')?.commit();
  const token = c.get('token');
  await db.insert(auditLog).values({
    site: token.site,
    tokenId: token.id,
    operation: entry.operation,
    // Only an id that could name an account: anything else the caller sent stays out of the log.
    userId: entry.userId !== undefined && isUuid(entry.userId) ? entry.userId : null,
    requestId: c.get('requestId'),
    status: entry.status,
    outcome: entry.outcome,
  });
}

/**
 * Records the outcome of a write that did not record it itself: every refusal and failure, and
 * idempotent replays. Best effort: when the database is down the row is lost, and logged.
 */
export function auditWrites(operation: WriteOperation): MiddlewareHandler<AppEnv> {
  return async function auditWritesMiddleware(c, next) {
    c.set('audited', false);
    await next();
    if (c.get('audited')) return;
    const outcome =
      c.res.headers.get('Idempotent-Replayed') === 'true'
        ? 'replayed'
        : c.error instanceof ApiError
          ? c.error.code
          : ((await problemCode(c.res)) ?? String(c.res.status));
    try {
      await recordAudit(c.get('deps').database.db, c, {
        operation,
        userId: c.get('auditUserId') ?? bodyUserId(c.get('body')),
        status: c.res.status,
        outcome,
      });
    } catch (failure) {
      c.get('log').warn({ err: describeError(failure) }, 'audit row not written');
    }
  };
}

/** The `_userId` the caller named, when the body got far enough to name one. */
function bodyUserId(body: unknown): string | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const id = (body as Record<string, unknown>)._userId;
  return typeof id === 'string' ? id : undefined;
}

async function problemCode(response: Response): Promise<string | undefined> {
  if (response.headers.get('content-type') !== 'application/problem+json') return undefined;
  try {
    return ((await response.clone().json()) as { code?: string }).code;
  } catch {
    return undefined;
  }
}

export async function latestAuditRows(db: Db, options: { limit: number; site?: string | undefined }) {
  return db
    .select()
    .from(auditLog)
    .where(options.site === undefined ? undefined : eq(auditLog.site, options.site))
    .orderBy(desc(auditLog.id))
    .limit(options.limit);
}
