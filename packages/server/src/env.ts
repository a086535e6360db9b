// The only module that reads process.env. Every bad variable is reported at once, by name.
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import { parseRateLimit, type RateLimitConfig } from './rate-limit.ts';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  port: number;
  host: string;
  /** postgres:// URL; absent means the embedded PGlite database in `dataDir`. */
  databaseUrl: string | undefined;
  dataDir: string;
  /** Tokens accepted as configured by the operator; never logged. */
  apiTokens: string[];
  logLevel: LogLevel;
  /** `pretty` (human-readable lines) or `json`; unset: pretty in a terminal, JSON otherwise. */
  logFormat: 'json' | 'pretty' | undefined;
  rateLimits: RateLimitConfig;
  /** Rate-limit counters live here when set, else in the database. */
  redisUrl: string | undefined;
  /** Password hashes computed at once (19 MiB each), and how many may wait for a slot. */
  hashConcurrency: number;
  hashQueue: number;
  /** Browser origins allowed to call the API (CORS); empty: none, no CORS headers at all. */
  corsOrigins: string[];
  /** Turns /metrics on, for requests that carry it as a bearer token. */
  metricsToken: string | undefined;
  /** A request not done by then is answered 503; also PostgreSQL's statement_timeout. */
  requestTimeoutMs: number;
}

export const DEFAULT_RATE_LIMIT = '6000/60s';
export const DEFAULT_RATE_LIMIT_CREATE = '300/60s';

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

type Env = Record<string, string | undefined>;

export function loadConfig(env: Env = process.env): Config {
  const problems: string[] = [];
  const value = (name: string) => {
    const raw = env[name]?.trim();
    return raw === '' ? undefined : raw;
  };

  let port = 3000;
  const rawPort = value('PORT');
  if (rawPort !== undefined) {
    port = Number(rawPort);
    if (!/^\d+$/.test(rawPort) || port > 65535) {
      problems.push(`PORT must be a whole number from 0 to 65535 (got "${rawPort}")`);
    }
  }

  const host = value('HOST') ?? '127.0.0.1';

  const databaseUrl = value('DATABASE_URL');
  if (databaseUrl !== undefined && !/^postgres(ql)?:\/\/.+/.test(databaseUrl)) {
    problems.push('DATABASE_URL must be a postgres:// or postgresql:// URL');
  }

  // Relative to where the user typed the command (pnpm runs scripts in the package folder).
  const dataDir = resolve(env.INIT_CWD ?? process.cwd(), value('DATA_DIR') ?? './data');

  const apiTokens = (value('API_TOKENS') ?? '')
    .split(',')
    .map((t) => t.trim())
    .filter((t) => t !== '');
  // Never echo a token back, not even a bad one: say which entry is wrong.
  apiTokens.forEach((token, i) => {
    if (token.length < 20 || token.length > 256 || !/^[\x21-\x7e]+$/.test(token)) {
      problems.push(`API_TOKENS entry ${i + 1} must be 20 to 256 printable ASCII characters without spaces`);
    }
  });

  const rawLevel = value('LOG_LEVEL') ?? 'info';
  if (!(LOG_LEVELS as readonly string[]).includes(rawLevel)) {
    problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')} (got "${rawLevel}")`);
  }

  const logFormat = value('LOG_FORMAT');
  if (logFormat !== undefined && logFormat !== 'json' && logFormat !== 'pretty') {
    problems.push(`LOG_FORMAT must be json or pretty (got "${logFormat}")`);
  }

  const rateLimit = (name: 'all' | 'create', variable: string, fallback: string) => {
    const parsed = parseRateLimit(name, value(variable) ?? fallback);
    if (parsed instanceof Error) {
      problems.push(`${variable} ${parsed.message}`);
      return null;
    }
    return parsed;
  };
  const all = rateLimit('all', 'RATE_LIMIT', DEFAULT_RATE_LIMIT);
  const rateLimits = {
    all: all ?? { name: 'all' as const, limit: 1, windowSeconds: 1 }, // only when reported as a problem
    create: rateLimit('create', 'RATE_LIMIT_CREATE', DEFAULT_RATE_LIMIT_CREATE),
  };

  const redisUrl = value('REDIS_URL');
  if (redisUrl !== undefined && !/^rediss?:\/\/.+/.test(redisUrl)) {
    problems.push('REDIS_URL must be a redis:// or rediss:// URL');
  }

  const count = (variable: string, fallback: number, min: number, max: number) => {
    const raw = value(variable);
    if (raw === undefined) return fallback;
    const n = Number(raw);
    if (!/^\d+$/.test(raw) || n < min || n > max)
      problems.push(`${variable} must be a whole number from ${min} to ${max} (got "${raw}")`);
    return n;
  };
  const hashConcurrency = count('HASH_CONCURRENCY', availableParallelism(), 1, 256);
  const hashQueue = count('HASH_QUEUE', 64, 0, 10_000);
  const requestTimeoutMs = count('REQUEST_TIMEOUT_MS', 10_000, 100, 600_000);

  const corsOrigins = (value('CORS_ORIGINS') ?? '')
    .split(',')
    .map((o) => o.trim())
    .filter((o) => o !== '');
  for (const origin of corsOrigins) {
    if (!/^https?:\/\/[^/\s]+$/.test(origin))
      problems.push(`CORS_ORIGINS entries must be origins like https://app.example.com (got "${origin}")`);
  }

  const metricsToken = value('METRICS_TOKEN');
  if (
    metricsToken !== undefined &&
    (metricsToken.length < 20 || metricsToken.length > 256 || !/^[\x21-\x7e]+$/.test(metricsToken))
  ) {
    problems.push('METRICS_TOKEN must be 20 to 256 printable ASCII characters without spaces');
  }

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    port,
    host,
    databaseUrl,
    dataDir,
    apiTokens,
    logLevel: rawLevel as LogLevel,
    logFormat: logFormat as Config['logFormat'],
    rateLimits,
    redisUrl,
    hashConcurrency,
    hashQueue,
    requestTimeoutMs,
    metricsToken,
    corsOrigins,
  };
}
