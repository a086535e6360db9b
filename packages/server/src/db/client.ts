import { chmodSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Tracer } from '@opentelemetry/api';
import { type SQL, sql } from 'drizzle-orm';
import type { PostgresJsDatabase } from 'drizzle-orm/postgres-js';
import type { Options, Sql } from 'postgres';
import { MIGRATIONS_DIR as MIGRATIONS } from '../resources.ts';
import { onEveryClient } from './every-client.ts';
import { type ChannelHandlers, type Listening, listenPostgres, sharedListeners } from './listen.ts';
import { schema } from './schema.ts';
import { tracePostgres } from './traced.ts';
import { upgrade } from './upgrade.ts';

export type Db = PostgresJsDatabase<typeof schema>;

/** What a migrate() did: the migrations it applied, and those the database had before. */
export interface Migrated {
  applied: number;
  already: number;
}

export interface Database {
  db: Db;
  /** The postgres.js client under db: for SQL text (tests, the contract suite's harness). */
  sql: Sql;
  /** pglite: the embedded database (openPglite); postgres: a PostgreSQL server. */
  kind: 'pglite' | 'postgres';
  /** Applies the committed drizzle-kit migrations; safe to run on every start. */
  migrate(): Promise<Migrated>;
  /** Resolves when the database answers a query. */
  ping(): Promise<void>;
  /** LISTENs on `channel` for as long as the database is open (see listen.ts). */
  listen(channel: string, handlers: ChannelHandlers): Promise<Listening>;
  close(): Promise<void>;
}

/** Statements that start with it run as named prepared statements (executePrepared). */
const PREPARED = '/* prepared */ ';

/**
 * Runs `query` as a named prepared statement: parsed and planned once per connection, where
 * drizzle's execute() sends every query unnamed, parsed and planned anew. For a hot statement of
 * fixed text only (postgres.js keeps each text's statement for the connection's life): the
 * outbox's INSERT, parsed anew, cost a write more database time than the write's own statements
 * (`./pnpmw bench --only events`). Works in a transaction too: the client of each (see open).
 */
export async function executePrepared(db: Db, query: SQL): Promise<void> {
  await db.execute(sql`${sql.raw(PREPARED)}${query}`);
}

/** The rows of `query`, run as a named prepared statement (see executePrepared): for a hot read of fixed text. */
export async function rowsPrepared<T extends Record<string, unknown>>(db: Db, query: SQL): Promise<T[]> {
  return (await db.execute<T>(sql`${sql.raw(PREPARED)}${query}`)) as unknown as T[];
}

/** postgres.js's `unsafe` (drizzle's every query) with `prepare` on for the statements marked PREPARED. */
function prepareMarked(client: { unsafe: Sql['unsafe'] }): void {
  const unsafe = client.unsafe;
  client.unsafe = function preparedUnsafe(this: unknown, text: string, params?: unknown[], options?: object) {
    if (!text.startsWith(PREPARED)) return unsafe.call(this, text, params as never, options);
    return unsafe.call(this, text, params as never, { ...options, prepare: true });
  } as Sql['unsafe'];
}

/**
 * How long a server's statement waits on a lock at most (its lock_timeout): long enough for the
 * few writes of one row at once that the site's share of the pool lets in (limits/transactions.ts),
 * short enough that a queue on one lock ends in a 409 rather than in every connection held.
 */
export const LOCK_TIMEOUT_MS = 1_000;

/** The advisory lock key of migrations: any constant the deployment's other users do not take. */
export const MIGRATION_LOCK = 0x75_73_65_72; // "user"

/** The rows a query answers (postgres.js's RowList is an array of them). */
export async function rows<T extends Record<string, unknown>>(db: Db, query: SQL): Promise<T[]> {
  return (await db.execute<T>(query)) as unknown as T[];
}

/** The migrations drizzle recorded as applied: none before the first, which creates its table. */
export async function countMigrations(db: Db): Promise<number> {
  const [table] = await rows<{ name: string | null }>(
    db,
    sql`select to_regclass('drizzle.__drizzle_migrations')::text as name`,
  );
  if (table?.name == null) return 0;
  const [count] = await rows<{ n: number }>(db, sql`select count(*)::int as n from drizzle.__drizzle_migrations`);
  return count!.n;
}

/** Runs `apply` and says what it did; exact only while no one else migrates (hence the lock on PostgreSQL). */
async function counted(db: Db, apply: () => Promise<void>): Promise<Migrated> {
  const already = await countMigrations(db);
  await apply();
  return { applied: (await countMigrations(db)) - already, already };
}

/** The embedded database behind its socket (openPglite): one session, which the one connection holds. */
interface Embedded {
  path: string;
  close(): Promise<void>;
}

export async function openPostgres(
  url: string,
  options: {
    max?: number;
    statementTimeoutMs?: number;
    /** How long a statement waits on a lock (another write's row, an advisory lock); absent: as long as it runs. */
    lockTimeoutMs?: number;
    listenUrl?: string;
    tracer?: Tracer;
    embedded?: Embedded;
  } = {},
): Promise<Database> {
  const { default: postgres } = await import('postgres');
  const { drizzle } = await import('drizzle-orm/postgres-js');
  const { migrate } = await import('drizzle-orm/postgres-js/migrator');
  const { embedded } = options;
  const shared = embedded === undefined ? undefined : sharedListeners();
  const client = postgres(url, {
    max: embedded === undefined ? (options.max ?? 10) : 1,
    // The default pipelining (100) degrades under sustained load (see stack notes); 0 would
    // avoid it but broke every sql.begin() in postgres.js 3.4.9 (UNSAFE_TRANSACTION; patched since, see
    // db/client.integration.test.ts), so 1.
    max_pipeline: 1,
    connect_timeout: 5,
    // The default backoff grows to 20 s after a few failed reconnects, so service came back up to
    // 20 s after PostgreSQL did (fault tests); at most 1 s between attempts keeps that under 5 s.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
    idle_timeout: embedded === undefined ? 60 : 0,
    onnotice: () => {},
    // No statement outlives the request it serves (see the deadline middleware).
    connection: {
      application_name: 'user-accounts',
      statement_timeout: options.statementTimeoutMs ?? 10_000,
      // A write queued on another's lock holds its connection all the while: it gives up (55P03,
      // answered 409 `conflict`) rather than hold it for the queue's length (issue 57, G1).
      ...(options.lockTimeoutMs === undefined ? {} : { lock_timeout: options.lockTimeoutMs }),
    },
    ...(embedded === undefined ? {} : { path: embedded.path, onnotify: shared!.onnotify }),
  } as Options<Record<string, never>>);
  onEveryClient(client, prepareMarked);
  // Every query goes through this client: traced here, once, when tracing is on.
  if (options.tracer !== undefined) tracePostgres(client, options.tracer);
  const db = drizzle(client, { schema });
  const listeners = new Set<Promise<Listening>>();
  const track = (listening: Promise<Listening>) => {
    listeners.add(listening);
    return listening;
  };
  return {
    db,
    sql: client,
    kind: embedded === undefined ? 'postgres' : 'pglite',
    async migrate() {
      const apply = (on: Sql) => {
        const migrating = drizzle(on, { schema });
        return counted(migrating, () =>
          upgrade(migrating, () => migrate(drizzle(on), { migrationsFolder: MIGRATIONS })),
        );
      };
      // Embedded: one process at a time (the data folder's lock), and one connection.
      if (embedded !== undefined) return apply(client);
      // drizzle's migrator takes no lock: two servers (or a deploy step and a server) starting on
      // an empty database raced to CREATE TABLE and one failed. A session-level advisory lock
      // makes them take turns; the second finds every migration applied.
      // The lock has a connection of its own: the pool may have only one (the CLI's). It goes
      // where the listeners go (DATABASE_LISTEN_URL, PostgreSQL itself): behind a transaction-mode
      // pooler, a session lock would stay with a server connection the pooler hands to others.
      const session = postgres(options.listenUrl ?? url, { max: 1, connect_timeout: 5, onnotice: () => {} });
      // The migrations on a connection of their own, without the pool's lock_timeout: an ALTER
      // may wait for other servers' transactions on the table to end.
      const migrator = postgres(url, { max: 1, max_pipeline: 1, connect_timeout: 5, onnotice: () => {} } as Options<
        Record<string, never>
      >);
      try {
        await session`select pg_advisory_lock(${MIGRATION_LOCK})`;
        return await apply(migrator);
      } finally {
        await migrator.end({ timeout: 5 });
        await session.end({ timeout: 5 }); // ending the session releases its lock
      }
    },
    async ping() {
      await db.execute(sql`select 1`);
    },
    listen: (channel, handlers) =>
      track(
        shared === undefined
          ? listenPostgres(options.listenUrl ?? url, channel, handlers)
          : shared.listen(client, channel, handlers),
      ),
    async close() {
      await Promise.all([...listeners].map(async (l) => (await l).close()));
      await client.end({ timeout: 5 });
      await embedded?.close();
    },
  };
}

/**
 * The embedded database: PostgreSQL compiled to WASM, kept in `dataDir/pgdata` (in memory without
 * one), served in this process on a unix socket that postgres.js connects to, so that the server
 * speaks to it as to PostgreSQL. PGlite has a single session: pglite-socket hands it to
 * connections message by message, so two connections interleave their statements (measured:
 * "portal does not exist", wrong rows, UNSAFE_TRANSACTION) and one is allowed. PGlite asks no
 * password, so the socket is in a folder only this user may enter, whatever the umask made the
 * socket: `dataDir/db` (0700; the data folder itself may be 0755), or mkdtemp's for one in memory.
 */
export async function openPglite(dataDir: string | undefined, options: { tracer?: Tracer } = {}): Promise<Database> {
  const { PGlite } = await import('@electric-sql/pglite');
  const { PGLiteSocketServer } = await import('@electric-sql/pglite-socket');
  if (dataDir !== undefined) mkdirSync(join(dataDir, 'pgdata'), { recursive: true, mode: 0o700 });
  const pglite = await PGlite.create(dataDir === undefined ? undefined : join(dataDir, 'pgdata'));
  const folder = dataDir === undefined ? mkdtempSync(join(tmpdir(), 'user-accounts-db-')) : join(dataDir, 'db');
  mkdirSync(folder, { recursive: true, mode: 0o700 });
  chmodSync(folder, 0o700);
  const path = join(folder, 'db.sock');
  rmSync(path, { force: true }); // left by a server that was killed: the folder's lock is ours now
  const server = new PGLiteSocketServer({ db: pglite, path, maxConnections: 1 });
  const close = async () => {
    await server.stop(); // which removes the socket
    await pglite.close();
    if (dataDir === undefined) rmSync(folder, { recursive: true, force: true });
  };
  try {
    await server.start();
  } catch (error) {
    await close();
    throw error;
  }
  return openPostgres('postgres://postgres@localhost/postgres', {
    ...options,
    embedded: { path, close },
  });
}
