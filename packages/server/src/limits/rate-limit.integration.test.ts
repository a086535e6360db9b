import { randomUUID } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../db/client.ts';
import { rateLimits } from '../db/schema.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import {
  type Count,
  type CounterStore,
  createRateLimiter,
  databaseCounters,
  leasedCounters,
  type Policy,
  parseRateLimit,
  sliceSize,
} from './rate-limit.ts';

describe('parseRateLimit', () => {
  it.each([
    ['600/60s', 600, 60],
    ['100/1m', 100, 60],
    ['5000/1h', 5000, 3600],
    ['1/1s', 1, 1],
    ['10/24h', 10, 86_400],
    ['10/1440m', 10, 86_400],
    ['10/86400s', 10, 86_400],
    ['999999999/1s', 999_999_999, 1],
  ])('reads %s', (raw, limit, windowSeconds) => {
    expect(parseRateLimit('all', raw)).toEqual({ name: 'all', limit, windowSeconds });
    expect(parseRateLimit('hash', raw)).toEqual({ name: 'hash', limit, windowSeconds });
  });

  it('reads off as no limit, for the hash budget only', () => {
    expect(parseRateLimit('hash', 'off')).toBeNull();
    // Every answer promises the "all" fields, so that budget cannot be switched off.
    const all = parseRateLimit('all', 'off');
    expect(all).toBeInstanceOf(Error);
    expect((all as Error).message).not.toContain('be off');
  });

  it.each([
    ['a zero limit', '0/60s'],
    ['a zero window', '10/0s'],
    ['a window over 24 h in hours', '10/25h'],
    ['a window over 24 h in minutes', '10/1441m'],
    ['a window over 24 h in seconds', '10/86401s'],
  ])('refuses %s as out of bounds', (_, raw) => {
    const result = parseRateLimit('all', raw);
    expect(result).toBeInstanceOf(Error);
    expect((result as Error).message).toContain('from 1 s to 24 h');
    expect((result as Error).message).toContain(raw);
  });

  it.each([
    ['no window', '600'],
    ['no unit', '600/60'],
    ['days', '600/1d'],
    ['an upper-case unit', '600/60S'],
    ['spaces', ' 600/60s'],
    ['a spelled-out unit', '600/60sec'],
    ['a negative limit', '-1/60s'],
    ['a fractional limit', '1.5/60s'],
    ['a limit of ten digits', '1234567890/1s'],
    ['a window of seven digits', '1/1000000s'],
    ['nothing', ''],
    ['Off in capitals', 'Off'],
  ])('refuses %s as malformed', (_, raw) => {
    const result = parseRateLimit('hash', raw);
    expect(result).toBeInstanceOf(Error);
    expect((result as Error).message).toMatch(/^must look like 600\/60s, 100\/1m or 5000\/1h, or be off/);
    expect((result as Error).message).toContain(`"${raw}"`);
  });
});

describe('sliceSize', () => {
  it('leases a sixteenth of what is left, from 1 to 100', () => {
    expect(sliceSize(6000, 0)).toBe(100);
    expect(sliceSize(1600, 0)).toBe(100);
    expect(sliceSize(1600, 100)).toBe(93);
    expect(sliceSize(50, 0)).toBe(3);
    expect(sliceSize(50, 48)).toBe(1);
    expect(sliceSize(31, 0)).toBe(1);
    expect(sliceSize(6, 0)).toBe(1);
    expect(sliceSize(50, 80)).toBe(1);
  });
});

describe('leased counters over the database', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openMigratedPglite();
  });
  afterAll(() => database?.close());

  const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
  const all = (limit: number, windowSeconds = 60): Policy => ({ name: 'all', limit, windowSeconds });

  /** The database store, counting the calls that reach it and the units each asked for. */
  function countedStore() {
    const store = databaseCounters(database.db);
    const calls: number[] = [];
    const counted: CounterStore = {
      increment(tokenId, policies, weight = 1) {
        calls.push(weight);
        return store.increment(tokenId, policies, weight);
      },
      close: () => store.close(),
    };
    return { store: counted, calls };
  }

  /** A limiter of one server (its own leases) over `store`. */
  const server = (store: CounterStore, policy: Policy, hash: Policy | null = null) =>
    createRateLimiter({ all: policy, hash, import: null }, leasedCounters(store));

  /** The store's count for a token's "all" counter: every unit leased so far in the window. */
  const stored = async (tokenId: string) => {
    const [row] = await database.db
      .select({ count: rateLimits.count })
      .from(rateLimits)
      .where(eq(rateLimits.key, `${tokenId}/all`));
    return Number(row?.count ?? 0);
  };

  it('serves many requests with one store call: 200 requests one after another, each remaining value in turn', async () => {
    const { store, calls } = countedStore();
    const limiter = server(store, all(1600));
    const token = randomUUID();
    const remaining: number[] = [];
    for (let i = 0; i < 200; i++) remaining.push((await limiter.consume(token))[0]!.remaining);
    expect(remaining).toEqual(Array.from({ length: 200 }, (_, i) => 1599 - i));
    // A slice of 100, then top-ups of about half a slice, each leased before the last ran out.
    expect(calls[0]).toBe(100);
    expect(calls.length).toBeGreaterThanOrEqual(3);
    expect(calls.length).toBeLessThanOrEqual(6);
    // The store counted what was leased: the 200 requests and at most one slice more.
    const count = await stored(token);
    expect(count).toBe(calls.reduce((a, b) => a + b, 0));
    expect(count - 200).toBeLessThanOrEqual(sliceSize(1600, count - calls.at(-1)!));
  });

  it('answers at once (consumeNow) from leased units, interleaved with consume: each remaining value once, the same store calls', async () => {
    const { store, calls } = countedStore();
    const limiter = server(store, all(1600));
    const token = randomUUID();
    // Nothing leased yet: only consume can tell.
    expect(limiter.consumeNow!(token)).toBeUndefined();
    const remaining: number[] = [(await limiter.consume(token))[0]!.remaining];
    let now = 0;
    for (let i = 1; i < 200; i++) {
      const at = limiter.consumeNow!(token);
      if (at !== undefined) now++;
      // Wherever the slice ran out, consume waits for the lease leased ahead.
      remaining.push((at ?? (await limiter.consume(token)))[0]!.remaining);
      if (i % 20 === 0) await sleep(1); // lets the leases ahead arrive
    }
    expect(remaining).toEqual(Array.from({ length: 200 }, (_, i) => 1599 - i));
    expect(now).toBeGreaterThan(150);
    expect(calls.length).toBeLessThanOrEqual(6);
    expect(await stored(token)).toBe(calls.reduce((a, b) => a + b, 0));
  });

  it('answers nothing at once while a request waits for a lease, nor past the limit', async () => {
    const { store } = countedStore();
    const limiter = server(store, all(3));
    const token = randomUUID();
    const waiting = limiter.consume(token);
    expect(limiter.consumeNow!(token)).toBeUndefined();
    await waiting;
    // The lease of a limit of 3 gave 1 unit at a time (sliceSize); spend them, then the limit.
    for (let i = 0; i < 2; i++) await limiter.consume(token);
    expect(limiter.consumeNow!(token)).toBeUndefined();
    expect((await limiter.consume(token))[0]!.exceeded).toBe(true);
  });

  it('counts concurrent requests exactly in one server: 80 at once against 50 give 50 passes, each remaining value once', async () => {
    const { store, calls } = countedStore();
    const limiter = server(store, all(50));
    const token = randomUUID();
    const states = await Promise.all(Array.from({ length: 80 }, () => limiter.consume(token)));
    const passed = states.filter((s) => !s[0]!.exceeded);
    expect(passed).toHaveLength(50);
    expect(passed.map((s) => s[0]!.remaining).sort((a, b) => a - b)).toEqual(Array.from({ length: 50 }, (_, i) => i));
    expect(states.filter((s) => s[0]!.exceeded).every((s) => s[0]!.remaining === 0)).toBe(true);
    // The requests waiting for a lease shared its store call.
    expect(calls.length).toBeLessThanOrEqual(3);
  });

  it('refuses without a store call once the count has reached the limit, until the window ends', async () => {
    const { store, calls } = countedStore();
    const limiter = server(store, all(5, 1));
    const token = randomUUID();
    const first = [];
    for (let i = 0; i < 5; i++) first.push((await limiter.consume(token))[0]!);
    expect(first.map((s) => [s.remaining, s.exceeded])).toEqual([
      [4, false],
      [3, false],
      [2, false],
      [1, false],
      [0, false],
    ]);
    const before = calls.length;
    const refused = await Promise.all(Array.from({ length: 20 }, () => limiter.consume(token)));
    expect(refused.every((s) => s[0]!.exceeded && s[0]!.remaining === 0 && s[0]!.resetSeconds === 1)).toBe(true);
    expect(calls.length).toBe(before);

    // The window ends (locally no later than in the store): a new budget, from a new lease.
    await sleep(1050);
    const next = (await limiter.consume(token))[0]!;
    expect([next.remaining, next.exceeded]).toEqual([4, false]);
    expect(calls.length).toBe(before + 1);
  });

  it('counts a weight as that many units, and a request over the budget spends what it takes', async () => {
    const { store } = countedStore();
    const limiter = server(store, all(100), { name: 'hash', limit: 6, windowSeconds: 60 });
    const token = randomUUID();
    // An import of four: one counted up front, three more before hashing.
    expect((await limiter.consume(token, 'hash'))[1]!.remaining).toBe(5);
    expect((await limiter.consumeBudget(token, 'hash', 3))[0]!.remaining).toBe(2);
    // An import of three: the first fits, the two more do not.
    expect((await limiter.consume(token, 'hash'))[1]!.remaining).toBe(1);
    expect((await limiter.consumeBudget(token, 'hash', 2))[0]!.exceeded).toBe(true);
    expect((await limiter.consume(token, 'hash'))[1]!.exceeded).toBe(true);
    expect((await limiter.consume(token))[0]!.remaining).toBe(96);
  });

  describe.each([2, 3])('with %i servers sharing one store', (servers) => {
    /** Requests sent round-robin across the servers, `concurrency` at a time; how many passed. */
    async function passes(limit: number, requests: number, concurrency: number) {
      const { store, calls } = countedStore();
      const limiters = Array.from({ length: servers }, () => server(store, all(limit)));
      const token = randomUUID();
      let next = 0;
      let passed = 0;
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < requests) {
            const i = next++;
            const [state] = await limiters[i % servers]!.consume(token);
            if (!state!.exceeded) passed++;
          }
        }),
      );
      return { passed, calls: calls.length };
    }

    it.each([
      ['one after another', 1],
      ['eight at a time', 8],
    ])(
      'never passes more than the budget, and at most (servers − 1) × min(100, ⌊q/16⌋) fewer: %s',
      async (_, concurrency) => {
        for (const limit of [40, 300, 2000]) {
          const { passed, calls } = await passes(limit, limit + 200, concurrency);
          expect(passed).toBeLessThanOrEqual(limit);
          expect(passed).toBeGreaterThanOrEqual(limit - (servers - 1) * Math.min(100, Math.floor(limit / 16)));
          if (limit >= 2000) expect(calls).toBeLessThan(limit / 10);
        }
      },
    );

    it('strands at most a slice on each server that stops getting requests: the bound is reached, never passed', async () => {
      const { store } = countedStore();
      const limiters = Array.from({ length: servers }, () => server(store, all(2000)));
      const token = randomUUID();
      // Each server but the last answers one request, leasing a whole slice of 100, then goes quiet.
      for (const limiter of limiters.slice(0, -1)) expect((await limiter.consume(token))[0]!.exceeded).toBe(false);
      let passed = servers - 1;
      for (let i = 0; i < 2100; i++) if (!(await limiters.at(-1)!.consume(token))[0]!.exceeded) passed++;
      expect(passed).toBe(2000 - (servers - 1) * 99);
      expect(passed).toBeGreaterThanOrEqual(2000 - (servers - 1) * Math.min(100, Math.floor(2000 / 16)));
    });

    it('is exact under a budget of 32: every lease is one unit for a waiting request', async () => {
      for (const limit of [1, 6, 31]) {
        expect((await passes(limit, limit + 10, 1)).passed).toBe(limit);
        expect((await passes(limit, limit + 10, 8)).passed).toBe(limit);
      }
    });
  });
});

describe('leased counters over a failing store', () => {
  it('fails the requests waiting for a lease, and tries again with the next request', async () => {
    let fail = true;
    let calls = 0;
    const store: CounterStore = {
      async increment(_, policies, weight = 1): Promise<Count[]> {
        calls++;
        if (fail) throw new Error('store down');
        return policies.map(() => ({ count: weight, resetMs: 60_000 }));
      },
      close: async () => {},
    };
    const limiter = createRateLimiter(
      { all: { name: 'all', limit: 1600, windowSeconds: 60 }, hash: null, import: null },
      leasedCounters(store),
    );
    const failed = await Promise.allSettled(Array.from({ length: 5 }, () => limiter.consume('t')));
    expect(failed.every((r) => r.status === 'rejected')).toBe(true);
    expect(calls).toBe(1);
    fail = false;
    expect((await limiter.consume('t'))[0]!.remaining).toBe(1599);
    await limiter.close();
  });
});

describe('leased counters over a store slower than its window', () => {
  it('answers the requests waiting for a lease that arrives after its window ended, rather than lease for ever', async () => {
    // Each answer takes 60 ms and says the window had 50 ms left: every lease lapses on arrival.
    let count = 0;
    let calls = 0;
    const store: CounterStore = {
      async increment(_, policies, weight = 1): Promise<Count[]> {
        calls++;
        await new Promise((resolve) => setTimeout(resolve, 60));
        count += weight;
        return policies.map(() => ({ count, resetMs: 50 }));
      },
      close: async () => {},
    };
    const limiter = createRateLimiter(
      { all: { name: 'all', limit: 100, windowSeconds: 1 }, hash: null, import: null },
      leasedCounters(store),
    );
    const answers = await Promise.race([
      Promise.all(Array.from({ length: 3 }, () => limiter.consume('t'))),
      new Promise<'still waiting'>((resolve) => setTimeout(() => resolve('still waiting'), 2_000)),
    ]);
    expect(answers).not.toBe('still waiting');
    expect((answers as Awaited<ReturnType<typeof limiter.consume>>[]).every((s) => !s[0]!.exceeded)).toBe(true);
    expect(calls).toBeLessThanOrEqual(3);
    await limiter.close();
  });
});
