// Periodic chores of a running server. Each is idempotent, so every replica may run them.
import { lt, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { type Db, rows } from './db/client.ts';
import { idempotencyKeys, rateLimits } from './db/schema.ts';
import { describeError } from './errors.ts';
import { PRUNE_BATCH, pruneEvents } from './events.ts';
import { purgeStaleFailures } from './lockout.ts';
import type { TokenVerifier } from './tokens.ts';

const LAST_USED_EVERY_MS = 30_000;
const PURGE_EVERY_MS = 10 * 60_000;

/** Deletes idempotency keys past their 24 hours, rate-limit windows long over, and stale verify counts. */
export async function purgeExpired(db: Db): Promise<void> {
  await db.delete(idempotencyKeys).where(lt(idempotencyKeys.createdAt, sql`now() - interval '24 hours'`));
  await db.delete(rateLimits).where(lt(rateLimits.windowStart, sql`now() - interval '2 days'`));
  await purgeStaleFailures(db);
}

/**
 * Removes events past the retention, and deliveries done (or given up) as long ago, in statements
 * of at most PRUNE_BATCH rows: a week of deliveries at once would outlast statement_timeout, and
 * fail again at every run.
 */
export async function purgeEvents(db: Db, retentionMs: number): Promise<void> {
  await pruneEvents(db, retentionMs);
  for (;;) {
    const [gone] = await rows<{ n: number }>(
      db,
      sql`with gone as (
        delete from webhook_deliveries where id in (
          select id from webhook_deliveries
          where state <> 'pending' and created_at < now() - make_interval(secs => ${Math.floor(retentionMs / 1000)})
          limit ${PRUNE_BATCH})
        returning 1
      ) select count(*)::int as n from gone`,
    );
    if ((gone?.n ?? 0) < PRUNE_BATCH) return;
  }
}

export function startHousekeeping(
  db: Db,
  tokens: TokenVerifier,
  logger: Logger,
  options: { eventsRetentionMs: number },
): { stop(): Promise<void> } {
  const run = (name: string, chore: () => Promise<void>) => () =>
    chore().catch((error: unknown) => logger.warn({ err: describeError(error) }, `${name} failed; will retry`));
  const flush = run('recording token last-used times', () => tokens.flushLastUsed());
  const timers = [
    setInterval(flush, LAST_USED_EVERY_MS),
    setInterval(
      run('purging expired idempotency keys', () => purgeExpired(db)),
      PURGE_EVERY_MS,
    ),
    setInterval(
      run('purging events past their retention', () => purgeEvents(db, options.eventsRetentionMs)),
      PURGE_EVERY_MS,
    ),
  ];
  for (const timer of timers) timer.unref();
  return {
    async stop() {
      for (const timer of timers) clearInterval(timer);
      await flush();
    },
  };
}
