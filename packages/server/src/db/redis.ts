import { Redis } from 'ioredis';

/**
 * The server's one Redis connection, shared by the rate limiter and verify's lockout: a command
 * fails at once while Redis is unreachable, and after 250 ms when it does not answer, instead of
 * waiting in a queue, so that each store falls back to the database.
 */
export function connectRedis(url: string): Redis {
  const redis = new Redis(url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, commandTimeout: 250 });
  redis.on('error', () => {}); // each failed command is logged where it falls back
  return redis;
}
