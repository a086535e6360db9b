// Periodic chores of a running server. Each is idempotent, so every replica may run them.
import { and, isNotNull, lt, type SQL, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { purgeDeleted } from '../accounts/delete.ts';
import { endDueSuspensions } from '../accounts/suspensions.ts';
import type { TokenVerifier } from '../auth/tokens.ts';
import { type Db, rows } from '../db/client.ts';
import { idempotencyKeys, passkeyChallenges, rateLimits, sessionReplacedTokens, tickets } from '../db/schema.ts';
import { describeError } from '../errors.ts';
import { PRUNE_BATCH, pruneEvents } from '../events/queue.ts';
import type { HookDeps } from '../kernel/account-hooks.ts';
import type { WriteDeps } from '../kernel/unit-of-work.ts';
import { purgeStaleFailures } from '../limits/lockout.ts';
import { dropExpiredFlows } from '../providers/flow.ts';
import { REFRESH_WINDOW_SECONDS } from '../sessions/rules.ts';

const LAST_USED_EVERY_MS = 30_000;
const PURGE_EVERY_MS = 10 * 60_000;
/** How late a timed suspension may end after its `until` (the spec says 5 seconds). */
export const SUSPENSIONS_EVERY_MS = 5_000;
/** How late an account is purged after its grace period (the spec says within a minute). */
export const DELETED_EVERY_MS = 30_000;

/**
 * Deletes idempotency keys past their 24 hours, rate-limit windows long over, stale verify counts,
 * expired tickets and expired passkey challenges (a site that stops asking for options would
 * otherwise keep its last ones, up to CHALLENGES_PER_SITE), refresh successor masks past their
 * grace window, replaced tokens that carry their locator past the refresh window, and sessions ended a month ago (their replaced tokens with them).
 */
export async function purgeExpired(db: Db): Promise<void> {
  await db.delete(idempotencyKeys).where(lt(idempotencyKeys.createdAt, sql`now() - interval '24 hours'`));
  await db.delete(rateLimits).where(lt(rateLimits.windowStart, sql`now() - interval '2 days'`));
  await purgeStaleFailures(db);
  // Expired tickets are misses already (every lookup says expires_at > now()): their rows go.
  await db.delete(tickets).where(lt(tickets.expiresAt, sql`now()`));
  await db.delete(passkeyChallenges).where(lt(passkeyChallenges.expiresAt, sql`now()`));
  // Sign-ins never completed, link tickets never used (issue 59): ten minutes each.
  await dropExpiredFlows(db);
  // A refresh's successor masks serve its grace window only (sessions/refresh.ts): cleared after.
  await db
    .update(sessionReplacedTokens)
    .set({ successorMasks: null })
    .where(
      and(
        isNotNull(sessionReplacedTokens.successorMasks),
        lt(sessionReplacedTokens.replacedAt, sql`now() - interval '1 minute'`),
      ),
    );
  // A replaced token that carries its session's locator is kept for the refresh window only
  // (sessions/refresh.ts): past it, the locator finds its session. A session's next refresh
  // deletes its own; these are those of sessions refreshed no more.
  await db
    .delete(sessionReplacedTokens)
    .where(
      and(
        sql`not ${sessionReplacedTokens.lifelong}`,
        lt(sessionReplacedTokens.replacedAt, sql`now() - make_interval(secs => ${REFRESH_WINDOW_SECONDS})`),
      ),
    );
  // Sessions ended (revoked, expired, idle too long) 30 days ago and more: the person's data and
  // support saw them for a month; a session's token is refused whether or not its row is kept.
  await deleteInBatches(
    db,
    'sessions',
    sql`least(coalesce(revoked_at, expires_at), expires_at, last_seen_at + make_interval(secs => idle_seconds))
      < now() - interval '${sql.raw(String(ENDED_SESSIONS_KEPT_DAYS))} days'`,
  );
}

/** How long an ended session's row is kept (user data shows it), in days. */
export const ENDED_SESSIONS_KEPT_DAYS = 30;

/**
 * Deletes the rows of `table` (keyed by `id`) that `where` picks, in statements of at most
 * PRUNE_BATCH rows: a week of deliveries, or a year of audit rows, at once would outlast
 * statement_timeout, and fail again at every run. Returns how many.
 */
async function deleteInBatches(
  db: Db,
  table: 'webhook_deliveries' | 'audit_log' | 'sessions',
  where: SQL,
): Promise<number> {
  let total = 0;
  for (;;) {
    const [gone] = await rows<{ n: number }>(
      db,
      sql`with gone as (
        delete from ${sql.raw(table)} where id in (select id from ${sql.raw(table)} where ${where} limit ${PRUNE_BATCH})
        returning 1
      ) select count(*)::int as n from gone`,
    );
    const n = gone?.n ?? 0;
    total += n;
    if (n < PRUNE_BATCH) return total;
  }
}

const olderThan = (column: SQL, ms: number) => sql`${column} < now() - make_interval(secs => ${Math.floor(ms / 1000)})`;

/** Removes events past the retention, and deliveries done (or given up) as long ago. */
export async function purgeEvents(db: Db, retentionMs: number): Promise<void> {
  await pruneEvents(db, retentionMs);
  await deleteInBatches(
    db,
    'webhook_deliveries',
    sql`state <> 'pending' and ${olderThan(sql`created_at`, retentionMs)}`,
  );
}

/** Removes audit rows older than the retention (AUDIT_RETENTION), by the index on their time. */
export async function purgeAudit(db: Db, retentionMs: number): Promise<number> {
  return deleteInBatches(db, 'audit_log', olderThan(sql`at`, retentionMs));
}

export function startHousekeeping(
  db: Db,
  tokens: TokenVerifier,
  logger: Logger,
  options: {
    eventsRetentionMs: number;
    auditRetentionMs: number | null;
    /** What the chores that change accounts write with (the unit of work's deps). */
    writes: WriteDeps & HookDeps;
    suspensionsEveryMs?: number;
  },
): { stop(): Promise<void> } {
  const run = (name: string, chore: () => Promise<void>) => () =>
    chore().catch((error: unknown) => logger.warn({ err: describeError(error) }, `${name} failed; will retry`));
  const flush = run('recording token last-used times', () => tokens.flushLastUsed());
  const timers = [
    setInterval(flush, LAST_USED_EVERY_MS),
    setInterval(
      run('ending timed suspensions', () => endDueSuspensions(options.writes).then(() => {})),
      options.suspensionsEveryMs ?? SUSPENSIONS_EVERY_MS,
    ),
    setInterval(
      run('purging accounts past their grace period', () => purgeDeleted(options.writes).then(() => {})),
      DELETED_EVERY_MS,
    ),
    setInterval(
      run('purging expired idempotency keys', () => purgeExpired(db)),
      PURGE_EVERY_MS,
    ),
    setInterval(
      run('purging events past their retention', () => purgeEvents(db, options.eventsRetentionMs)),
      PURGE_EVERY_MS,
    ),
  ];
  const { auditRetentionMs } = options;
  if (auditRetentionMs !== null)
    timers.push(
      setInterval(
        run('purging audit rows past their retention', () => purgeAudit(db, auditRetentionMs).then(() => {})),
        PURGE_EVERY_MS,
      ),
    );
  for (const timer of timers) timer.unref();
  return {
    async stop() {
      for (const timer of timers) clearInterval(timer);
      await flush();
    },
  };
}
