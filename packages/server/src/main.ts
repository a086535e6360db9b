// The only module with side effects: env → service (assemble.ts) → serve → shutdown.
import type { Server } from 'node:http';
import { type AddressInfo, createServer } from 'node:net';
import { assemble, type Service, StartError } from './assemble.ts';
import { type Config, ConfigError, loadConfig, sizeThreadPool } from './config/env.ts';
import { startWebhookWorker } from './events/webhooks/worker.ts';
import { serveApp } from './http/serve.ts';
import { serveAdminSocket } from './ops/admin-socket.ts';
import { startHousekeeping } from './ops/housekeeping.ts';
import { VERSION } from './version.ts';

const SHUTDOWN_GRACE_MS = 10_000;

function fail(message: string): never {
  process.stderr.write(`user-accounts: ${message}\n`);
  process.exit(1);
}

/**
 * Why the server could not listen on host:port right now (EADDRINUSE, EACCES…), or undefined. Asked
 * before anything else, so that a start that cannot serve neither creates ./data nor mints a token.
 */
function portRefused(port: number, host: string): Promise<string | undefined> {
  if (port === 0) return Promise.resolve(undefined);
  return new Promise((resolve) => {
    const probe = createServer();
    probe.once('error', (error: NodeJS.ErrnoException) => resolve(error.code ?? error.message));
    probe.listen({ port, host, exclusive: true }, () => probe.close(() => resolve(undefined)));
  });
}

/** `outbox: false` only for the benchmark (packages/bench), to measure what change events cost a write. */
export async function main(options: { outbox?: boolean } = {}): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) fail(error.message);
    throw error;
  }
  sizeThreadPool(config);
  const refused = await portRefused(config.port, config.host);
  if (refused === 'EADDRINUSE') {
    fail(`port ${config.port} on ${config.host} is in use: stop what holds it, or start with another PORT`);
  }
  if (refused !== undefined)
    fail(`cannot listen on port ${config.port} on ${config.host} (${refused}): set PORT or HOST`);
  let service: Service;
  try {
    service = await assemble(config, options);
  } catch (error) {
    if (error instanceof StartError) fail(error.message);
    fail(`cannot open the database: ${error instanceof Error ? error.message : String(error)}`);
  }
  const { app, deps, database, devToken } = service;
  const { logger, tokens } = deps;
  if (devToken !== undefined) {
    // Printed once, on stderr, outside the logs: logs never carry a token.
    process.stderr.write(
      devToken.minted
        ? `\nA development API token was minted. It is shown once and kept in ${devToken.file}:\n\n  ${devToken.token}\n\n`
        : `\nUsing the development API token kept in ${devToken.file}\n\n`,
    );
  }

  const housekeeping = startHousekeeping(database.db, tokens, logger, {
    eventsRetentionMs: config.eventsRetentionMs,
    auditRetentionMs: config.auditRetentionMs,
    writes: {
      db: database.db,
      outbox: deps.outbox,
      tracing: deps.tracer !== undefined,
      sequencer: deps.sequencer,
      accountHooks: deps.accountHooks,
    },
  });
  const webhooks = startWebhookWorker({
    db: database.db,
    logger,
    wake: deps.wake,
    allowPrivate: config.webhookAllowPrivate,
    perEndpoint: config.webhookEndpointConcurrency,
    timeoutMs: config.webhookTimeoutMs,
    metrics: deps.metrics?.collector,
    tracer: deps.tracer,
    factorKeys: deps.factorKeys,
  });
  let listening: string | undefined;
  // The CLI cannot open the embedded database while we hold it: it sends its commands to us.
  const adminSocket =
    database.kind === 'pglite'
      ? serveAdminSocket(config.dataDir, database.db, logger, {
          webhookAllowPrivate: config.webhookAllowPrivate,
          factorKeys: deps.factorKeys,
          signingKeysChanged: async () => deps.accessTokens.refresh?.(),
          // `cli console`'s link: the address this server listens on (its PORT, not the CLI's).
          consoleUrl: () => listening,
        })
      : undefined;
  const lifecycle = deps.lifecycle!;
  const server = serveApp(
    app,
    { port: config.port, hostname: config.host, draining: () => lifecycle.draining },
    (info: AddressInfo) => {
      const host = ['0.0.0.0', '::', ''].includes(info.address) ? '127.0.0.1' : info.address;
      listening = `http://${host.includes(':') ? `[${host}]` : host}:${info.port}`;
      logger.info(
        {
          address: info.address,
          port: info.port,
          version: VERSION,
          database: database.kind,
          dataDir: database.kind === 'pglite' ? config.dataDir : undefined,
        },
        `listening on http://${info.address}:${info.port}`,
      );
    },
  );
  server.on('error', (error: Error) => {
    logger.fatal({ err: { message: error.message, code: (error as { code?: string }).code } }, 'cannot listen');
    void service.close().finally(() => process.exit(1));
  });

  let stopping = false;
  const shutdown = (signal: string) => {
    if (stopping) return;
    stopping = true;
    lifecycle.draining = true;
    if (config.shutdownDrainMs > 0) {
      logger.info({ signal, drainMs: config.shutdownDrainMs }, 'draining: /readyz answers 503, still serving');
    }
    setTimeout(() => close(signal), config.shutdownDrainMs);
  };
  const close = (signal: string) => {
    logger.info({ signal }, 'shutting down: no new connections, finishing requests in flight');
    const force = setTimeout(() => {
      logger.warn('requests still in flight after the grace period; closing anyway');
      (server as Server).closeAllConnections();
    }, SHUTDOWN_GRACE_MS);
    force.unref();
    server.close(async () => {
      clearTimeout(force);
      adminSocket?.close();
      await webhooks.stop();
      await housekeeping.stop();
      await service.close().catch((error: unknown) => logger.error({ err: String(error) }, 'closing the database'));
      logger.info('stopped');
      process.exit(0);
    });
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
}

// Imported (by the benchmark's entry), it waits to be called.
if (import.meta.main) await main();
