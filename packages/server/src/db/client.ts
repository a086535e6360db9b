import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import type { Tracer } from '@opentelemetry/api';
import { type SQL, sql } from 'drizzle-orm';
import type { PgDatabase, PgQueryResultHKT } from 'drizzle-orm/pg-core';
import { MIGRATIONS_DIR as MIGRATIONS } from '../resources.ts';
import { type ChannelHandlers, type Listening, listenPglite, listenPostgres } from './listen.ts';
import { schema } from './schema.ts';
import { tracePglite, tracePostgres } from './traced.ts';
import { upgrade } from './upgrade.ts';

export type Db = PgDatabase<PgQueryResultHKT, typeof schema>;

/** What a migrate() did: the migrations it applied, and those the database had before. */
export interface Migrated {
  applied: number;
  already: number;
}

export interface Database {
  db: Db;
  kind: 'pglite' | 'postgres';
  /** Applies the committed drizzle-kit migrations; safe to run on every start. */
  migrate(): Promise<Migrated>;
  /** Resolves when the database answers a query. */
  ping(): Promise<void>;
  /** LISTENs on `channel` for as long as the database is open (see listen.ts). */
  listen(channel: string, handlers: ChannelHandlers): Promise<Listening>;
  close(): Promise<void>;
}

/**
 * Runs `query` as a named prepared statement on PostgreSQL: parsed and planned once per
 * connection, where drizzle's execute() sends every query unnamed, parsed and planned anew. For
 * a hot statement of fixed text only (postgres.js keeps each text's statement for the
 * connection's life): the outbox's INSERT, parsed anew, cost a write more database time than the
 * write's own statements (`./pnpmw bench --only events`). Works in a transaction (drizzle's
 * transaction holds postgres.js's reserved connection); on PGlite, a plain execute.
 */
export async function executePrepared(db: Db, query: SQL): Promise<void> {
  // drizzle keeps its session and dialect internal; both are stable parts of its PgDatabase.
  const { session, dialect } = db as unknown as {
    session: {
      client: { unsafe?: (text: string, params: unknown[], options: { prepare: boolean }) => Promise<unknown> };
    };
    dialect: { sqlToQuery(query: SQL): { sql: string; params: unknown[] } };
  };
  const unsafe = session.client.unsafe;
  if (typeof unsafe !== 'function') {
    await db.execute(query);
    return;
  }
  const { sql: text, params } = dialect.sqlToQuery(query);
  await unsafe.call(session.client, text, params, { prepare: true });
}

/** The advisory lock key of migrations: any constant the deployment's other users do not take. */
export const MIGRATION_LOCK = 0x75_73_65_72; // "user"

const ping = (db: Db) => async () => {
  await db.execute(sql`select 1`);
};

/** postgres.js answers an array of rows, PGlite an object that holds them. */
export async function rows<T extends Record<string, unknown>>(db: Db, query: SQL): Promise<T[]> {
  const result = await db.execute<T>(query);
  return Array.isArray(result) ? result : (result as unknown as { rows: T[] }).rows;
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

export async function openPostgres(
  url: string,
  options: { max?: number; statementTimeoutMs?: number; listenUrl?: string; tracer?: Tracer } = {},
): Promise<Database> {
  const { default: postgres } = await import('postgres');
  const { drizzle } = await import('drizzle-orm/postgres-js');
  const { migrate } = await import('drizzle-orm/postgres-js/migrator');
  const client = postgres(url, {
    max: options.max ?? 10,
    // The default pipelining (100) degrades under sustained load (see stack notes); 0 would
    // avoid it but broke every sql.begin() in postgres.js 3.4.9 (UNSAFE_TRANSACTION; patched since, see
    // db/client.test.ts), so 1.
    max_pipeline: 1,
    connect_timeout: 5,
    // The default backoff grows to 20 s after a few failed reconnects, so service came back up to
    // 20 s after PostgreSQL did (fault tests); at most 1 s between attempts keeps that under 5 s.
    backoff: (retries: number) => Math.min(0.05 * 2 ** retries, 1),
    idle_timeout: 60,
    onnotice: () => {},
    // No statement outlives the request it serves (see the deadline middleware).
    connection: { application_name: 'user-accounts', statement_timeout: options.statementTimeoutMs ?? 10_000 },
  } as Parameters<typeof postgres>[1]);
  // Every query goes through this client: traced here, once, when tracing is on.
  if (options.tracer !== undefined) tracePostgres(client, options.tracer);
  const db = drizzle(client, { schema }) as unknown as Db;
  const { listeners, track } = listenerSet();
  return {
    db,
    kind: 'postgres',
    async migrate() {
      // drizzle's migrator takes no lock: two servers (or a deploy step and a server) starting on
      // an empty database raced to CREATE TABLE and one failed. A session-level advisory lock
      // makes them take turns; the second finds every migration applied.
      // The lock has a connection of its own: the pool may have only one (the CLI's). It goes
      // where the listeners go (DATABASE_LISTEN_URL, PostgreSQL itself): behind a transaction-mode
      // pooler, a session lock would stay with a server connection the pooler hands to others.
      const session = postgres(options.listenUrl ?? url, { max: 1, connect_timeout: 5, onnotice: () => {} });
      try {
        await session`select pg_advisory_lock(${MIGRATION_LOCK})`;
        return await counted(db, () => upgrade(db, () => migrate(drizzle(client), { migrationsFolder: MIGRATIONS })));
      } finally {
        await session.end({ timeout: 5 }); // ending the session releases its lock
      }
    },
    ping: ping(db),
    listen: (channel, handlers) => track(listenPostgres(options.listenUrl ?? url, channel, handlers)),
    async close() {
      await Promise.all([...listeners].map(async (l) => (await l).close()));
      await client.end({ timeout: 5 });
    },
  };
}

/** The listeners a database has opened, closed with it. */
function listenerSet() {
  const listeners = new Set<Promise<Listening>>();
  const track = (listening: Promise<Listening>) => {
    listeners.add(listening);
    return listening;
  };
  return { listeners, track };
}

/** The embedded database: PostgreSQL compiled to WASM, kept in `dataDir/pgdata`. */
export async function openPglite(dataDir: string | undefined, options: { tracer?: Tracer } = {}): Promise<Database> {
  const { PGlite } = await import('@electric-sql/pglite');
  const { drizzle } = await import('drizzle-orm/pglite');
  const { migrate } = await import('drizzle-orm/pglite/migrator');
  let path: string | undefined;
  if (dataDir !== undefined) {
    path = join(dataDir, 'pgdata');
    mkdirSync(path, { recursive: true, mode: 0o700 });
  }
  const client = await PGlite.create(path);
  // Every query goes through this client: traced here, once, when tracing is on.
  if (options.tracer !== undefined) tracePglite(client, options.tracer);
  const db = drizzle(client, { schema }) as unknown as Db;
  const { listeners, track } = listenerSet();
  return {
    db,
    kind: 'pglite',
    migrate: () => counted(db, () => upgrade(db, () => migrate(drizzle(client), { migrationsFolder: MIGRATIONS }))),
    ping: ping(db),
    listen: (channel, handlers) => track(listenPglite(client, channel, handlers)),
    async close() {
      await Promise.all([...listeners].map(async (l) => (await l).close()));
      await client.close();
    },
  };
}
