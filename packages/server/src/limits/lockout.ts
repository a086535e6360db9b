// Guessing limits of `verify`: failed checks counted per site and account, by its id whichever
// identifier named it (and per end-user address, in its canonical form), in the database or, when
// REDIS_URL is set, in Redis, so that every server of a deployment shares them. An identifier no
// account in reach has is counted as given, so a lockout says nothing about which emails exist.
import { createHash } from 'node:crypto';
import { eq, inArray, type SQL, sql } from 'drizzle-orm';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import { type Db, rows } from '../db/client.ts';
import { orDatabase } from '../db/redis.ts';
import { verifyFailures } from '../db/schema.ts';

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

/** A counter as stored: its failures, the last one's time, and the end of the lock it set (may be past). */
export interface LockoutState {
  failures: number;
  lastFailureAt: Date;
  lockedUntil: Date | null;
}

/** Where the counts live: the database, or Redis with the database to fall back on. */
export interface LockoutStore {
  /**
   * Counts an attempt as a failure before its password is checked, so that guesses sent at once
   * cannot all pass the check before any of them is counted; one made while the key is locked is
   * refused (and not counted). Returns the seconds left of the lock that refused it, or 0 when the
   * attempt may go on. The limit reached, the key is locked (the longer the more failures).
   */
  attempt(key: string, policy: LockoutPolicy): Promise<number>;
  /**
   * The attempt was not a failure after all: its count is taken back. With the policy (an attempt
   * that went on, taken back), a lock is lifted too when the failures left are below the limit:
   * no guess judged wrong left it there (ten logins sent at once while the hashing queue was full
   * were all counted, the tenth locked, and the nine refused with 503 left the lock behind).
   * Without it, a lock stays.
   */
  undo(key: string, policy?: LockoutPolicy): Promise<void>;
  /** A success: the key's count starts again, its lock lifted. */
  clear(key: string): Promise<void>;
  /**
   * An unlock (accounts/unlock.ts): the keys' counts and locks gone, wherever they are (Redis and
   * the database it falls back to). Resolves to how many of the keys held a counter.
   */
  forget(keys: readonly string[]): Promise<number>;
  /** The key's counter as stored, for the person it names (GET /api/1/user/data); undefined: none. */
  read(key: string): Promise<LockoutState | undefined>;
  /**
   * The store working in `tx`, when its counts are in that database: a success then clears them
   * in its own transaction, and commits with them. Absent when they are elsewhere (Redis).
   */
  inTransaction?(tx: Db): LockoutStore;
  /**
   * The database store: the database its counts are rows of, so that a caller working in that
   * database counts and clears them in its own statements (lookUpAndAttempt, successParts).
   */
  db?: Db;
}

export function databaseLockout(db: Db): LockoutStore {
  return {
    attempt: (key, policy) => attempt(db, key, policy),
    undo: (key, policy) => undoAttempt(db, key, policy),
    clear: (key) => clearFailures(db, key),
    forget: (keys) => forgetFailures(db, keys),
    read: (key) => readFailures(db, key),
    inTransaction: (tx) => databaseLockout(tx),
    db,
  };
}

/**
 * One statement: the key's lock read under its row lock and, unless a lock is in force, the
 * failure counted. Concurrent attempts on a key are counted one after another (the second waits
 * for the row and sees the first's count; on a key with no row yet, the insert's conflict
 * orders them and those past the limit are refused). It was a transaction of four round trips, twice per
 * verify (the identifier and the address): six of a verify's fifteen round trips.
 */
async function attempt(db: Db, key: string, policy: LockoutPolicy): Promise<number> {
  const one = attemptParts('a', sql`${key}::text`, policy);
  const [row] = await rows<{ wait: number }>(db, sql`with ${one.ctes} select ${one.wait}::int as wait`);
  return Number(row?.wait ?? 0);
}

/**
 * An attempt as parts of a caller's statement: the CTEs `<name>_locked` and `<name>_counted`
 * counting one on `key` (an SQL text expression) unless `guard` is false, and the expression of
 * its wait (the seconds of the lock that refused it, or 0).
 */
function attemptParts(name: string, key: SQL, policy: LockoutPolicy, guard: SQL = sql`true`): { ctes: SQL; wait: SQL } {
  const locked = sql.raw(`${name}_locked`);
  const counted = sql.raw(`${name}_counted`);
  const window = sql`make_interval(secs => ${policy.windowSeconds})`;
  // The count starts again once a window has passed since the last failure or the last lock's end.
  const stale = sql`greatest(${verifyFailures.windowStart}, coalesce(${verifyFailures.lockedUntil}, ${verifyFailures.windowStart})) + ${window} <= now()`;
  const failures = sql`case when ${stale} then 1 else ${verifyFailures.failures} + 1 end`;
  const lock = sql`least(${policy.lockSeconds}::float8 * power(2, greatest(0, ${failures} - ${policy.limit})), ${policy.maxLockSeconds}::float8)`;
  const firstLock =
    policy.limit <= 1 ? sql`now() + make_interval(secs => ${policy.lockSeconds})` : sql`null::timestamptz`;
  const ctes = sql`
    ${locked} as (
      select ceil(extract(epoch from (${verifyFailures.lockedUntil} - now())))::int as wait
      from ${verifyFailures} where ${verifyFailures.key} = ${key} for update
    ), ${counted} as (
      insert into ${verifyFailures} (key, failures, window_start, locked_until)
      select ${key}, 1, now(), ${firstLock}
      where not exists (select 1 from ${locked} where wait > 0) and ${guard}
      on conflict (key) do update set
        failures = ${failures},
        window_start = now(),
        locked_until = case when ${failures} >= ${policy.limit} then now() + make_interval(secs => ${lock})
          when ${stale} then null else ${verifyFailures.lockedUntil} end
      returning failures, ceil(extract(epoch from (locked_until - now())))::int as wait
    )`;
  // A lock in force refuses the attempt, uncounted. So does a count past the limit on a key
  // that had no row when the attempt began: attempts racing on a new key could not wait for
  // its lock (after a lock ends, the next attempt goes on, as before).
  const wait = sql`coalesce(
      (select wait from ${locked} where wait > 0),
      (select wait from ${counted} where failures > ${policy.limit} and wait > 0 and not exists (select 1 from ${locked})),
      0)`;
  return { ctes, wait };
}

/** What verify learns before its hash: the account (if any), its identifier's key and the attempts' waits. */
export interface LookedUp<R> {
  row: R | undefined;
  /** The identifier's key: by the account's id when there is one, else `fallback`. */
  identifier: string;
  /** Seconds of the address's lock that refused the attempt; 0: counted (or no address). */
  addressWait: number;
  /** Seconds of the identifier's lock that refused it; 0: counted. Not attempted while the address is locked. */
  wait: number;
}

/**
 * verify's one round trip before its hash, on the database store: the account read by `lookup`
 * (a select of at most one row, with an `id` column), its identifier's key worked out from it as
 * lockoutKey(site, 'id', id) does, and the attempts counted as attempt() counts them, the
 * address's first and the identifier's only when the address's went on. Was three statements.
 */
export async function lookUpAndAttempt<R extends { id: string }>(
  db: Db,
  lookup: SQL,
  columns: SQL,
  site: string,
  fallback: string,
  identifierPolicy: LockoutPolicy,
  address?: { key: string; policy: LockoutPolicy },
): Promise<LookedUp<R>> {
  const byId = sql`encode(sha256(convert_to(${site}::text || chr(10) || 'id' || chr(10) || lower(account.id::text), 'UTF8')), 'hex')`;
  const identifierKey = sql`(select key from identifier)`;
  const fromAddress =
    address === undefined ? undefined : attemptParts('addr', sql`${address.key}::text`, address.policy);
  const ofIdentifier = attemptParts(
    'ident',
    identifierKey,
    identifierPolicy,
    fromAddress === undefined ? sql`true` : sql`${fromAddress.wait} = 0`,
  );
  const [row] = await rows<Record<string, unknown> & { _key: string; _address_wait: number; _wait: number }>(
    db,
    sql`with account as (${lookup}),
      identifier as (select coalesce((select ${byId} from account), ${fallback}::text) as key),
      ${fromAddress === undefined ? sql`` : sql`${fromAddress.ctes},`}
      ${ofIdentifier.ctes}
    select ${columns}, (select key from identifier) as _key,
      ${fromAddress === undefined ? sql`0` : fromAddress.wait}::int as _address_wait,
      ${ofIdentifier.wait}::int as _wait
    from (select 1) as one left join account on true`,
  );
  const { _key, _address_wait, _wait, ...account } = row!;
  return {
    row: account.id == null ? undefined : (account as unknown as R),
    identifier: _key,
    addressWait: Number(_address_wait),
    wait: Number(_wait),
  };
}

/**
 * A success, as CTEs of the caller's statement on the database store: the identifier's count
 * cleared and the address's attempt taken back (its lock lifted below the limit), as clear() and
 * undo(key, policy) do, only when `guard` holds.
 */
export function successParts(
  identifier: string,
  address: { key: string; policy: LockoutPolicy } | undefined,
  guard: SQL,
): SQL {
  const cleared = sql`cleared as (delete from ${verifyFailures} where ${verifyFailures.key} = ${identifier} and ${guard})`;
  if (address === undefined) return cleared;
  const left = sql`greatest(${verifyFailures.failures} - 1, 0)`;
  return sql`${cleared}, undone as (
    update ${verifyFailures} set failures = ${left},
      locked_until = case when ${left} < ${address.policy.limit} then null else ${verifyFailures.lockedUntil} end
    where ${verifyFailures.key} = ${address.key} and ${guard})`;
}

async function undoAttempt(db: Db, key: string, policy?: LockoutPolicy): Promise<void> {
  const left = sql`greatest(${verifyFailures.failures} - 1, 0)`;
  await db
    .update(verifyFailures)
    .set({
      failures: left,
      ...(policy === undefined
        ? {}
        : { lockedUntil: sql`case when ${left} < ${policy.limit} then null else ${verifyFailures.lockedUntil} end` }),
    })
    .where(eq(verifyFailures.key, key));
}

async function clearFailures(db: Db, key: string): Promise<void> {
  await db.delete(verifyFailures).where(eq(verifyFailures.key, key));
}

async function forgetFailures(db: Db, keys: readonly string[]): Promise<number> {
  if (keys.length === 0) return 0;
  const gone = await db
    .delete(verifyFailures)
    .where(inArray(verifyFailures.key, [...keys]))
    .returning({ key: verifyFailures.key });
  return gone.length;
}

async function readFailures(db: Db, key: string): Promise<LockoutState | undefined> {
  const [row] = await db.select().from(verifyFailures).where(eq(verifyFailures.key, key));
  // window_start is set at every failure (see attempt): it is the last failure's time.
  return row && { failures: row.failures, lastFailureAt: row.windowStart, lockedUntil: row.lockedUntil };
}

/**
 * Counters with no failure for a day and no lock in force: housekeeping removes them, whichever
 * store is in use, since the Redis one falls back to this table (Redis expires its own).
 */
export async function purgeStaleFailures(db: Db): Promise<void> {
  await db
    .delete(verifyFailures)
    .where(
      sql`${verifyFailures.windowStart} < now() - interval '1 day' and coalesce(${verifyFailures.lockedUntil}, now()) <= now()`,
    );
}

// The counter is a hash of milliseconds on Redis's clock, which every server shares as they share
// the database's now(); the arithmetic is the database's. ARGV: limit, window, first lock and
// longest lock (ms). Returns the seconds left of a lock in force, or 0 once counted.
const ATTEMPT_LUA = `
local time = redis.call('TIME')
local now = tonumber(time[1]) * 1000 + math.floor(tonumber(time[2]) / 1000)
local limit, window, lock, maxLock = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local state = redis.call('HMGET', KEYS[1], 'failures', 'start', 'locked')
local failures, start, locked = tonumber(state[1]), tonumber(state[2]), tonumber(state[3])
if locked ~= nil and locked > now then
  return math.ceil((locked - now) / 1000)
end
if failures == nil or math.max(start, locked or start) + window <= now then
  failures, locked = 1, nil
else
  failures = failures + 1
end
if failures >= limit then
  locked = now + math.floor(math.min(lock * 2 ^ math.max(0, failures - limit), maxLock))
end
redis.call('HSET', KEYS[1], 'failures', failures, 'start', now)
if locked == nil then
  redis.call('HDEL', KEYS[1], 'locked')
else
  redis.call('HSET', KEYS[1], 'locked', locked)
end
-- Past a window after this failure and after the lock's end, the count would start again anyway.
redis.call('PEXPIREAT', KEYS[1], math.max(now, locked or now) + math.ceil(window))
return 0`;

// HINCRBY keeps the key's expiry; a key that is gone is left gone rather than counted below zero.
// With a limit (ARGV[1]), a lock goes too when the failures left are below it (see undo).
const UNDO_LUA = `
local failures = tonumber(redis.call('HGET', KEYS[1], 'failures'))
if failures ~= nil and failures > 0 then
  redis.call('HINCRBY', KEYS[1], 'failures', -1)
  local limit = tonumber(ARGV[1])
  if limit ~= nil and failures - 1 < limit then
    redis.call('HDEL', KEYS[1], 'locked')
  end
end
return 0`;

/** Counts in Redis, under `prefix`, with `fallback` (the database) while Redis does not answer (orDatabase). */
export function redisLockout(
  redis: Redis,
  fallback: LockoutStore,
  logger: Logger,
  prefix = 'ua:lockout:',
): LockoutStore {
  // The braces are a hash tag: a key's one slot in a Redis cluster.
  const redisKey = (key: string) => `${prefix}{${key}}`;
  const orFallback = orDatabase(logger, 'Redis unavailable; counting verify failures in the database');
  return {
    attempt: (key, policy) =>
      orFallback(
        async () => {
          const ms = [
            policy.limit,
            policy.windowSeconds * 1000,
            policy.lockSeconds * 1000,
            policy.maxLockSeconds * 1000,
          ];
          return Number(await redis.eval(ATTEMPT_LUA, 1, redisKey(key), ...ms.map(String)));
        },
        () => fallback.attempt(key, policy),
      ),
    undo: (key, policy) =>
      orFallback(
        async () =>
          void (await redis.eval(UNDO_LUA, 1, redisKey(key), ...(policy === undefined ? [] : [String(policy.limit)]))),
        () => fallback.undo(key, policy),
      ),
    clear: (key) =>
      orFallback(
        async () => void (await redis.del(redisKey(key))),
        () => fallback.clear(key),
      ),
    // Redis's counters and the database's (counted while Redis did not answer), both: an unlock
    // that left either would leave the account locked on some attempt.
    forget: (keys) =>
      orFallback(
        async () => {
          // One key at a time: each is in a slot of its own on a Redis cluster.
          const inRedis = await Promise.all(keys.map((key) => redis.del(redisKey(key))));
          const inDatabase = await fallback.forget(keys);
          return inRedis.reduce((sum, n) => sum + n, 0) + inDatabase;
        },
        () => fallback.forget(keys),
      ),
    // Counts made while Redis did not answer are in the database: read there when Redis has none.
    read: (key) =>
      orFallback(
        async () => {
          const [failures, start, locked] = await redis.hmget(redisKey(key), 'failures', 'start', 'locked');
          if (failures == null || start == null) return fallback.read(key);
          return {
            failures: Number(failures),
            lastFailureAt: new Date(Number(start)),
            lockedUntil: locked == null ? null : new Date(Number(locked)),
          };
        },
        () => fallback.read(key),
      ),
  };
}
