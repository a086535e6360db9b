// The composition root: from a Config to a ready app, with everything it needs. main.ts and the
// test targets both assemble the service here, so the suite runs what production runs.

import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Tracer } from '@opentelemetry/api';
import type { Hono } from 'hono';
import { type DestinationStream, type Logger, type LoggerOptions, pino } from 'pino';
import type { HeldElsewhere } from './accounts/user-data.ts';
import { createAuthFailures } from './auth/failed-authentications.ts';
import { createTokenVerifier, ensureDevToken, hasUsableToken, TOKENS_CHANNEL } from './auth/tokens.ts';
import type { Config } from './config/env.ts';
import { type Database, LOCK_TIMEOUT_MS, openPglite, openPostgres } from './db/client.ts';
import { lockDataDir } from './db/data-dir-lock.ts';
import { unsafeDataDir, unsafeSecretFile } from './db/file-safety.ts';
import { connectRedis, redisReady } from './db/redis.ts';
import { describeError } from './errors.ts';
import { EVENTS_CHANNEL } from './events/queue.ts';
import { startSequencer } from './events/sequencer.ts';
import { createWake } from './events/wake.ts';
import { sealStoredSecrets } from './events/webhooks/endpoints.ts';
import { FactorKeyFileError, factorKeysFor } from './factors/key-file.ts';
import { dropStoredTicketKey } from './factors/login-ticket.ts';
import { createApp } from './http/app.ts';
import type { AppDeps, AppEnv } from './http/context.ts';
import { type AccountHooks, joinHooks } from './kernel/account-hooks.ts';
import type { KeyRing } from './kernel/secret-box.ts';
import { createHeavyReadGate, heavyReadLimits } from './limits/heavy-reads.ts';
import { databaseLockout, redisLockout } from './limits/lockout.ts';
import { createLongPollGate } from './limits/long-polls.ts';
import { createRateLimiter, databaseCounters, leasedCounters, redisCounters } from './limits/rate-limit.ts';
import { createTransactionShare, transactionShareOptions } from './limits/transactions.ts';
import { messageOutcomes } from './messages/events.ts';
import { type MessageWorkerOptions, startMessageWorker } from './messages/worker.ts';
import { createMetrics } from './ops/metrics.ts';
import { orgHooks } from './orgs/hooks.ts';
import { membershipsOf } from './orgs/members.ts';
import { createPasswordHasher, type PasswordHasher } from './passwords/hasher.ts';
import { createBreachedPasswords } from './passwords/screening.ts';
import { sessionHooks } from './sessions/hooks.ts';
import { sessionsHeldFor } from './sessions/manage.ts';
import { createSigningKeys, resealSigningKeys } from './sessions/signing-keys.ts';
import { createSsoDeps } from './sso/deps.ts';
import { ssoSignInGate } from './sso/enforcement.ts';
import { startTracing } from './tracing.ts';

/**
 * What the other domains do when something happens to an account (kernel/account-hooks.ts), in
 * this order: its sessions end (sessions/hooks.ts), then its memberships go (orgs/hooks.ts).
 * accounts/ runs them in its writes and imports neither.
 */
export const accountHooks: AccountHooks = joinHooks([sessionHooks, orgHooks]);

/** What the other domains hold of an account, for its person's data (accounts/user-data.ts). */
export const heldElsewhere: HeldElsewhere = { sessions: sessionsHeldFor, organizations: membershipsOf };

/** A reason the service cannot start, said to the operator as it is. */
export class StartError extends Error {
  override name = 'StartError';
}

/** The keys a log line may carry that hold a secret; pino replaces their values. */
const REDACT = ['password', '*.password', 'token', '*.token', 'authorization', '*.authorization'];

/**
 * The shape of every line: `"level":"info"` and an ISO time, so that a person grepping the log or
 * a collector without pino's numbers reads them as they are. Tests log with these options too.
 */
export function loggerOptions(level: Config['logLevel']): LoggerOptions {
  return {
    level,
    base: { service: 'user-accounts' },
    redact: { paths: REDACT, censor: '[redacted]' },
    formatters: { level: (label) => ({ level: label }) },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
}

/** JSON lines for machines; readable lines for a person at a terminal. Secrets redacted either way. */
export async function createLogger(config: Config, destination?: DestinationStream): Promise<Logger> {
  const options = loggerOptions(config.logLevel);
  if (destination !== undefined) return pino(options, destination);
  const tty = process.stdout.isTTY === true;
  if (config.logFormat === 'pretty' || (config.logFormat === undefined && tty)) {
    // A development dependency (pnpm build bundles it): installed without it, a terminal gets JSON.
    const pretty = await import('pino-pretty').then(
      (m) => m.default,
      () => undefined,
    );
    if (pretty !== undefined) return pino(options, pretty({ colorize: tty, sync: true, ignore: 'service' }));
    if (config.logFormat === 'pretty')
      throw new StartError(
        'LOG_FORMAT=pretty needs pino-pretty, a development dependency: install it, or set LOG_FORMAT=json',
      );
  }
  return pino(options, batchedStdout());
}

/** How much of the log a server holds before writing it, and for how long at most. */
export const LOG_BATCH = { bytes: 32 * 1024, ms: 100 };

/**
 * Standard output written in batches (issue 47, point 2): lines gather until 32 KiB or 100 ms,
 * then go out in one write, rather than one write a line (a write a request, the access line's,
 * was the costliest step of a read's own after the answer's). Any exit writes what is held
 * (pino's exit hook), and so does a signal whose default would kill the process before it (see
 * flushOnSignals); a process killed outright (SIGKILL) loses what it held, normally its last
 * 100 ms of lines.
 */
function batchedStdout(): DestinationStream {
  const stream = pino.destination({
    dest: 1,
    sync: false,
    minLength: LOG_BATCH.bytes,
    maxWrite: 4 * LOG_BATCH.bytes,
    periodicFlush: LOG_BATCH.ms,
  } as Parameters<typeof pino.destination>[0]);
  batched.add(stream);
  stream.on('close', () => batched.delete(stream));
  flushOnSignals();
  return stream;
}

const batched = new Set<{ flushSync(): void }>();
let signalsWatched = false;

/**
 * On SIGTERM, SIGINT, SIGHUP or SIGQUIT that nothing else handles (before main.ts installs its
 * shutdown, during the database's opening; SIGHUP and SIGQUIT always), the held lines are written
 * and the signal raised again, so that it does what it would have done: without this, a signal's
 * default action ends the process with no exit hook, and the batch with it.
 */
function flushOnSignals(): void {
  if (signalsWatched) return;
  signalsWatched = true;
  for (const signal of ['SIGTERM', 'SIGINT', 'SIGHUP', 'SIGQUIT'] as const) {
    const onSignal = () => {
      if (process.listenerCount(signal) > 1) return; // the server's own shutdown has it
      process.off(signal, onSignal);
      for (const stream of batched) {
        try {
          stream.flushSync();
        } catch {
          // destroyed, or not open yet: nothing to write
        }
      }
      process.kill(process.pid, signal);
    };
    process.on(signal, onSignal);
  }
}

/** The configured database, opened and migrated; on the embedded one, its folder locked to us. */
export async function openDatabase(config: Config, tracer?: Tracer): Promise<{ database: Database; unlock(): void }> {
  const traced = tracer === undefined ? {} : { tracer };
  if (config.databaseUrl !== undefined) {
    const database = await openPostgres(config.databaseUrl, {
      ...traced,
      max: config.databasePoolSize,
      statementTimeoutMs: config.requestTimeoutMs,
      lockTimeoutMs: Math.min(LOCK_TIMEOUT_MS, config.requestTimeoutMs),
      ...(config.databaseListenUrl === undefined ? {} : { listenUrl: config.databaseListenUrl }),
    });
    await database.migrate().catch(async (error: unknown) => {
      await database.close().catch(() => {});
      throw error;
    });
    return { database, unlock: () => {} };
  }
  mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
  const unsafe = unsafeDataDir(config.dataDir);
  if (unsafe !== undefined) throw new StartError(unsafe);
  const unlock = lockDataDir(config.dataDir);
  try {
    const database = await openPglite(config.dataDir, traced);
    await database.migrate();
    return { database, unlock };
  } catch (error) {
    unlock();
    throw error;
  }
}

export interface Service {
  app: Hono<AppEnv>;
  deps: AppDeps;
  database: Database;
  /** The development token of an embedded database without API_TOKENS (main prints it). */
  devToken: { token: string; minted: boolean; file: string } | undefined;
  /** Closes what assemble opened: the Redis connection, the database, the folder lock. */
  close(): Promise<void>;
}

/** What only code can choose, never an operator's configuration. */
export interface AssembleOptions {
  /** false: writes make no change events (the benchmark's measure of what they cost); default true. */
  outbox?: boolean;
  /** The message worker's settings beyond the defaults (tests shorten its retries). */
  messageWorker?: Partial<Pick<MessageWorkerOptions, 'schedule' | 'pollMs' | 'timeoutMs' | 'perSite' | 'concurrency'>>;
}

/**
 * Tokens, limiter, hasher, metrics and the app over an open database. A server must have a way
 * in: API_TOKENS, tokens minted with the CLI, or (embedded only) the dev token minted here.
 */
export async function assembleOn(
  config: Config,
  database: Database,
  logger: Logger,
  tracer?: Tracer,
  options: AssembleOptions = {},
): Promise<Omit<Service, 'close'> & { closeDeps(): Promise<void> }> {
  let devToken: Service['devToken'];
  if (config.apiTokens.length === 0) {
    if (database.kind === 'pglite') {
      const unsafe = unsafeSecretFile(join(config.dataDir, 'dev-token'));
      if (unsafe !== undefined) throw new StartError(unsafe);
      devToken = await ensureDevToken(database.db, config.dataDir);
    } else if (!(await hasUsableToken(database.db))) {
      throw new StartError(
        'no API token: set API_TOKENS (comma-separated; e.g. API_TOKENS=ua_$(openssl rand -base64 32 | tr -d "/+=")), ' +
          'or mint one in the database with `cli token create --site <site> --scopes read,write`',
      );
    }
  }
  for (const warning of config.warnings) logger.warn(warning);
  const tokens = createTokenVerifier(database.db, config.apiTokens);
  const tokenChanges = await database.listen(TOKENS_CHANNEL, {
    notified: () => tokens.invalidate(),
    confirmed: (until) => tokens.confirmed(until),
    live(up, closed) {
      tokens.setLive(up);
      // Closed on purpose at a stop: no cause for alarm.
      if (!up && !closed)
        logger.warn('not hearing token changes from the database; every request reads its token until it is back');
      else logger.debug('hearing token changes; accepted tokens are cached');
    },
  });
  const wake = createWake();
  const sequencer = startSequencer(database.db, (error) =>
    logger.warn({ err: describeError(error) }, 'numbering events failed; will retry'),
  );
  const eventsHeard = await database.listen(EVENTS_CHANNEL, {
    // The site whose events were numbered; an empty payload (a server of an older version) wakes all.
    notified: (site) => wake.notify(site === '' ? undefined : site),
    confirmed: () => {},
    // Heard from now on: what was numbered while not listening (the start, a lost connection) is
    // looked for at once, not at the next poll.
    live: (up) => {
      if (up) wake.notify();
    },
  });
  const redis = config.redisUrl === undefined ? undefined : connectRedis(config.redisUrl);
  if (redis !== undefined) await redisReady(redis);
  const counters = databaseCounters(database.db);
  // Leased slices: one store round trip serves many requests (rate-limit.ts).
  const limiter = createRateLimiter(
    config.rateLimits,
    leasedCounters(redis === undefined ? counters : redisCounters(redis, counters, logger)),
  );
  const failures = databaseLockout(database.db);
  const lockout = redis === undefined ? failures : redisLockout(redis, failures, logger);
  let hasher: PasswordHasher | undefined;
  const metrics =
    config.metricsToken === undefined
      ? undefined
      : {
          token: config.metricsToken,
          collector: createMetrics({
            database,
            hasher: () => hasher,
            poolSize: database.kind === 'postgres' ? config.databasePoolSize : 1,
            replica: config.replicaName,
          }),
        };
  hasher = createPasswordHasher({
    concurrency: config.hashConcurrency,
    maxWaiting: config.hashQueue,
    costlyConcurrency: config.hashCostlyConcurrency,
    onHashed: metrics?.collector.observeHash,
    params: config.passwordHash,
    costReference: config.passwordHashCostReference,
    ...(tracer === undefined ? {} : { tracer }),
  });
  const factorKeys = factorKeysOf(config, database, logger);
  await sealInTheClear(database, factorKeys, logger);
  // Read now (and on a new deployment made), then kept in memory and read again every 30 s: no
  // token ever waits on the database for its key (sessions/signing-keys.ts).
  const accessTokens = createSigningKeys({
    db: database.db,
    ring: factorKeys,
    issuer: config.accessTokens.issuer,
    lifetimeSeconds: config.accessTokens.lifetimeSeconds,
    onRefreshError: (error) =>
      logger.warn({ err: describeError(error) }, 'reading the access-token signing keys failed; using those in memory'),
  });
  await accessTokens
    .refresh()
    .catch((error) =>
      logger.warn(
        { err: describeError(error) },
        'reading the access-token signing keys failed; reading them at the first token',
      ),
    );
  const deps: AppDeps = {
    database,
    tokens,
    hasher,
    limiter,
    logger,
    metrics,
    ...(tracer === undefined ? {} : { tracer }),
    requestTimeoutMs: config.requestTimeoutMs,
    corsOrigins: config.corsOrigins,
    verifyLimits: config.verifyLimits,
    lockout,
    accessTokens,
    accountHooks,
    // Which logins the site's organizations refuse: enforced single sign-on (sso/enforcement.ts).
    signInGate: ssoSignInGate,
    heldElsewhere,
    wake,
    sequencer,
    outbox: options.outbox ?? true,
    lifecycle: { draining: false },
    longPolls: createLongPollGate(config.longPolls),
    heavyReads: createHeavyReadGate(heavyReadLimits(config.heavyReadsPerSite)),
    heavyExports: createHeavyReadGate(heavyReadLimits(config.heavyReadsPerSite)),
    // The embedded database has one connection: every site's transactions take turns on it.
    transactions: createTransactionShare(
      transactionShareOptions(database.kind === 'pglite' ? 1 : config.databasePoolSize),
    ),
    ...(config.maxAccountsPerSite === null ? {} : { maxAccountsPerSite: config.maxAccountsPerSite }),
    trustedProxies: config.trustedProxies,
    ...(factorKeys === undefined ? {} : { factorKeys }),
    sso: createSsoDeps({ publicUrl: config.publicUrl, dnsResolvers: config.dnsResolvers }),
    ...(config.breachedPasswords === undefined
      ? {}
      : { breachedPasswords: createBreachedPasswords(config.breachedPasswords) }),
    ...(config.authFailureLimit === null ? {} : { authFailures: createAuthFailures(config.authFailureLimit) }),
  };
  // Every server sends the message outbox (messages/worker.ts): no sender process of its own.
  const messageWorker = startMessageWorker({
    db: database.db,
    logger,
    factorKeys,
    timeoutMs: config.messageTimeoutMs,
    ...(options.messageWorker ?? {}),
    outcomes: messageOutcomes(database.db, () => sequencer.kick()),
  });
  deps.messages = { kick: messageWorker.kick, budgets: config.messageBudgets };
  async function closeDeps() {
    await messageWorker.stop();
    await tokenChanges.close();
    await eventsHeard.close();
    await sequencer.stop();
    accessTokens.close();
    redis?.disconnect();
    await limiter.close();
    hasher!.close();
  }
  return { app: createApp(deps), deps, database, devToken, closeDeps };
}

/**
 * What a database from before issue 57 (G6, G7) kept in the clear, at each start: SQL cannot see
 * the deployment's key, so no migration could. Webhook secrets sealed (endpoints.ts), the old
 * ticket key deleted (login-ticket.ts), signing keys sealed by the database's own key sealed
 * again under the ring (signing-keys.ts). A failure (the database away) is said and the start goes
 * on: the next start does it, and an unsealed secret still signs meanwhile.
 */
async function sealInTheClear(database: Database, ring: KeyRing | undefined, logger: Logger): Promise<void> {
  const db = database.db;
  const steps: [string, () => Promise<string | undefined>][] = [
    [
      'webhook signing secrets',
      async () => {
        const n = await sealStoredSecrets(db, ring);
        return n > 0 ? `sealed ${n} webhook signing secret(s) kept in the clear` : undefined;
      },
    ],
    [
      'the login tickets key',
      async () => ((await dropStoredTicketKey(db)) ? 'deleted the login tickets key kept in the database' : undefined),
    ],
    [
      'access-token signing keys',
      async () => {
        const n = await resealSigningKeys(db, ring);
        return n > 0 ? `sealed ${n} access-token signing key(s) under FACTOR_ENCRYPTION_KEY` : undefined;
      },
    ],
  ];
  for (const [what, step] of steps) {
    try {
      const done = await step();
      if (done !== undefined) logger.info(done);
    } catch (error) {
      logger.warn(
        { err: describeError(error) },
        `sealing ${what} kept in the clear failed; the next start tries again`,
      );
    }
  }
}

/** The keys of second-factor secrets (factors/key-file.ts); a key file that cannot be used stops the start. */
function factorKeysOf(config: Config, database: Database, logger: Logger): KeyRing | undefined {
  try {
    return factorKeysFor(config, database.kind, (m) => logger.warn(m));
  } catch (error) {
    if (error instanceof FactorKeyFileError) throw new StartError(error.message);
    throw error;
  }
}

/** The whole service from its configuration: logger, tracing (when configured), database, dependencies, app. */
export async function assemble(
  config: Config,
  options: AssembleOptions & { logDestination?: DestinationStream } = {},
): Promise<Service> {
  const logger = await createLogger(config, options.logDestination);
  // Decided here, once: without an OTLP endpoint the SDK is never loaded and nothing is traced.
  const tracing = config.tracing === undefined ? undefined : await startTracing(config.tracing);
  let opened: Awaited<ReturnType<typeof openDatabase>>;
  try {
    opened = await openDatabase(config, tracing?.tracer);
  } catch (error) {
    await tracing?.shutdown().catch(() => {});
    throw error;
  }
  const { database, unlock } = opened;
  try {
    const { closeDeps, ...service } = await assembleOn(config, database, logger, tracing?.tracer, options);
    return {
      ...service,
      async close() {
        await closeDeps();
        await database.close();
        unlock();
        await tracing?.shutdown();
      },
    };
  } catch (error) {
    await database.close().catch(() => {});
    unlock();
    await tracing?.shutdown().catch(() => {});
    throw error;
  }
}
