// An account's lockout (issue 64, point 1): what `get` shows of verify's guessing limits for one
// account, and `unlock`, which support staff call to lift it. Per account only: the counters of
// end users' addresses (limits/lockout.ts's 'address' keys) are neither shown nor cleared.

import type { components } from '@user-accounts/client';
import { and, eq, type SQL, sql } from 'drizzle-orm';
import { users, verifyFailures } from '../db/schema.ts';
import { userNotFound } from '../errors.ts';
import { secondFactorLockoutKey } from '../factors/factors.ts';
import { isUuid } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { type LockoutPolicy, type LockoutState, type LockoutStore, lockoutKey } from '../limits/lockout.ts';
import { type IfMatch, matchingIfMatch, notWritten } from './conditions.ts';

export type AccountLockout = components['schemas']['AccountLockout'];

/** The account's two counters: its passwords' (by its id, whichever identifier named it) and its second step's. */
const accountKeys = (site: string, userId: string) => ({
  password: lockoutKey(site, 'id', userId.toLowerCase()),
  secondFactor: secondFactorLockoutKey(site, userId),
});

/**
 * The same two counters as columns of a select of `users` on the database store (get's prepared
 * read: no round trip more), the keys worked out in SQL as lockoutKey does; `site` is the token's.
 */
export function lockoutColumns(site: SQL.Aliased | SQL | ReturnType<typeof sql.placeholder>) {
  const key = (suffix: SQL) =>
    sql`encode(sha256(convert_to(${site}::text || chr(10) || 'id' || chr(10) || ${suffix}, 'UTF8')), 'hex')`;
  const counter = (k: SQL) =>
    sql<StoredCounter | null>`(select jsonb_build_object('failures', f.failures, 'last', f.window_start,
      'locked', f.locked_until) from ${verifyFailures} f where f.key = ${k})`;
  const id = sql`lower(${users.id}::text)`;
  return {
    passwordCounter: counter(key(id)),
    secondFactorCounter: counter(key(sql`${id} || chr(10) || 'second_factor'`)),
  };
}

/** A counter as lockoutColumns reads it (timestamps as JSON text). */
export interface StoredCounter {
  failures: number;
  last: string;
  locked: string | null;
}

export const fromColumn = (c: StoredCounter | null): LockoutState | undefined =>
  c === null
    ? undefined
    : {
        failures: c.failures,
        lastFailureAt: new Date(c.last),
        lockedUntil: c.locked === null ? null : new Date(c.locked),
      };

/** The account's counters from the store itself (Redis, which falls back to the database). */
export async function readCounters(
  lockout: LockoutStore,
  site: string,
  userId: string,
): Promise<[LockoutState | undefined, LockoutState | undefined]> {
  const keys = accountKeys(site, userId);
  return Promise.all([lockout.read(keys.password), lockout.read(keys.secondFactor)]);
}

/**
 * What `get` answers of the counters, under `policy` (VERIFY_LIMIT's per account), at `now`: a
 * lock in force, and the failures that still count (none once a window has passed since the last
 * one and since the end of its last lock, as attempt() starts the count again).
 */
export function lockoutOf(
  password: LockoutState | undefined,
  secondFactor: LockoutState | undefined,
  policy: LockoutPolicy,
  now = Date.now(),
): AccountLockout {
  const counting = (state: LockoutState | undefined) => {
    if (state === undefined) return { failures: 0, until: undefined, last: undefined };
    const lockEnd = state.lockedUntil?.getTime();
    const since = Math.max(state.lastFailureAt.getTime(), lockEnd ?? 0);
    const fresh = since + policy.windowSeconds * 1000 > now;
    return {
      failures: fresh ? state.failures : 0,
      until: lockEnd !== undefined && lockEnd > now ? lockEnd : undefined,
      last: fresh ? state.lastFailureAt.getTime() : undefined,
    };
  };
  const [p, s] = [counting(password), counting(secondFactor)];
  const until = Math.max(p.until ?? 0, s.until ?? 0);
  const last = Math.max(p.last ?? 0, s.last ?? 0);
  return {
    locked: until > 0,
    lockedUntil: until > 0 ? new Date(until).toISOString() : null,
    failures: p.failures,
    secondFactorFailures: s.failures,
    lastFailureAt: last > 0 ? new Date(last).toISOString() : null,
  };
}

export interface UnlockDeps extends WriteDeps {
  lockout: LockoutStore;
}

/**
 * Clears the account's failure counts (its passwords', by id and by its email as given before it
 * existed, and its second step's) in every store, audited (`unlock`) with a `user.unlocked` event
 * when there was any. 404 when the account is not in reach, 412 when If-Match names another version.
 * With the counts in this database they go in the write's transaction; with Redis, just before it
 * (a count cleared for a write that then failed is a lock lifted a moment early, never one left).
 */
export async function unlockAccount(
  scope: WriteScope,
  deps: UnlockDeps,
  userId: string,
  ifMatch: IfMatch,
): Promise<{ version: number }> {
  if (!isUuid(userId)) throw userNotFound();
  const account = and(eq(users.id, userId), inReachOf(scope.site));
  const current = matchingIfMatch(account, ifMatch);
  const [found] = await deps.db.select({ email: users.email }).from(users).where(current).limit(1);
  if (found === undefined) throw await notWritten(deps.db, account, ifMatch);
  const { password, secondFactor } = accountKeys(scope.site, userId);
  const keys = [password, secondFactor, lockoutKey(scope.site, 'email', found.email.toLowerCase())];
  const elsewhere = deps.lockout.inTransaction === undefined ? await deps.lockout.forget(keys) : 0;
  scope.report?.({ userId });
  const done = (w: { cleared: boolean }) => ({ userId, status: 200, outcome: 'user unlocked', emits: w.cleared });
  const written = await inWrite(scope, deps, 'unlock', done, async (tx) => {
    // The account's row locked: an unlock and a delete of the account do not cross.
    const [row] = await tx.select({ version: users.version }).from(users).where(current).for('update');
    if (row === undefined) return undefined;
    const here = deps.lockout.inTransaction === undefined ? 0 : await deps.lockout.inTransaction(tx).forget(keys);
    // The version is the account's, which an unlock does not change: its ETag stays.
    return { version: row.version, cleared: elsewhere + here > 0 };
  });
  if (written === undefined) throw await notWritten(deps.db, account, ifMatch);
  return { version: written.version };
}
