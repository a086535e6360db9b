// Guessing limits of `verify`: failed checks counted per site and identifier (and per end-user
// address), in the database so that every server of a deployment shares them. An identifier is
// counted whether or not an account has it, so a lockout says nothing about which emails exist.
import { createHash } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import type { Db } from './db/client.ts';
import { verifyFailures } from './db/schema.ts';

export interface LockoutPolicy {
  /** Failures allowed before a lock. */
  limit: number;
  /** The count starts again after this long without a failure (or since the last lock ended). */
  windowSeconds: number;
  /** The first lock; each further failure doubles it, up to `maxLockSeconds`. */
  lockSeconds: number;
  maxLockSeconds: number;
}

export interface VerifyLimits {
  identifier: LockoutPolicy;
  address: LockoutPolicy;
}

/** 10 failures within 15 minutes lock for 1 minute, doubling up to a day; 100 an hour per address. */
export const DEFAULT_VERIFY_LIMITS: VerifyLimits = {
  identifier: { limit: 10, windowSeconds: 15 * 60, lockSeconds: 60, maxLockSeconds: 24 * 3600 },
  address: { limit: 100, windowSeconds: 3600, lockSeconds: 3600, maxLockSeconds: 3600 },
};

/** The key of a counter: a digest, so that no email or address is stored in plain text. */
export const lockoutKey = (site: string, kind: 'email' | 'id' | 'address', value: string): string =>
  createHash('sha256').update(`${site}\n${kind}\n${value}`).digest('hex');

/**
 * Counts an attempt as a failure before its password is checked, so that guesses sent at once
 * cannot all pass the check before any of them is counted: each attempt takes the key's row lock,
 * and one made while the key is locked is refused (and not counted). Returns the seconds left of
 * the lock that refused it, or 0 when the attempt may go on. The limit reached, the key is locked
 * (the longer the more failures); undoAttempt or clearFailures take the count back on success.
 */
export async function attempt(db: Db, key: string, policy: LockoutPolicy): Promise<number> {
  return db.transaction(async (tx) => {
    const [row] = await tx
      .select({ wait: sql<number>`ceil(extract(epoch from (${verifyFailures.lockedUntil} - now())))::int` })
      .from(verifyFailures)
      .where(eq(verifyFailures.key, key))
      .for('update');
    const wait = Number(row?.wait ?? 0);
    if (wait > 0) return wait;
    await countFailure(tx, key, policy);
    return 0;
  });
}

async function countFailure(db: Db, key: string, policy: LockoutPolicy): Promise<void> {
  const window = sql`make_interval(secs => ${policy.windowSeconds})`;
  // The count starts again once a window has passed since the last failure or the last lock's end.
  const stale = sql`greatest(${verifyFailures.windowStart}, coalesce(${verifyFailures.lockedUntil}, ${verifyFailures.windowStart})) + ${window} <= now()`;
  const failures = sql`case when ${stale} then 1 else ${verifyFailures.failures} + 1 end`;
  const lock = sql`least(${policy.lockSeconds}::float8 * power(2, greatest(0, ${failures} - ${policy.limit})), ${policy.maxLockSeconds}::float8)`;
  await db
    .insert(verifyFailures)
    .values({
      key,
      failures: 1,
      windowStart: sql`now()`,
      lockedUntil: policy.limit <= 1 ? sql`now() + make_interval(secs => ${policy.lockSeconds})` : null,
    })
    .onConflictDoUpdate({
      target: verifyFailures.key,
      set: {
        failures,
        windowStart: sql`now()`,
        lockedUntil: sql`case when ${failures} >= ${policy.limit} then now() + make_interval(secs => ${lock})
          when ${stale} then null else ${verifyFailures.lockedUntil} end`,
      },
    });
}

/** The attempt was not a failure after all: its count is taken back (a lock it set stays). */
export async function undoAttempt(db: Db, key: string): Promise<void> {
  await db
    .update(verifyFailures)
    .set({ failures: sql`greatest(${verifyFailures.failures} - 1, 0)` })
    .where(eq(verifyFailures.key, key));
}

/** A success: the identifier's count starts again, its lock lifted. */
export async function clearFailures(db: Db, key: string): Promise<void> {
  await db.delete(verifyFailures).where(eq(verifyFailures.key, key));
}

/** Counters with no failure for a day and no lock in force: housekeeping removes them. */
export async function purgeStaleFailures(db: Db): Promise<void> {
  await db
    .delete(verifyFailures)
    .where(
      sql`${verifyFailures.windowStart} < now() - interval '1 day' and coalesce(${verifyFailures.lockedUntil}, now()) <= now()`,
    );
}
