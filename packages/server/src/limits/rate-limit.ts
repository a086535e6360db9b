// Per-token request budgets, shared by every server of a deployment: counted in the database by
// default, in Redis when REDIS_URL is set. Fixed windows that start at the first request after
// the previous window ended, so a fresh token always gets its whole budget at once. A server
// does not ask the store for every request: it leases slices of a budget and counts them itself
// (leasedCounters), so one round trip serves many requests and no budget is ever exceeded.
import { sql } from 'drizzle-orm';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Db } from '../db/client.ts';
import { orDatabase } from '../db/redis.ts';
import { sqlArray } from '../db/sql-array.ts';

export interface Policy {
  /** The name in `RateLimit-Policy` and `RateLimit`. */
  name: 'all' | Budget;
  limit: number;
  windowSeconds: number;
}

export interface PolicyState extends Policy {
  remaining: number;
  /** Seconds until the window restarts (at least 1). */
  resetSeconds: number;
  exceeded: boolean;
}

export interface RateLimitConfig {
  /** Every request of a token. Always on: the spec promises the fields on every answer. */
  all: Policy;
  /**
   * The operations of a token that compute a password hash (create, update with a password),
   * counted on top of `all`; null: no separate limit.
   */
  hash: Policy | null;
  /**
   * The accounts a site imports, counted per site (every token of it together) by the rows an
   * import is about to write; null: no separate limit.
   */
  import: Policy | null;
}

export interface Count {
  count: number;
  resetMs: number;
}

/** Adds `weight` (default one) to each counter and says where each window stands. */
export interface CounterStore {
  increment(tokenId: string, policies: Policy[], weight?: number): Promise<Count[]>;
  /**
   * increment's answer when it can be given without waiting (units already leased for every
   * policy, nobody waiting before this request); undefined when only increment can (issue 47).
   */
  incrementNow?(tokenId: string, policies: Policy[], weight?: number): Count[] | undefined;
  close(): Promise<void>;
}

/** A budget a request counts against on top of "all". */
export type Budget = 'hash' | 'import';

export interface RateLimiter {
  /** Counts this request against the token's "all" policy and the given budget's, when set. */
  consume(tokenId: string, budget?: Budget): Promise<PolicyState[]>;
  /** consume's answer when the store can give it without waiting (see CounterStore.incrementNow), else undefined: call consume. */
  consumeNow?(tokenId: string, budget?: Budget): PolicyState[] | undefined;
  /**
   * Counts this request, already counted against "all", against `budget` alone: for a request
   * that learns only late that it spends what the budget bounds. [] when the budget is off.
   */
  consumeBudget(tokenId: string, budget: Budget, weight?: number): Promise<PolicyState[]>;
  close(): Promise<void>;
}

export function createRateLimiter(config: RateLimitConfig, store: CounterStore): RateLimiter {
  const statesOf = (policies: Policy[], counts: Count[]): PolicyState[] =>
    policies.map((policy, i) => {
      const { count, resetMs } = counts[i]!;
      return {
        ...policy,
        remaining: Math.max(0, policy.limit - count),
        resetSeconds: Math.max(1, Math.ceil(resetMs / 1000)),
        exceeded: count > policy.limit,
      };
    });
  const countAgainst = async (tokenId: string, candidates: (Policy | null)[], weight = 1): Promise<PolicyState[]> => {
    const policies = candidates.filter((p): p is Policy => p !== null);
    if (policies.length === 0) return [];
    return statesOf(policies, await store.increment(tokenId, policies, weight));
  };
  const policiesOf = (budget: Budget | undefined): Policy[] => {
    const policies: Policy[] = [];
    if (config.all !== null) policies.push(config.all);
    const own = budget === undefined ? null : config[budget];
    if (own !== null) policies.push(own);
    return policies;
  };
  return {
    consume: (tokenId, budget) => countAgainst(tokenId, [config.all, budget === undefined ? null : config[budget]]),
    consumeNow(tokenId, budget) {
      const policies = policiesOf(budget);
      if (policies.length === 0) return [];
      const counts = store.incrementNow?.(tokenId, policies);
      return counts === undefined ? undefined : statesOf(policies, counts);
    },
    consumeBudget: (tokenId, budget, weight) => countAgainst(tokenId, [config[budget]], weight),
    close: () => store.close(),
  };
}

/** The most units of a budget one lease takes. */
export const MAX_SLICE = 100;

/**
 * How many units a server leases when the store has counted `seen` of `limit`: a sixteenth of
 * what is left, from 1 to MAX_SLICE, so that slices shrink as a budget runs out and few units
 * are left unspent on other servers. The spec and the README state the bound this gives.
 */
export function sliceSize(limit: number, seen: number): number {
  return Math.min(MAX_SLICE, Math.max(1, Math.floor((limit - seen) / 16)));
}

/**
 * A store that counts most requests without asking `store`. Per token and policy a server owns
 * numbered units of the window's budget: a lease is the store's own atomic increment by n, which
 * answers the new count c, so the server owns the units c−n+1..c (those up to the limit). A
 * request takes the next owned unit (a weight of w, the next w) and its count is the last of
 * them, so in one server counts stay exact (each remaining value once), and across servers no
 * unit is given twice: never more than the limit pass in a window.
 *
 * A lease takes n = max(what the waiting requests need, sliceSize) − the units still owned, so
 * a server holds at most one slice unspent. Requests that arrive while a lease is in flight wait
 * for it together and take from it; when fewer than ⌊slice/2⌋ units are left the next slice is
 * leased ahead (for slices of 2 or more), so steady traffic does not wait. Once the store's
 * count reached the limit, the server refuses the token's requests itself, without a round trip,
 * until the window ends. Unspent units lapse with their window, which ends locally no later than
 * in the store (the store's remaining time, counted from when the lease was sent).
 */
export function leasedCounters(store: CounterStore, clock: () => number = () => performance.now()): CounterStore {
  type Waiter = { weight: number; resolve: (count: Count) => void; reject: (error: unknown) => void };
  interface Lease {
    tokenId: string;
    policy: Policy;
    /** The unit numbers owned and not yet taken, in order, each at most the limit. */
    units: [from: number, to: number][];
    owned: number;
    /** The highest count the store answered in this window. */
    seen: number;
    /** When the window ends, on `clock`; 0 before the first lease. */
    endsAt: number;
    leasing: boolean;
    waiting: Waiter[];
  }
  const leases = new Map<string, Lease>();
  const inFlight = new Set<Promise<unknown>>();
  let sweepAt = 0;

  /** Takes `n` owned units (n ≤ owned); the last of them, or undefined for none. */
  function take(lease: Lease, n: number): number | undefined {
    let last: number | undefined;
    lease.owned -= n;
    while (n > 0) {
      const range = lease.units[0]!;
      const used = Math.min(n, range[1] - range[0] + 1);
      last = range[0] + used - 1;
      n -= used;
      if (last === range[1]) lease.units.shift();
      else range[0] = last + 1;
    }
    return last;
  }

  /** Answers the waiting requests that can be answered now, then leases what the rest need. */
  function serve(lease: Lease): void {
    const now = clock();
    if (now >= lease.endsAt) {
      lease.units = [];
      lease.owned = 0;
      lease.seen = 0;
      lease.endsAt = 0;
    }
    const { limit } = lease.policy;
    while (lease.waiting.length > 0) {
      const waiter = lease.waiting[0]!;
      const resetMs = lease.endsAt - now;
      if (lease.owned >= waiter.weight) {
        lease.waiting.shift();
        waiter.resolve({ count: take(lease, waiter.weight) ?? lease.seen, resetMs });
      } else if (lease.seen >= limit) {
        // Every unit a lease could give now is past the limit: over it, without asking. Like the
        // store, a request over the budget spends what it takes.
        lease.waiting.shift();
        const short = waiter.weight - lease.owned;
        take(lease, lease.owned);
        waiter.resolve({ count: Math.max(lease.seen, limit) + short, resetMs });
      } else break;
    }
    if (lease.leasing) return;
    const slice = sliceSize(limit, lease.seen);
    const demand = lease.waiting.reduce((sum, w) => sum + w.weight, 0);
    if (demand > 0) void leaseMore(lease, Math.max(demand, slice) - lease.owned);
    else if (lease.seen < limit && lease.owned < Math.floor(slice / 2)) void leaseMore(lease, slice - lease.owned);
  }

  async function leaseMore(lease: Lease, n: number): Promise<void> {
    lease.leasing = true;
    const sentAt = clock();
    let call: Promise<Count[]> | undefined;
    try {
      call = store.increment(lease.tokenId, [lease.policy], n);
      inFlight.add(call);
      const { count, resetMs } = (await call)[0]!;
      if (sentAt + resetMs <= clock()) {
        // The store's window ended while its answer was on the way (a round trip as long as the
        // window): the units would lapse on arrival and the next lease likewise, for ever. The
        // requests waiting get the units of this answer directly, as the store counted them.
        lease.leasing = false;
        let next = count - n;
        let served = 0;
        while (lease.waiting.length > 0 && (served === 0 || next + lease.waiting[0]!.weight <= count)) {
          const waiter = lease.waiting.shift()!;
          next += waiter.weight;
          served++;
          waiter.resolve({ count: next, resetMs: 0 });
        }
        serve(lease);
        return;
      }
      // A lease answered after the window ended locally starts the next one (or lapses at once).
      if (clock() >= lease.endsAt) {
        lease.units = [];
        lease.owned = 0;
        lease.seen = 0;
        lease.endsAt = 0;
      }
      lease.endsAt = Math.max(lease.endsAt, sentAt + resetMs);
      lease.seen = Math.max(lease.seen, count);
      const from = count - n + 1;
      const to = Math.min(count, lease.policy.limit);
      if (from <= to) {
        lease.units.push([from, to]);
        lease.owned += to - from + 1;
      }
      lease.leasing = false;
      serve(lease);
    } catch (error) {
      lease.leasing = false;
      for (const waiter of lease.waiting.splice(0)) waiter.reject(error);
    } finally {
      if (call !== undefined) inFlight.delete(call);
    }
  }

  /** Forgets the leases whose window has ended. */
  function sweep(now: number): void {
    if (now < sweepAt) return;
    sweepAt = now + 60_000;
    for (const [key, lease] of leases) {
      if (now >= lease.endsAt && !lease.leasing && lease.waiting.length === 0) leases.delete(key);
    }
  }

  const keyOf = (tokenId: string, policy: Policy) =>
    `${tokenId}|${policy.name}:${policy.limit}/${policy.windowSeconds}`;

  return {
    incrementNow(tokenId, policies, weight = 1) {
      const now = clock();
      const ready: Lease[] = [];
      for (const policy of policies) {
        const lease = leases.get(keyOf(tokenId, policy));
        // What serve() would answer at once: owned units, a window still running, nobody ahead.
        if (lease === undefined || lease.waiting.length > 0 || now >= lease.endsAt || lease.owned < weight) {
          return undefined;
        }
        ready.push(lease);
      }
      sweep(now);
      return ready.map((lease) => {
        const count = { count: take(lease, weight) ?? lease.seen, resetMs: lease.endsAt - now };
        serve(lease); // leases the next slice ahead, as after any answer
        return count;
      });
    },
    increment(tokenId, policies, weight = 1) {
      sweep(clock());
      return Promise.all(
        policies.map((policy) => {
          const key = keyOf(tokenId, policy);
          let lease = leases.get(key);
          if (lease === undefined) {
            lease = { tokenId, policy, units: [], owned: 0, seen: 0, endsAt: 0, leasing: false, waiting: [] };
            leases.set(key, lease);
          }
          const promise = new Promise<Count>((resolve, reject) => lease.waiting.push({ weight, resolve, reject }));
          serve(lease);
          return promise;
        }),
      );
    },
    async close() {
      await Promise.allSettled([...inFlight]);
      await store.close();
    },
  };
}

/**
 * Counters in an UNLOGGED table. Every request of a token bumps the same row, so one upsert per
 * request serialized on that row's lock and capped a token near 1,500 requests/s (bench). Instead,
 * a process keeps at most one upsert in flight per token and policy set: the requests that arrive
 * meanwhile are counted together by the next one (`count + n`), and each gets its own position in
 * the batch. Budgets stay exact across processes: every batch is one atomic statement.
 */
export function databaseCounters(db: Db): CounterStore {
  type Waiter = { weight: number; resolve: (counts: Count[]) => void; reject: (error: unknown) => void };
  const queues = new Map<string, { tokenId: string; policies: Policy[]; waiting: Waiter[]; busy: boolean }>();

  async function incrementBy(tokenId: string, policies: Policy[], n: number): Promise<Count[]> {
    const keys = policies.map((p) => `${tokenId}/${p.name}`);
    const windows = policies.map((p) => p.windowSeconds);
    type Row = { key: string; count: number; reset_ms: number };
    const rows = await db.execute<Row>(sql`
      insert into rate_limits as r (key, window_start, window_seconds, count)
      select k, now(), w, ${n} from unnest(${sqlArray(keys, 'text')}, ${sqlArray(windows, 'int')}) as t(k, w)
      on conflict (key) do update set
        count = case when r.window_start + make_interval(secs => excluded.window_seconds) <= now()
                     then excluded.count else r.count + excluded.count end,
        window_start = case when r.window_start + make_interval(secs => excluded.window_seconds) <= now()
                            then now() else r.window_start end,
        window_seconds = excluded.window_seconds
      returning key, count,
        (extract(epoch from (window_start + make_interval(secs => window_seconds) - now())) * 1000)::float8 as reset_ms`);
    const byKey = new Map(rows.map((row) => [row.key, row]));
    return keys.map((key) => {
      const row = byKey.get(key)!;
      return { count: Number(row.count), resetMs: Number(row.reset_ms) };
    });
  }

  async function drain(queue: { tokenId: string; policies: Policy[]; waiting: Waiter[]; busy: boolean }, key: string) {
    queue.busy = true;
    while (queue.waiting.length > 0) {
      const batch = queue.waiting.splice(0);
      try {
        const total = batch.reduce((sum, w) => sum + w.weight, 0);
        const counts = await incrementBy(queue.tokenId, queue.policies, total);
        // The batch took the counts from (count - total + 1) to count, each waiter its weight, in arrival order.
        let before = total;
        for (const waiter of batch) {
          before -= waiter.weight;
          const through = total - before;
          waiter.resolve(counts.map((c) => ({ count: c.count - total + through, resetMs: c.resetMs })));
        }
      } catch (error) {
        for (const waiter of batch) waiter.reject(error);
      }
    }
    queue.busy = false;
    queues.delete(key);
  }

  return {
    increment(tokenId, policies, weight = 1) {
      const key = `${tokenId}|${policies.map((p) => `${p.name}:${p.windowSeconds}`).join(',')}`;
      let queue = queues.get(key);
      if (queue === undefined) {
        queue = { tokenId, policies, waiting: [], busy: false };
        queues.set(key, queue);
      }
      const promise = new Promise<Count[]>((resolve, reject) => queue.waiting.push({ weight, resolve, reject }));
      if (!queue.busy) void drain(queue, key);
      return promise;
    },
    close: async () => {},
  };
}

// INCRBY each key by the weight (the last argument); a key's first increment starts its window.
// PTTL says when the window ends.
const CONSUME_LUA = `
local out = {}
local weight = tonumber(ARGV[#KEYS + 1])
for i, key in ipairs(KEYS) do
  local count = redis.call('INCRBY', key, weight)
  local ttl = redis.call('PTTL', key)
  if count == weight or ttl < 0 then
    redis.call('PEXPIRE', key, ARGV[i])
    ttl = tonumber(ARGV[i])
  end
  out[#out + 1] = count
  out[#out + 1] = ttl
end
return out`;

/** Counters in Redis, with `fallback` (the database) while Redis does not answer (orDatabase). */
export function redisCounters(redis: Redis, fallback: CounterStore, logger: Logger): CounterStore {
  const orFallback = orDatabase(logger, 'Redis unavailable; counting in the database');
  return {
    increment: (tokenId, policies, weight = 1) =>
      orFallback(
        async () => {
          // One hash tag per token keeps a token's keys in one slot of a Redis cluster.
          const keys = policies.map((p) => `ua:rl:{${tokenId}}:${p.name}`);
          const windowsMs = policies.map((p) => String(p.windowSeconds * 1000));
          const reply = (await redis.eval(CONSUME_LUA, keys.length, ...keys, ...windowsMs, String(weight))) as number[];
          return policies.map((_, i) => ({ count: Number(reply[2 * i]), resetMs: Number(reply[2 * i + 1]) }));
        },
        () => fallback.increment(tokenId, policies, weight),
      ),
    // The connection is the server's (assemble.ts), closed there.
    close: async () => {},
  };
}

/** `600/60s`, `100/1m`, `5000/1h`; `off` (allowed for the budgets, not for "all") for none. */
export function parseRateLimit(name: Policy['name'], raw: string): Policy | null | Error {
  const offAllowed = name !== 'all';
  if (raw === 'off' && offAllowed) return null;
  const match = /^(\d{1,9})\/(\d{1,6})(s|m|h)$/.exec(raw);
  if (!match)
    return new Error(`must look like 600/60s, 100/1m or 5000/1h${offAllowed ? ', or be off' : ''} (got "${raw}")`);
  const limit = Number(match[1]);
  const windowSeconds = Number(match[2]) * { s: 1, m: 60, h: 3600 }[match[3] as 's' | 'm' | 'h'];
  if (limit < 1 || windowSeconds < 1 || windowSeconds > 86_400) {
    return new Error(`needs a limit of at least 1 and a window from 1 s to 24 h (got "${raw}")`);
  }
  return { name, limit, windowSeconds };
}
