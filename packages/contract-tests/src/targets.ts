// The places the one contract suite runs against: the real server (PGlite, PostgreSQL, and PGlite
// with CORS and tracing on) and Prism.
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { MOCK_TOKEN, startMock, startPrism } from '@user-accounts/mock';
import { assemble, assembleOn, createLogger, type Service } from '@user-accounts/server/assemble';
import type { Database } from '@user-accounts/server/db';
import { loadConfig } from '@user-accounts/server/env';
import type { AppDeps } from '@user-accounts/server/http/context';
import { serveApp } from '@user-accounts/server/serve';
import {
  copyMigratedPglite,
  freshPostgresDatabase,
  migratedPostgresDatabase,
} from '@user-accounts/server/testing/templates';

export { freshPostgresDatabase, migratedPostgresDatabase };

import { createToken, type NewToken, revokeToken } from '@user-accounts/server/tokens';
import postgres from 'postgres';

export const TEST_TOKEN = 'ua_contract_tests_token_0123456789abcdef';
/** FACTOR_ENCRYPTION_KEY of the PostgreSQL targets (32 bytes of 0x01). */
export const TEST_FACTOR_KEY = `test:${Buffer.alloc(32, 1).toString('base64')}`;

export interface Target {
  baseUrl: string;
  token: string;
  /** Runs SQL on the target's database (server targets only). */
  sql(query: string, params?: unknown[]): Promise<Record<string, unknown>[]>;
  /** Every log line the server wrote (server targets only). */
  logs: string[];
  /** Stops the server and the database and starts both again on the same data (with these variables changed). */
  restart(options?: ServerOptions): Promise<void>;
  /** Stores a new token, as the operator CLI does (server targets only). */
  createToken(spec: Partial<NewToken>): Promise<{ id: string; token: string }>;
  revokeToken(id: string): Promise<void>;
  /** Writes the tokens' last-used times now rather than at the next periodic flush. */
  flushLastUsed(): Promise<void>;
  /**
   * Holds the next password hash the server starts (server targets only): the request that
   * hashes waits there, at a known point, until `release()`; `reached` resolves once it waits.
   */
  holdNextHash(): HeldHash;
  /**
   * Holds the request that next calls this method of the service's dependencies (server targets
   * only), once that call has answered: a login whose password was just checked
   * (`'hasher', 'verify'`), a second factor just accepted (`'lockout', 'clear'`). It waits there
   * with the answer until `release()`; `reached` resolves once it waits. Later calls run as usual.
   */
  holdAfterNext<D extends HeldDependency>(dependency: D, method: keyof AppDeps[D] & string): HeldHash;
  /**
   * Holds the next write transaction a request starts (server targets only): the request waits
   * before its transaction begins, so past its Idempotency-Key's claim and holding no connection
   * (PGlite has one), until `release()`; `reached` resolves once it waits. For a write that hashes
   * no password (org/create); holdNextHash is the point of those that do.
   */
  holdNextWrite(): HeldHash;
  /** The running service's dependencies (server targets only): what a test reaches under HTTP (its signer). */
  deps?(): AppDeps;
  close(): Promise<void>;
}

/** The dependencies holdAfterNext can hold a request at. */
export type HeldDependency = 'hasher' | 'lockout';

export interface HeldHash {
  reached: Promise<void>;
  release(): void;
}

/**
 * Holds the next call of `method` of one of the service's deps (which each request reads), before
 * it runs or once it has answered, until `release()`: a stand-in there takes the call, puts the
 * real one back (later calls run as usual) and waits. The rest of the stand-in (a hasher's live
 * `load` too) is the real one's, through the prototype.
 */
function holdCall(deps: AppDeps, dependency: HeldDependency, method: string, when: 'before' | 'after'): HeldHash {
  const real = deps[dependency];
  const original = (real as unknown as Record<string, (...args: unknown[]) => Promise<unknown>>)[method]!;
  const reached = Promise.withResolvers<void>();
  const released = Promise.withResolvers<void>();
  let taken = false;
  const standIn = Object.assign(Object.create(real) as object, {
    async [method](...args: unknown[]) {
      // A caller that took the stand-in before it was put back runs as usual.
      if (taken) return original.apply(real, args);
      taken = true;
      deps[dependency] = real as never;
      const answer = when === 'after' ? await original.apply(real, args) : undefined;
      reached.resolve();
      await released.promise;
      return when === 'after' ? answer : original.apply(real, args);
    },
  });
  deps[dependency] = standIn as never;
  return { reached: reached.promise, release: () => released.resolve() };
}

export interface TargetSpec {
  name: string;
  /** A real server with a database: state, SQL access, logs. Prism is stateless. */
  stateful: boolean;
  /**
   * False when something between the tests and the server rewrites or refuses some requests
   * (prism proxy hangs on a body that is not JSON, answers oversized headers itself, drops a
   * `__proto__` parameter): the raw-HTTP edge cases are then left to the direct targets.
   */
  transparent?: boolean;
  /**
   * Sent as `Origin` on every request the harness makes (unless the request names its own), as
   * a browser's page on that origin would: a target whose server lists it in CORS_ORIGINS.
   */
  origin?: string;
  /** Why the target cannot run here, when it cannot; the suite then says so and skips. */
  skip?: string | undefined;
  start(): Promise<Target>;
}

/**
 * Budgets large enough never to get in the suite's way, so that every response carries the headers;
 * the suite's many deliberate 401s all come from one address.
 */
export const GENEROUS_LIMITS = {
  RATE_LIMIT: '1000000/60s',
  RATE_LIMIT_HASH: '100000/60s',
  AUTH_FAILURE_LIMIT: '1000000/60s',
};

/**
 * Every test server hashes at the test profile's cost (PASSWORD_HASH_PROFILE=test: argon2id at
 * m=1024,t=1 rather than m=19456,t=2): the suites' hundreds of creates and verifies then cost
 * about 0.5 ms each rather than 25–80 ms. A test whose subject is a hash's cost or timing (the
 * fair lane, noisy neighbours, verify's timing, the rehash) spreads PRODUCTION_HASHES into its env.
 */
export const TEST_HASHES = { PASSWORD_HASH_PROFILE: 'test' };
/** What a new hash of a test server looks like: argon2id at the test profile's cost (TEST_PASSWORD_HASH). */
export const TEST_HASH_FORMAT = /^\$argon2id\$v=19\$m=1024,t=1,p=1\$/;
/** Production's password hashes (OWASP's baseline), for the tests that measure them. */
export const PRODUCTION_HASHES = { PASSWORD_HASH_PROFILE: 'owasp' };

/**
 * How a test server differs from the defaults, as an operator would say it: environment
 * variables (RATE_LIMIT, HASH_CONCURRENCY, …), read by the server's own loadConfig.
 */
export interface ServerOptions {
  env?: Record<string, string>;
}

/** Turns on the suite's server targets' GET /metrics: a test reads them as an operator's Prometheus would. */
export const TEST_METRICS_TOKEN = 'metrics_token_for_the_contract_targets_0123';

type Where = { DATA_DIR: string } | { DATABASE_URL: string } | { database: Database };

/**
 * The service as main.ts assembles it (assemble.ts), from environment variables, on a port of its
 * own. `where` is the embedded database's folder, a PostgreSQL URL, or (for fault tests) a
 * database opened by the test.
 */
async function listen(where: Where, logs: string[], options: ServerOptions) {
  const config = loadConfig({
    API_TOKENS: TEST_TOKEN,
    LOG_LEVEL: 'info',
    LOG_FORMAT: 'json',
    ...GENEROUS_LIMITS,
    ...TEST_HASHES,
    ...('database' in where ? {} : where),
    ...options.env,
  });
  const logDestination = { write: (line: string) => void logs.push(line) };
  let service: Pick<Service, 'app' | 'deps' | 'database' | 'close'>;
  if ('database' in where) {
    const logger = await createLogger(config, logDestination);
    const { closeDeps, ...rest } = await assembleOn(config, where.database, logger);
    service = {
      ...rest,
      async close() {
        await closeDeps();
        await where.database.close();
      },
    };
  } else {
    service = await assemble(config, { logDestination });
  }
  const server = await new Promise<Server>((resolve) => {
    const s = serveApp(service.app, { port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  const { port } = server.address() as AddressInfo;
  return { server, service, baseUrl: `http://127.0.0.1:${port}` };
}

const stop = (server: Server) => new Promise<void>((resolve) => server.close(() => resolve()));

export async function serverTarget(
  where: Where,
  cleanup: () => Promise<void>,
  options: ServerOptions = {},
): Promise<Target> {
  const logs: string[] = [];
  let running: Awaited<ReturnType<typeof listen>>;
  try {
    running = await listen(where, logs, options);
  } catch (error) {
    await cleanup();
    throw error;
  }
  const db = () => running.service.database.db;
  const target: Target = {
    baseUrl: running.baseUrl,
    token: TEST_TOKEN,
    logs,
    async sql(query, params = []) {
      return [...(await running.service.database.sql.unsafe(query, params as never[]))];
    },
    async restart(changed) {
      options = { env: { ...options.env, ...changed?.env } };
      running.server.closeAllConnections();
      await stop(running.server);
      await running.service.close();
      running = await listen(where, logs, options);
      target.baseUrl = running.baseUrl;
    },
    async createToken(spec) {
      return createToken(db(), { site: 'default', scopes: ['read', 'write'], label: 'contract test', ...spec });
    },
    async revokeToken(id) {
      await revokeToken(db(), id);
    },
    flushLastUsed: () => running.service.deps.tokens.flushLastUsed(),
    deps: () => running.service.deps,
    holdNextHash: () => holdCall(running.service.deps, 'hasher', 'hash', 'before'),
    holdAfterNext: (dependency, method) => holdCall(running.service.deps, dependency, method, 'after'),
    holdNextWrite() {
      // A request reads its database from the service's deps: a stand-in there whose db holds the
      // next transaction puts the real database back, waits to be released, then runs it.
      const deps = running.service.deps;
      const database = deps.database;
      const { db } = database;
      const reached = Promise.withResolvers<void>();
      const released = Promise.withResolvers<void>();
      const forward = <T extends object>(real: T, own: Record<string, unknown>) =>
        new Proxy(real, {
          get(inner, name) {
            if (typeof name === 'string' && Object.hasOwn(own, name)) return own[name];
            const value = Reflect.get(inner, name);
            return typeof value === 'function' ? value.bind(inner) : value;
          },
        });
      const heldDb = forward(db, {
        async transaction(...args: Parameters<typeof db.transaction>) {
          deps.database = database;
          reached.resolve();
          await released.promise;
          return db.transaction(...args);
        },
      });
      deps.database = forward(database, { db: heldDb });
      return { reached: reached.promise, release: () => released.resolve() };
    },
    async close() {
      running.server.closeAllConnections();
      await stop(running.server);
      await running.service.close();
      await cleanup();
    },
  };
  return target;
}

/**
 * A server on a new embedded database in a temporary folder, removed on close: a copy of this
 * run's migrated template (testing/templates.ts), so the server finds every migration applied.
 */
export async function embeddedServer(options: ServerOptions = {}): Promise<Target> {
  const dir = mkdtempSync(join(tmpdir(), 'ua-contract-'));
  await copyMigratedPglite(dir);
  return serverTarget({ DATA_DIR: dir }, async () => rmSync(dir, { recursive: true, force: true }), options);
}

export const pgliteTarget: TargetSpec = {
  name: 'server on embedded PGlite',
  stateful: true,
  start: () => embeddedServer({ env: { METRICS_TOKEN: TEST_METRICS_TOKEN } }),
};

/** The origin the configured target's CORS_ORIGINS lists, and its harness sends on every request. */
export const CONFIGURED_ORIGIN = 'https://shop.example';

/**
 * The server on the embedded database with what an operator may turn on and the other targets
 * leave off (issue 58): CORS for a listed origin, which every request of the suite then comes
 * from, and OpenTelemetry traces exported to `collector` (its endpoint read at each start; the
 * SDK's other variables from process.env: otlp-receiver.ts). Each server it starts is pushed on
 * `started`, whose logs outlive its close.
 */
export function configuredTarget(collector: { readonly endpoint: string }, started: Target[] = []): TargetSpec {
  return {
    name: 'server on embedded PGlite with CORS and tracing on',
    stateful: true,
    origin: CONFIGURED_ORIGIN,
    async start() {
      const target = await embeddedServer({
        env: {
          METRICS_TOKEN: TEST_METRICS_TOKEN,
          CORS_ORIGINS: `https://other.example,${CONFIGURED_ORIGIN}`,
          OTEL_EXPORTER_OTLP_ENDPOINT: collector.endpoint,
        },
      });
      started.push(target);
      return target;
    },
  };
}

/** Why PostgreSQL tests cannot run here, or undefined when TEST_DATABASE_URL answers. */
export async function postgresUnavailable(): Promise<string | undefined> {
  const url = process.env.TEST_DATABASE_URL;
  if (!url) return 'TEST_DATABASE_URL is not set';
  const admin = postgres(url, { max: 1, connect_timeout: 3, onnotice: () => {} });
  try {
    await admin`select 1`;
    return undefined;
  } catch (error) {
    return `no PostgreSQL answers at TEST_DATABASE_URL (${(error as Error).message})`;
  } finally {
    await admin.end({ timeout: 1 }).catch(() => {});
  }
}

/** A migrated database on the PostgreSQL of TEST_DATABASE_URL, dropped afterwards. */
export async function postgresTarget(options: ServerOptions = {}): Promise<TargetSpec> {
  const base: Omit<TargetSpec, 'start'> = { name: 'server on PostgreSQL', stateful: true };
  const skip = await postgresUnavailable();
  if (skip !== undefined) return { ...base, skip, start: unreachable };
  return {
    ...base,
    async start() {
      const database = await migratedPostgresDatabase();
      // As an operator deploys it: PostgreSQL's servers share their key of second-factor secrets.
      return serverTarget({ DATABASE_URL: database.url }, database.drop, {
        env: { FACTOR_ENCRYPTION_KEY: TEST_FACTOR_KEY, METRICS_TOKEN: TEST_METRICS_TOKEN, ...options.env },
      });
    },
  };
}

async function unreachable(): Promise<Target> {
  throw new Error('target skipped');
}

async function freePort(): Promise<number> {
  return new Promise((resolve) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as AddressInfo;
      probe.close(() => resolve(port));
    });
  });
}

const SPEC_PATH = fileURLToPath(new URL('../../../spec/openapi.yaml', import.meta.url));

/** The mock, as integrators run it with `pnpm mock`: Prism behind the server's own gate. */
export function mockTarget(options: { corsOrigins?: string[] } = {}): TargetSpec {
  return {
    name: 'Prism mock of the spec',
    stateful: false,
    async start() {
      const mock = await startMock({ host: '127.0.0.1', port: 0, tokens: [MOCK_TOKEN], ...options });
      return {
        baseUrl: mock.baseUrl,
        token: MOCK_TOKEN,
        logs: [],
        sql: async () => {
          throw new Error('the mock has no database');
        },
        restart: async () => {},
        createToken: async () => {
          throw new Error('the mock has no tokens');
        },
        revokeToken: async () => {},
        flushLastUsed: async () => {},
        holdNextHash: () => {
          throw new Error('the mock hashes nothing');
        },
        holdAfterNext: () => {
          throw new Error('the mock has no dependencies to hold');
        },
        holdNextWrite: () => {
          throw new Error('the mock writes nothing');
        },
        close: () => mock.close(),
      };
    },
  };
}

export const prismTarget: TargetSpec = mockTarget();

/**
 * The real server (embedded database) behind `prism proxy`, which checks every answer against the
 * spec and reports what breaks it in an `sl-violations` header (the harness fails on any response
 * violation). Not `--errors`: that would answer the suite's deliberately invalid requests with
 * Prism's own 422 instead of forwarding them, and the server's answers to those are what we check.
 */
export const proxiedTarget: TargetSpec = {
  name: 'server on embedded PGlite behind prism proxy',
  stateful: true,
  transparent: false,
  async start() {
    const inner = await embeddedServer();
    let port = await freePort();
    // The port was free when probed; another test file can take it before Prism binds it (files
    // run side by side): then try another.
    const proxy = async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          return await startPrism(['proxy', SPEC_PATH, inner.baseUrl, '--host', '127.0.0.1', '--port', String(port)]);
        } catch (error) {
          if (attempt >= 5 || !String(error).includes('EADDRINUSE')) throw error;
          port = await freePort();
        }
      }
    };
    let child = await proxy();
    const target: Target = {
      ...inner,
      baseUrl: `http://127.0.0.1:${port}`,
      sql: (query, params) => inner.sql(query, params),
      createToken: (spec) => inner.createToken(spec),
      revokeToken: (id) => inner.revokeToken(id),
      flushLastUsed: () => inner.flushLastUsed(),
      holdNextHash: () => inner.holdNextHash(),
      holdAfterNext: (dependency, method) => inner.holdAfterNext(dependency, method),
      holdNextWrite: () => inner.holdNextWrite(),
      get logs() {
        return inner.logs;
      },
      async restart() {
        child.kill('SIGTERM');
        await inner.restart();
        child = await proxy();
        target.baseUrl = `http://127.0.0.1:${port}`;
      },
      async close() {
        child.kill('SIGTERM');
        await inner.close();
      },
    };
    return target;
  },
};
