// verify's lockout, one set of behaviours held against both stores: the database (embedded) and
// Redis (TEST_REDIS_URL, under a key prefix of this run's own). Then what only Redis does: its
// keys expire by themselves, and it falls back to the database when Redis fails or hangs.
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { createServer, type Server } from 'node:net';
import type { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../db/client.ts';
import { connectRedis } from '../db/redis.ts';
import { arrayLogger, silentLogger } from '../testing/loggers.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { databaseLockout, type LockoutPolicy, type LockoutStore, lockoutKey, redisLockout } from './lockout.ts';

let database: Database;
beforeAll(async () => {
  database = await openMigratedPglite();
});
afterAll(() => database?.close());

const REDIS_URL = process.env.TEST_REDIS_URL;
const PREFIX = `ua:test:lockout:${randomUUID()}:`;

async function redisUnavailable(): Promise<string | undefined> {
  if (!REDIS_URL) return 'TEST_REDIS_URL is not set';
  const probe = connectRedis(REDIS_URL);
  try {
    await Promise.race([
      once(probe, 'ready'),
      new Promise((_, reject) => setTimeout(() => reject(new Error('no answer in 2 s')), 2000)),
    ]);
    return undefined;
  } catch (error) {
    return `no Redis answers at TEST_REDIS_URL (${(error as Error).message})`;
  } finally {
    probe.disconnect();
  }
}
const skipRedis = await redisUnavailable();
if (skipRedis !== undefined) console.warn(`\n[lockout.test] the Redis store: SKIPPED, ${skipRedis}\n`);

const key = () => lockoutKey('default', 'email', `${randomUUID()}@example.com`);
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
const policy = (changes: Partial<LockoutPolicy>): LockoutPolicy => ({
  limit: 3,
  windowSeconds: 900,
  lockSeconds: 60,
  maxLockSeconds: 3600,
  ...changes,
});
/** The answers of `n` attempts made one after another. */
async function attempts(store: LockoutStore, k: string, p: LockoutPolicy, n: number): Promise<number[]> {
  const answers: number[] = [];
  for (let i = 0; i < n; i++) answers.push(await store.attempt(k, p));
  return answers;
}

function behavesAsALockout(store: () => LockoutStore) {
  it('locks at the limit for the first lock, the Retry-After in whole seconds', async () => {
    const k = key();
    expect(await attempts(store(), k, policy({ limit: 10 }), 12)).toEqual([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 60, 60]);
  });

  it('counts no refused attempt, then doubles the lock with each further failure, up to the longest', async () => {
    const k = key();
    const p = policy({ lockSeconds: 1, maxLockSeconds: 3 });
    expect(await attempts(store(), k, p, 5)).toEqual([0, 0, 0, 1, 1]);
    await sleep(1050);
    // The fourth failure, not the sixth: a lock of 2 s rather than 8.
    expect(await attempts(store(), k, p, 2)).toEqual([0, 2]);
    await sleep(2050);
    expect(await attempts(store(), k, p, 2)).toEqual([0, 3]);
  });

  it('counts attempts sent at once one by one: of 40, exactly the limit go on', async () => {
    const k = key();
    const answers = await Promise.all(Array.from({ length: 40 }, () => store().attempt(k, policy({ limit: 10 }))));
    expect(answers.filter((wait) => wait === 0)).toHaveLength(10);
    // Each of the others waits out the lock of 60 s (a second less when the clock ticked between
    // the lock and its reading, as on a loaded machine).
    expect(answers.filter((wait) => wait >= 59 && wait <= 60)).toHaveLength(30);
  });

  it('takes an undone attempt back, but leaves a lock in force', async () => {
    const k = key();
    const p = policy({ limit: 2 });
    expect(await store().attempt(k, p)).toBe(0);
    await store().undo(k);
    expect(await attempts(store(), k, p, 3)).toEqual([0, 0, 60]);
    await store().undo(k);
    expect(await store().attempt(k, p)).toBe(60);
  });

  // Ten logins sent at once while the hashing queue is full: all ten are counted before any is
  // refused with 503, the tenth sets the lock, and the nine taken back must take it back too.
  it('takes back the lock of an attempt that went on and reached the limit, when it is taken back', async () => {
    const k = key();
    const p = policy({ limit: 2 });
    expect(await attempts(store(), k, p, 2)).toEqual([0, 0]); // the second reached the limit: locked
    expect(await store().attempt(k, p)).toBe(60);
    await store().undo(k, p); // the second was no failure after all
    expect(await attempts(store(), k, p, 2)).toEqual([0, 60]); // one failure left: one more goes on
  });

  it('counts the failures left after a take-back against the limit, as if the attempt never came', async () => {
    const k = key();
    const p = policy({ limit: 2 });
    const sent = await Promise.all(Array.from({ length: 3 }, () => store().attempt(k, p)));
    expect(sent.filter((wait) => wait === 0)).toHaveLength(2);
    await store().undo(k, p); // one of two taken back: one failure left, below the limit
    expect(await store().attempt(k, p)).toBe(0);
    expect(await store().attempt(k, p)).toBe(60);
  });

  it('counts nothing below zero when undoing what was never counted', async () => {
    const k = key();
    await store().undo(k);
    await store().undo(k);
    expect(await attempts(store(), k, policy({ limit: 2 }), 3)).toEqual([0, 0, 60]);
  });

  it('lifts the lock and starts the count again when cleared', async () => {
    const k = key();
    const p = policy({ limit: 2 });
    expect(await attempts(store(), k, p, 3)).toEqual([0, 0, 60]);
    await store().clear(k);
    expect(await attempts(store(), k, p, 3)).toEqual([0, 0, 60]);
  });

  it('starts the count again a window after the last failure', async () => {
    const k = key();
    const p = policy({ limit: 2, windowSeconds: 0.3 });
    expect(await store().attempt(k, p)).toBe(0);
    await sleep(400);
    expect(await attempts(store(), k, p, 3)).toEqual([0, 0, 60]);
  });

  it('keeps counting within a window after a lock ends, and starts again after it', async () => {
    const k = key();
    const p = policy({ limit: 2, windowSeconds: 0.3, lockSeconds: 0.2 });
    expect(await attempts(store(), k, p, 3)).toEqual([0, 0, 1]);
    await sleep(300);
    // The lock ended 0.1 s ago: the third failure locks again.
    expect(await attempts(store(), k, p, 2)).toEqual([0, 1]);
    await sleep(800);
    expect(await attempts(store(), k, p, 3)).toEqual([0, 0, 1]);
  });

  it('reads a counter as stored: failures, the last one, the lock it set; none for a key never counted', async () => {
    const k = key();
    expect(await store().read(k)).toBeUndefined();
    const before = Date.now();
    await attempts(store(), k, policy({ limit: 2, lockSeconds: 60 }), 2);
    const state = await store().read(k);
    expect(state?.failures).toBe(2);
    expect(Math.abs(state!.lastFailureAt.getTime() - before)).toBeLessThan(5_000);
    expect(state!.lockedUntil!.getTime() - state!.lastFailureAt.getTime()).toBeGreaterThan(55_000);
    await store().clear(k);
    expect(await store().read(k)).toBeUndefined();
  });

  it('keeps each key to itself', async () => {
    const [a, b] = [key(), key()];
    expect(await attempts(store(), a, policy({ limit: 1 }), 2)).toEqual([0, 60]);
    expect(await store().attempt(b, policy({ limit: 1 }))).toBe(0);
  });
}

/** Fails the test that reaches it: the Redis store must have answered by itself. */
const noFallback: LockoutStore = {
  attempt: () => Promise.reject(new Error('fell back to the database')),
  undo: () => Promise.reject(new Error('fell back to the database')),
  clear: () => Promise.reject(new Error('fell back to the database')),
  // A key Redis does not have is looked for in the database (counted there while Redis was down).
  read: () => Promise.resolve(undefined),
  // An unlock clears the database's counters too (those counted while Redis was down): none here.
  forget: () => Promise.resolve(0),
};

describe('the database store', () => {
  behavesAsALockout(() => databaseLockout(database.db));

  it('joins a transaction, whose rollback takes its clearing back', async () => {
    const k = key();
    const store = databaseLockout(database.db);
    expect(await attempts(store, k, policy({ limit: 1 }), 2)).toEqual([0, 60]);
    await database.db
      .transaction(async (tx) => {
        await store.inTransaction!(tx).clear(k);
        tx.rollback();
      })
      .catch(() => {});
    expect(await store.attempt(k, policy({ limit: 1 }))).toBe(60);
  });
});

describe.skipIf(skipRedis !== undefined)('the Redis store', () => {
  let redis: Redis;
  beforeAll(async () => {
    redis = connectRedis(REDIS_URL!);
    if (redis.status !== 'ready') await once(redis, 'ready');
  });
  afterAll(async () => {
    const keys = await redis.keys(`${PREFIX}*`);
    if (keys.length > 0) await redis.del(...keys);
    redis.disconnect();
  });
  const store = () => redisLockout(redis, noFallback, silentLogger(), PREFIX);

  behavesAsALockout(store);

  it('leaves nothing to join: it is cleared after the commit', () => {
    expect(store().inTransaction).toBeUndefined();
  });

  it('keeps a counter while it can matter: a window after the last failure or after the lock ends', async () => {
    const k = key();
    const p = policy({ limit: 2, windowSeconds: 900, lockSeconds: 3600 });
    await store().attempt(k, p);
    const counting = await redis.pttl(`${PREFIX}{${k}}`);
    expect(counting).toBeGreaterThan(899_000);
    expect(counting).toBeLessThanOrEqual(900_000);
    await store().attempt(k, p);
    const locked = await redis.pttl(`${PREFIX}{${k}}`);
    expect(locked).toBeGreaterThan(4_499_000);
    expect(locked).toBeLessThanOrEqual(4_500_000);
  });
});

describe('the Redis store, when Redis does not answer', () => {
  /** A server that accepts connections, answers the client's handshake, and then nothing. */
  let hung: Server;
  let hungUrl: string;
  beforeAll(async () => {
    hung = createServer((socket) => {
      socket.on('data', (data) => {
        const commands = data.toString().match(/^\*\d+\r\n\$\d+\r\n\w+/gm) ?? [];
        for (const command of commands) if (!/eval|del/i.test(command)) socket.write('+OK\r\n');
      });
    });
    hung.listen(0, '127.0.0.1');
    await once(hung, 'listening');
    const address = hung.address() as { port: number };
    hungUrl = `redis://127.0.0.1:${address.port}`;
  });
  afterAll(() => new Promise<void>((resolve) => hung.close(() => resolve())));

  it.each([
    ['refuses connections', () => 'redis://127.0.0.1:1'],
    ['hangs', () => hungUrl],
  ])('counts in the database, with a warning, when Redis %s', async (_, url) => {
    const redis = connectRedis(url());
    try {
      if (url() === hungUrl) await once(redis, 'ready');
      const { logger, lines } = arrayLogger();
      const database_ = databaseLockout(database.db);
      const store = redisLockout(redis, database_, logger, PREFIX);
      const k = key();
      const p = policy({ limit: 2 });
      const started = performance.now();
      expect(await attempts(store, k, p, 3)).toEqual([0, 0, 60]);
      // Each operation waits at most its 250 ms for Redis.
      expect(performance.now() - started).toBeLessThan(3 * 250 + 500);
      expect(await database_.attempt(k, p)).toBe(60);
      await store.clear(k);
      expect(await database_.attempt(k, p)).toBe(0);
      await store.undo(k);
      expect(await attempts(database_, k, p, 3)).toEqual([0, 0, 60]);
      expect(lines.filter((line) => line.level === 'warn').map((line) => line.msg)).toEqual(
        Array(5).fill('Redis unavailable; counting verify failures in the database'),
      );
    } finally {
      redis.disconnect();
    }
  });
});

// PGlite runs one statement at a time; PostgreSQL runs attempts really at once. A key with no row
// yet let every racing attempt through there (each saw no lock) until attempts became one statement.
const PG_URL = process.env.TEST_DATABASE_URL;
describe.skipIf(!PG_URL)('the database store on PostgreSQL', () => {
  it('lets exactly the limit (5) of 40 attempts at once go on, through 10 connections, on a key with no row and on one with a row', async () => {
    const { openPostgres } = await import('../db/client.ts');
    const postgresDb = await openPostgres(PG_URL!, { max: 10 });
    try {
      await postgresDb.migrate();
      const pgStore = databaseLockout(postgresDb.db);
      const p = { limit: 5, windowSeconds: 900, lockSeconds: 60, maxLockSeconds: 86_400 };
      for (const existing of [false, true]) {
        const k = `race-${randomUUID()}`;
        if (existing) await pgStore.attempt(k, p);
        const waits = await Promise.all(Array.from({ length: 40 }, () => pgStore.attempt(k, p)));
        expect(waits.filter((w) => w === 0)).toHaveLength(existing ? 4 : 5);
        expect(waits.filter((w) => w > 0)).toHaveLength(existing ? 36 : 35);
      }
    } finally {
      await postgresDb.close();
    }
  }, 30_000);
});
if (!PG_URL) console.warn('\n[lockout.test] the database store on PostgreSQL: SKIPPED, TEST_DATABASE_URL is not set\n');
