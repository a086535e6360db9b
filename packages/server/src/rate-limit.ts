// Per-token request budgets, shared by every server of a deployment: counted in the database by
// default, in Redis when REDIS_URL is set. Fixed windows that start at the first request after
// the previous window ended, so a fresh token always gets its whole budget at once.
import { sql } from 'drizzle-orm';
import type { Redis } from 'ioredis';
import type { Logger } from 'pino';
import type { Db } from './db/client.ts';

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
}

interface Count {
  count: number;
  resetMs: number;
}

/** Adds `weight` (default one) to each counter and says where each window stands. */
interface CounterStore {
  increment(tokenId: string, policies: Policy[], weight?: number): Promise<Count[]>;
  close(): Promise<void>;
}

/** A budget a request counts against on top of "all". */
export type Budget = 'hash';

export interface RateLimiter {
  /** Counts this request against the token's "all" policy and the given budget's, when set. */
  consume(tokenId: string, budget?: Budget): Promise<PolicyState[]>;
  /**
   * Counts this request, already counted against "all", against `budget` alone: for a request
   * that learns only late that it spends what the budget bounds. [] when the budget is off.
   */
  consumeBudget(tokenId: string, budget: Budget, weight?: number): Promise<PolicyState[]>;
  close(): Promise<void>;
}

export function createRateLimiter(config: RateLimitConfig, store: CounterStore): RateLimiter {
  const countAgainst = async (tokenId: string, candidates: (Policy | null)[], weight = 1): Promise<PolicyState[]> => {
    const policies = candidates.filter((p): p is Policy => p !== null);
    if (policies.length === 0) return [];
    const counts = await store.increment(tokenId, policies, weight);
    return policies.map((policy, i) => {
      const { count, resetMs } = counts[i]!;
      return {
        ...policy,
        remaining: Math.max(0, policy.limit - count),
        resetSeconds: Math.max(1, Math.ceil(resetMs / 1000)),
        exceeded: count > policy.limit,
      };
    });
  };
  return {
    consume: (tokenId, budget) => countAgainst(tokenId, [config.all, budget === undefined ? null : config[budget]]),
    consumeBudget: (tokenId, budget, weight) => countAgainst(tokenId, [config[budget]], weight),
    close: () => store.close(),
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
    const result = await db.execute<Row>(sql`
      insert into rate_limits as r (key, window_start, window_seconds, count)
      select k, now(), w, ${n} from unnest(${pgArray(keys, 'text')}, ${pgArray(windows, 'int')}) as t(k, w)
      on conflict (key) do update set
        count = case when r.window_start + make_interval(secs => excluded.window_seconds) <= now()
                     then excluded.count else r.count + excluded.count end,
        window_start = case when r.window_start + make_interval(secs => excluded.window_seconds) <= now()
                            then now() else r.window_start end,
        window_seconds = excluded.window_seconds
      returning key, count,
        (extract(epoch from (window_start + make_interval(secs => window_seconds) - now())) * 1000)::float8 as reset_ms`);
    // postgres.js answers an array of rows, PGlite an object with `rows`.
    const rows: Row[] = Array.isArray(result) ? result : (result as unknown as { rows: Row[] }).rows;
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

// array[$1, $2]::type[]: binds each element, the same way on postgres.js and PGlite.
const pgArray = (values: (string | number)[], type: 'text' | 'int') =>
  sql`array[${sql.join(
    values.map((v) => sql`${v}`),
    sql`, `,
  )}]::${sql.raw(type)}[]`;

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

/**
 * Counters in Redis. When Redis does not answer within 250 ms the request is counted by
 * `fallback` (the database) and a warning logged: an outage of Redis should neither become an
 * outage of the service nor switch the limits off. Budgets are split while it lasts.
 */
export function redisCounters(redis: Redis, fallback: CounterStore, logger: Logger): CounterStore {
  return {
    async increment(tokenId, policies, weight = 1) {
      try {
        // One hash tag per token keeps a token's keys in one slot of a Redis cluster.
        const keys = policies.map((p) => `ua:rl:{${tokenId}}:${p.name}`);
        const windowsMs = policies.map((p) => String(p.windowSeconds * 1000));
        const reply = (await redis.eval(CONSUME_LUA, keys.length, ...keys, ...windowsMs, String(weight))) as number[];
        return policies.map((_, i) => ({ count: Number(reply[2 * i]), resetMs: Number(reply[2 * i + 1]) }));
      } catch (error) {
        logger.warn(
          { err: error instanceof Error ? error.message : String(error) },
          'Redis unavailable; counting in the database',
        );
        return fallback.increment(tokenId, policies, weight);
      }
    },
    // The connection is the server's (deps.ts), closed there.
    close: async () => {},
  };
}

/** `600/60s`, `100/1m`, `5000/1h`; `off` (allowed for the hash budget only) for none. */
export function parseRateLimit(name: Policy['name'], raw: string): Policy | null | Error {
  const offAllowed = name === 'hash';
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
