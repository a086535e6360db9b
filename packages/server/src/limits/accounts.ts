// MAX_ACCOUNTS_PER_SITE: an optional bound on the accounts one site keeps in the database every
// site shares. Checked inside the writing transaction, under a per-site lock, so that concurrent
// creates and imports cannot pass it together; the lock is taken only when the bound is set.
import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { users } from '../db/schema.ts';
import { ApiError } from '../errors.ts';

export const accountLimitReached = (limit: number, adding: number) =>
  new ApiError(
    'account_limit_reached',
    adding === 1
      ? `This site already has ${limit} accounts, the most the operator allows (MAX_ACCOUNTS_PER_SITE); nothing was created.`
      : `These ${adding} accounts would take this site beyond ${limit} accounts, the most the operator allows (MAX_ACCOUNTS_PER_SITE); nothing was created.`,
  );

/**
 * Throws 403 `account_limit_reached` when `site` holds too many accounts to take `adding` more.
 * Call inside the transaction that adds them (the lock is held until it ends).
 */
export async function checkAccountLimit(
  tx: Db,
  site: string,
  adding: number,
  limit: number | undefined,
): Promise<void> {
  if (limit === undefined || adding <= 0) return;
  await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`accounts:${site}`}, 0))`);
  // Counts at most limit + 1 rows of the index: the cost stays bounded by the limit.
  const [row] = await tx.select({ n: sql<number>`count(*)::int` }).from(
    tx
      .select({ one: sql`1`.as('one') })
      .from(users)
      .where(and(eq(users.site, site), eq(users.origin, 'api')))
      .limit(limit + 1)
      .as('capped'),
  );
  if ((row?.n ?? 0) + adding > limit) throw accountLimitReached(limit, adding);
}
