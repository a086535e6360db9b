// The only module that reads process.env. Every bad variable is reported at once, by name.
import { availableParallelism } from 'node:os';
import { resolve } from 'node:path';
import type { AuthFailureLimit } from '../auth/failed-authentications.ts';
import { parseTrustedProxies, TRUST_NOBODY, type TrustedProxies } from '../http/client-address.ts';
import { DEFAULT_VERIFY_LIMITS, type LockoutPolicy, type VerifyLimits } from '../limits/lockout.ts';
import { parseRateLimit, type RateLimitConfig } from '../limits/rate-limit.ts';
import { type Argon2Params, DEFAULT_PASSWORD_HASH, parsePasswordHash } from '../passwords/hasher.ts';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export interface Config {
  port: number;
  host: string;
  /** postgres:// URL; absent means the embedded PGlite database in `dataDir`. */
  databaseUrl: string | undefined;
  /** Where the LISTEN connections go, when not DATABASE_URL (a transaction-mode pooler drops a LISTEN). */
  databaseListenUrl: string | undefined;
  /** DATABASE_POOL_SIZE: the pool's connections to PostgreSQL, per process. */
  databasePoolSize: number;
  dataDir: string;
  /** Tokens accepted as configured by the operator; never logged. */
  apiTokens: string[];
  logLevel: LogLevel;
  /** `pretty` (human-readable lines) or `json`; unset: pretty in a terminal, JSON otherwise. */
  logFormat: 'json' | 'pretty' | undefined;
  rateLimits: RateLimitConfig;
  /** What the server logs at start about its configuration without refusing it (deprecated names). */
  warnings: string[];
  /** Rate-limit counters live here when set, else in the database. */
  redisUrl: string | undefined;
  /** Password hashes computed at once (19 MiB each), and how many may wait for a slot. */
  hashConcurrency: number;
  hashQueue: number;
  /** Hashes costing far more than PASSWORD_HASH (imported) checked at once, in a lane of their own. */
  hashCostlyConcurrency: number;
  /** Long-polls (GET /events with wait) waiting at once in one process, per token and per site. */
  longPolls: { perToken: number; perSite: number };
  /** The most accounts a site may hold (create and import refuse beyond it); null: no limit. */
  maxAccountsPerSite: number | null;
  /** Browser origins allowed to call the API (CORS); empty: none, no CORS headers at all. */
  corsOrigins: string[];
  /** Turns /metrics on, for requests that carry it as a bearer token. */
  metricsToken: string | undefined;
  /**
   * OpenTelemetry traces, exported by OTLP when OTEL_EXPORTER_OTLP_(TRACES_)ENDPOINT is set and
   * OTEL_SDK_DISABLED is not true (the SDK reads the other OTEL_* variables itself); else off.
   */
  tracing: { serviceName: string } | undefined;
  /** A request not done by then is answered 503; also PostgreSQL's statement_timeout. */
  requestTimeoutMs: number;
  /** After SIGTERM, how long to keep serving (readiness 503) before closing the listener. */
  shutdownDrainMs: number;
  /** Failed authentications allowed per client address and window, in each process; null: no limit. */
  authFailureLimit: AuthFailureLimit | null;
  /** TRUSTED_PROXIES: peers whose X-Forwarded-For names the client; none by default. */
  trustedProxies: TrustedProxies;
  /** argon2id parameters of new hashes; a stored hash made otherwise is replaced at its next verify. */
  passwordHash: Argon2Params;
  /** verify's guessing limits, per identifier and per end-user address. */
  verifyLimits: VerifyLimits;
  /** How long change events are kept (the feed, replays), in ms. */
  eventsRetentionMs: number;
  /** Webhooks may go to plain http and to private, loopback and link-local addresses. */
  webhookAllowPrivate: boolean;
  /** Deliveries to one webhook endpoint in flight at once, every server together. */
  webhookEndpointConcurrency: number;
  /** How long audit rows are kept, in ms; null: for ever. */
  auditRetentionMs: number | null;
  /** The benchmark's switch: writes make no events, to measure what the outbox costs. */
  outboxDisabled: boolean;
}

export const DEFAULT_RATE_LIMIT = '6000/60s';
/**
 * One server's argon2id rate, a minute of it (about 100 hashes/s standalone on 2 cores, see the
 * README): a token may keep one server's hashing busy, never more. What keeps one site from
 * crowding out the others is the fair queue in passwords/hasher.ts, not this budget.
 */
export const DEFAULT_RATE_LIMIT_HASH = '6000/60s';
/**
 * Accounts one site may import per hour, every token of it together: a large migration in a few
 * hours (the operator's `cli import` is not counted), never the shared database filled in minutes
 * (an account with its event and audit row is about 8 KB: 100,000 is under 1 GB an hour).
 */
export const DEFAULT_RATE_LIMIT_IMPORT = '100000/1h';
/** How long audit rows are kept (see loadConfig). */
export const DEFAULT_AUDIT_RETENTION = '365d';
/** Failed authentications per client address: far above what a working client ever fails. */
export const DEFAULT_AUTH_FAILURE_LIMIT = '100/10s';

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
  const databaseListenUrl = value('DATABASE_LISTEN_URL');
  if (databaseListenUrl !== undefined && !/^postgres(ql)?:\/\/.+/.test(databaseListenUrl)) {
    problems.push('DATABASE_LISTEN_URL must be a postgres:// or postgresql:// URL');
  }
  if (databaseListenUrl !== undefined && databaseUrl === undefined) {
    problems.push('DATABASE_LISTEN_URL needs DATABASE_URL (the embedded database listens in process)');
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

  const rateLimit = (name: 'all' | 'hash' | 'import', variable: string, fallback: string) => {
    const parsed = parseRateLimit(name, value(variable) ?? fallback);
    if (parsed instanceof Error) {
      problems.push(`${variable} ${parsed.message}`);
      return null;
    }
    return parsed;
  };
  const all = rateLimit('all', 'RATE_LIMIT', DEFAULT_RATE_LIMIT);
  const warnings: string[] = [];
  // RATE_LIMIT_CREATE was the budget of creates; it now bounds every hash, under a name that says so.
  const hashBudget = () => {
    if (value('RATE_LIMIT_CREATE') === undefined) return rateLimit('hash', 'RATE_LIMIT_HASH', DEFAULT_RATE_LIMIT_HASH);
    if (value('RATE_LIMIT_HASH') !== undefined) {
      problems.push('RATE_LIMIT_CREATE is the old name of RATE_LIMIT_HASH; set only RATE_LIMIT_HASH');
      return null;
    }
    warnings.push(
      'RATE_LIMIT_CREATE is deprecated: it is now the budget of every password hash (creates and password ' +
        'changes); rename it RATE_LIMIT_HASH',
    );
    return rateLimit('hash', 'RATE_LIMIT_CREATE', value('RATE_LIMIT_CREATE')!);
  };
  const rateLimits = {
    all: all ?? { name: 'all' as const, limit: 1, windowSeconds: 1 }, // only when reported as a problem
    hash: hashBudget(),
    import: rateLimit('import', 'RATE_LIMIT_IMPORT', DEFAULT_RATE_LIMIT_IMPORT),
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
  const databasePoolSize = count('DATABASE_POOL_SIZE', 10, 1, 1000);
  const hashConcurrency = count('HASH_CONCURRENCY', availableParallelism(), 1, 256);
  const hashQueue = count('HASH_QUEUE', 64, 0, 10_000);
  const hashCostlyConcurrency = count('HASH_COSTLY_CONCURRENCY', 1, 1, 64);
  const longPolls = {
    perToken: count('LONG_POLLS_PER_TOKEN', 8, 1, 10_000),
    perSite: count('LONG_POLLS_PER_SITE', 32, 1, 100_000),
  };
  const maxAccounts = count('MAX_ACCOUNTS_PER_SITE', 0, 0, 2_000_000_000);
  const requestTimeoutMs = count('REQUEST_TIMEOUT_MS', 10_000, 100, 600_000);
  const shutdownDrainMs = count('SHUTDOWN_DRAIN_MS', 0, 0, 60_000);

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

  const otelEndpoint = value('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT') ?? value('OTEL_EXPORTER_OTLP_ENDPOINT');
  const otelDisabled = value('OTEL_SDK_DISABLED')?.toLowerCase() === 'true';
  const tracing =
    otelEndpoint === undefined || otelDisabled
      ? undefined
      : { serviceName: value('OTEL_SERVICE_NAME') ?? 'user-accounts' };

  const rawAuthFailures = value('AUTH_FAILURE_LIMIT') ?? DEFAULT_AUTH_FAILURE_LIMIT;
  let authFailureLimit: AuthFailureLimit | null = null;
  if (rawAuthFailures !== 'off') {
    const parsed = parseRateLimit('all', rawAuthFailures);
    if (parsed instanceof Error || parsed === null) {
      problems.push(
        `AUTH_FAILURE_LIMIT must look like 100/10s (failures per window, 1 s to 24 h), or be off (got "${rawAuthFailures}")`,
      );
    } else {
      authFailureLimit = { limit: parsed.limit, windowSeconds: parsed.windowSeconds };
    }
  }

  // Nobody by default: X-Forwarded-For from any other peer is the client's own writing.
  let trustedProxies = parseTrustedProxies(value('TRUSTED_PROXIES') ?? '');
  if (trustedProxies instanceof Error) {
    problems.push(`TRUSTED_PROXIES ${trustedProxies.message}`);
    trustedProxies = TRUST_NOBODY;
  }

  const passwordHash = parsePasswordHash(value('PASSWORD_HASH') ?? DEFAULT_PASSWORD_HASH);
  if (passwordHash instanceof Error) problems.push(`PASSWORD_HASH ${passwordHash.message}`);

  // N failures within a window: the window is also how long a quiet identifier keeps its count.
  const verifyLimit = (variable: string, fallback: LockoutPolicy): LockoutPolicy => {
    const raw = value(variable);
    if (raw === undefined) return fallback;
    const parsed = parseRateLimit('all', raw);
    if (parsed instanceof Error || parsed === null) {
      problems.push(`${variable} must look like 10/15m (failures per window, 1 s to 24 h) (got "${raw}")`);
      return fallback;
    }
    return { ...fallback, limit: parsed.limit, windowSeconds: parsed.windowSeconds };
  };
  const verifyLimits: VerifyLimits = {
    identifier: verifyLimit('VERIFY_LIMIT', DEFAULT_VERIFY_LIMITS.identifier),
    // An address is locked until its window ends.
    address: (() => {
      const policy = verifyLimit('VERIFY_LIMIT_ADDRESS', DEFAULT_VERIFY_LIMITS.address);
      return { ...policy, lockSeconds: policy.windowSeconds, maxLockSeconds: policy.windowSeconds };
    })(),
  };

  /** `Nd` or `Nh` in ms; 0 when it is neither. */
  const duration = (raw: string) => {
    const parsed = /^(\d{1,5})([hd])$/.exec(raw);
    return parsed === null ? 0 : Number(parsed[1]) * (parsed[2] === 'd' ? 86_400_000 : 3_600_000);
  };
  const rawRetention = value('EVENTS_RETENTION') ?? '7d';
  const eventsRetentionMs = duration(rawRetention);
  // At least the 3 days webhook deliveries are retried for: a retry must find its event.
  if (eventsRetentionMs < 3 * 86_400_000 || eventsRetentionMs > 3650 * 86_400_000)
    problems.push(
      `EVENTS_RETENTION must be a number of days or hours, 3d (72h) to 3650d, like 7d (got "${rawRetention}")`,
    );

  // A year: an incident is often found months after it began, and PCI DSS (10.5.1) asks for 12
  // months of audit history; rows name accounts, so not for ever (a data minimum) unless told.
  const rawAuditRetention = value('AUDIT_RETENTION') ?? DEFAULT_AUDIT_RETENTION;
  const auditRetentionMs = rawAuditRetention === 'off' ? null : duration(rawAuditRetention);
  if (auditRetentionMs !== null && (auditRetentionMs < 86_400_000 || auditRetentionMs > 36_500 * 86_400_000))
    problems.push(
      `AUDIT_RETENTION must be a number of days or hours, 1d (24h) to 36500d, like 365d, or off (got "${rawAuditRetention}")`,
    );

  const webhookEndpointConcurrency = count('WEBHOOK_ENDPOINT_CONCURRENCY', 4, 1, 256);

  const flag = (variable: string) => {
    const raw = value(variable) ?? 'false';
    if (raw !== 'true' && raw !== 'false') problems.push(`${variable} must be true or false (got "${raw}")`);
    return raw === 'true';
  };
  const webhookAllowPrivate = flag('WEBHOOK_ALLOW_PRIVATE');
  // A typo (OUTBOX_DISABLED=yes) must not leave the events on while the operator thinks them off, or the reverse.
  const outboxDisabled = flag('OUTBOX_DISABLED');
  if (outboxDisabled) {
    // Dense sequence numbers would hide the gap: say it at every start.
    warnings.push(
      'OUTBOX_DISABLED=true: writes make no change events; the feed and webhooks miss them for good (a benchmark switch)',
    );
  }

  if (problems.length > 0) throw new ConfigError(problems);
  return {
    eventsRetentionMs,
    outboxDisabled,
    webhookAllowPrivate,
    webhookEndpointConcurrency,
    auditRetentionMs,
    passwordHash: passwordHash as Argon2Params,
    verifyLimits,
    port,
    host,
    databaseUrl,
    databaseListenUrl,
    databasePoolSize,
    dataDir,
    apiTokens,
    logLevel: rawLevel as LogLevel,
    logFormat: logFormat as Config['logFormat'],
    rateLimits,
    warnings,
    redisUrl,
    hashConcurrency,
    hashQueue,
    hashCostlyConcurrency,
    longPolls,
    maxAccountsPerSite: maxAccounts === 0 ? null : maxAccounts,
    requestTimeoutMs,
    shutdownDrainMs,
    metricsToken,
    tracing,
    corsOrigins,
    authFailureLimit,
    trustedProxies,
  };
}

/**
 * libuv's thread pool runs every hash (@node-rs/argon2, @node-rs/bcrypt, scrypt, PBKDF2), and the
 * file and DNS work too: 4 threads unless told, whatever HASH_CONCURRENCY says, so more hashes
 * than 4 would never run at once and would hold up the rest. Sized from the configuration before
 * anything starts the pool; an operator's own UV_THREADPOOL_SIZE stays.
 */
export function sizeThreadPool(config: Pick<Config, 'hashConcurrency' | 'hashCostlyConcurrency'>): void {
  const hashes = config.hashConcurrency + config.hashCostlyConcurrency;
  process.env.UV_THREADPOOL_SIZE ??= String(Math.min(1024, hashes + 4));
}
