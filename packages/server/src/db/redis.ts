import { Redis } from 'ioredis';
import type { Logger } from 'pino';

/**
 * The server's one Redis connection, shared by the rate limiter and verify's lockout: a command
 * fails at once while Redis is unreachable, and after 250 ms when it does not answer, instead of
 * waiting in a queue, so that each store falls back to the database (orDatabase).
 */
export function connectRedis(url: string): Redis {
  const redis = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 250 });
  redis.on('error', () => {}); // each failed command is logged where it falls back
  return redis;
}

/**
 * Waits for `redis` to be connected, at most `ms`: a server that answered before its connection
 * was up counted its first requests in the database, apart from its peers' (a flaky limits test
 * after starts got faster, issue 47). Redis down at start: the server starts anyway, `ms` later,
 * and counts in the database until Redis is back.
 */
export async function redisReady(redis: Redis, ms = 2_000): Promise<void> {
  if (redis.status === 'ready') return;
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([
    new Promise<void>((resolve) => redis.once('ready', () => resolve())),
    new Promise<void>((resolve) => {
      timer = setTimeout(resolve, ms);
    }),
  ]);
  clearTimeout(timer);
}

/**
 * How a store in Redis falls back: `viaRedis`, or when Redis fails or does not answer, a warning
 * (`warning`) and `viaDatabase`. An outage of Redis neither lifts the limits nor fails requests;
 * the counts are split while it lasts, each store counting on its own.
 */
export function orDatabase(logger: Logger, warning: string) {
  return async <T>(viaRedis: () => Promise<T>, viaDatabase: () => Promise<T>): Promise<T> => {
    try {
      return await viaRedis();
    } catch (error) {
      logger.warn({ err: error instanceof Error ? error.message : String(error) }, warning);
      return viaDatabase();
    }
  };
}
