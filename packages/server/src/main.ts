// The only module with side effects: env → database → migrations → token → serve → shutdown.
import { mkdirSync } from 'node:fs';
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { pino } from 'pino';
import { serveAdminSocket } from './admin/socket.ts';
import { createApp } from './app.ts';
import { openPglite, openPostgres, type Database } from './db/client.ts';
import { ConfigError, loadConfig, type Config } from './env.ts';
import { lockDataDir } from './data-dir-lock.ts';
import { startHousekeeping } from './housekeeping.ts';
import { createPasswordHasher } from './passwords.ts';
import { serveApp } from './serve.ts';
import { createMetrics } from './metrics.ts';
import { createRateLimiter, databaseCounters, redisCounters } from './rate-limit.ts';
import { createTokenVerifier, ensureDevToken } from './tokens.ts';

const SHUTDOWN_GRACE_MS = 10_000;

function fail(message: string): never {
  process.stderr.write(`user-accounts: ${message}\n`);
  process.exit(1);
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message);
    throw error;
  }
  if (config.databaseUrl !== undefined && config.apiTokens.length === 0) {
    fail(
      'API_TOKENS is required when DATABASE_URL is set: give one or more comma-separated tokens ' +
        '(e.g. API_TOKENS=ua_$(openssl rand -base64 32 | tr -d "/+=")).',
    );
  }
  const options = {
    level: config.logLevel,
    base: { service: 'user-accounts' },
    redact: { paths: ['password', '*.password', 'token', '*.token', 'authorization', '*.authorization'], censor: '[redacted]' },
  };
  // JSON lines for machines; readable lines for a person at a terminal.
  const pretty = config.logFormat === 'pretty' || (config.logFormat === undefined && process.stdout.isTTY === true);
  const logger = pretty
    ? pino(options, (await import('pino-pretty')).default({ colorize: process.stdout.isTTY === true, sync: true, ignore: 'service' }))
    : pino(options);

  let unlock = () => {};
  let database: Database;
  try {
    if (config.databaseUrl !== undefined) {
      database = await openPostgres(config.databaseUrl, { statementTimeoutMs: config.requestTimeoutMs });
    } else {
      mkdirSync(config.dataDir, { recursive: true, mode: 0o700 });
      unlock = lockDataDir(config.dataDir);
      database = await openPglite(config.dataDir);
    }
    await database.migrate();
  } catch (error) {
    unlock();
    fail(`cannot open the database: ${error instanceof Error ? error.message : String(error)}`);
  }

  if (config.databaseUrl === undefined && config.apiTokens.length === 0) {
    const dev = await ensureDevToken(database.db, config.dataDir);
    // Printed once, on stderr, outside the logs: logs never carry a token.
    process.stderr.write(
      dev.minted
        ? `\nA development API token was minted. It is shown once and kept in ${dev.file}:\n\n  ${dev.token}\n\n`
        : `\nUsing the development API token kept in ${dev.file}\n\n`,
    );
  }

  const tokens = createTokenVerifier(database.db, config.apiTokens);
  const counters = databaseCounters(database.db);
  const limiter = createRateLimiter(
    config.rateLimits,
    config.redisUrl === undefined ? counters : redisCounters(config.redisUrl, counters, logger),
  );
  const housekeeping = startHousekeeping(database.db, tokens, logger);
  // The CLI cannot open the embedded database while we hold it: it sends its commands to us.
  const adminSocket = database.kind === 'pglite' ? serveAdminSocket(config.dataDir, database.db, logger) : undefined;
  let hasher: ReturnType<typeof createPasswordHasher> | undefined;
  const metrics =
    config.metricsToken === undefined
      ? undefined
      : { token: config.metricsToken, collector: createMetrics({ database, hasher: () => hasher, poolSize: database.kind === 'postgres' ? 10 : 1 }) };
  hasher = createPasswordHasher({ concurrency: config.hashConcurrency, maxWaiting: config.hashQueue, onHashed: metrics?.collector.observeHash });
  const app = createApp({
    database,
    tokens,
    hasher,
    metrics,
    limiter,
    logger,
    requestTimeoutMs: config.requestTimeoutMs,
    corsOrigins: config.corsOrigins,
  });
  const server = serveApp(app, { port: config.port, hostname: config.host }, (info: AddressInfo) => {
    logger.info(
      { address: info.address, port: info.port, database: database.kind, dataDir: database.kind === 'pglite' ? config.dataDir : undefined },
      `listening on http://${info.address}:${info.port}`,
    );
  });
  server.on('error', (error: Error) => {
    logger.fatal({ err: { message: error.message, code: (error as { code?: string }).code } }, 'cannot listen');
    void database.close().finally(() => {
      unlock();
      process.exit(1);
    });
  });

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: no new connections, finishing requests in flight');
    const force = setTimeout(() => {
      logger.warn('requests still in flight after the grace period; closing anyway');
      (server as Server).closeAllConnections();
    }, SHUTDOWN_GRACE_MS);
    force.unref();
    server.close(async () => {
      clearTimeout(force);
      adminSocket?.close();
      await housekeeping.stop();
      await limiter.close();
      await database.close().catch((error: unknown) => logger.error({ err: String(error) }, 'closing the database'));
      unlock();
      logger.info('stopped');
      process.exit(0);
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

await main();
