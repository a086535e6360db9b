// Migrate once per test run, then copy. Every contract suite and most single-question tests start
// a server on a database of their own, and each such database ran all the migrations again
// (PGlite's initdb alone is seconds). Instead the first test that needs one migrates a template,
// under a lock (two workers may ask at once), and every later database is a copy of it: the
// embedded database's `pgdata` folder copied, PostgreSQL's `CREATE DATABASE … TEMPLATE`.
//
// The run's templates live in TEST_TEMPLATES_DIR, which vitest's global setup (scripts/
// test-templates.ts) creates for one run and removes, with the PostgreSQL template, after it.
// Without it (a file run by other means) nothing is shared and each database migrates itself.
import { cpSync, existsSync, mkdirSync, mkdtempSync, renameSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import postgres from 'postgres';
import type { Database } from '../db/client.ts';

// db/client is imported when a template is made, not with this module: vitest's global setup
// (which only drops the template) loads it through vite, which cannot run resources.ts.
const client = () => import('../db/client.ts');

/** The folder of this run's templates, or undefined outside a vitest run with the global setup. */
export const templatesDir = () => process.env.TEST_TEMPLATES_DIR || undefined;

/** The PostgreSQL template's name for a run's folder (a database name of its own per run). */
export const postgresTemplateName = (dir: string) =>
  `ua_template_${basename(dir)
    .replace(/[^a-z0-9]/gi, '')
    .toLowerCase()}`;

let pgliteTemplate: Promise<string> | undefined;

/** The migrated `pgdata` folder of this run, made by the first caller of any worker. */
function pgliteTemplateDir(dir: string): Promise<string> {
  pgliteTemplate ??= (async () => {
    const ready = join(dir, 'pglite');
    if (existsSync(ready)) return join(ready, 'pgdata');
    try {
      mkdirSync(join(dir, 'pglite.lock'));
    } catch {
      // Another worker migrates it: wait until it is published.
      for (let waited = 0; !existsSync(ready); waited += 50) {
        if (waited > 120_000) throw new Error(`no PGlite template appeared in ${ready} within 120 s`);
        await sleep(50);
      }
      return join(ready, 'pgdata');
    }
    const building = join(dir, 'pglite.building');
    const database = await (await client()).openPglite(building);
    try {
      await database.migrate();
    } finally {
      await database.close();
    }
    rmSync(join(building, 'db'), { recursive: true, force: true }); // the socket's folder
    renameSync(building, ready); // published whole, never half-made
    return join(ready, 'pgdata');
  })();
  return pgliteTemplate;
}

/**
 * Puts a migrated embedded database into `dataDir` (as a server's first start would leave it,
 * before the server's own first writes) and says so; false when this run has no templates.
 */
export async function copyMigratedPglite(dataDir: string): Promise<boolean> {
  const dir = templatesDir();
  if (dir === undefined) return false;
  const template = await pgliteTemplateDir(dir);
  mkdirSync(dataDir, { recursive: true });
  cpSync(template, join(dataDir, 'pgdata'), { recursive: true });
  return true;
}

/**
 * An embedded database with every migration applied, for a test that opens one itself: a copy
 * of this run's template in a temporary folder (removed at close), or without templates a new
 * one in memory, migrated there.
 */
export async function openMigratedPglite(): Promise<Database> {
  const { openPglite } = await client();
  if (templatesDir() === undefined) {
    const database = await openPglite(undefined);
    await database.migrate();
    return database;
  }
  const dir = mkdtempSync(join(tmpdir(), 'ua-test-db-'));
  await copyMigratedPglite(dir);
  const database = await openPglite(dir);
  return {
    ...database,
    async close() {
      await database.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

let postgresTemplate: Promise<string> | undefined;

/** This run's migrated template database on the PostgreSQL of `adminUrl`. */
function postgresTemplateOf(adminUrl: string, dir: string): Promise<string> {
  postgresTemplate ??= (async () => {
    const name = postgresTemplateName(dir);
    const admin = postgres(adminUrl, { max: 1, connect_timeout: 3, onnotice: () => {} });
    try {
      // The workers take turns; the first migrates, the others find it made.
      await admin`select pg_advisory_lock(${0x75_61_74_70})`; // "uatp"
      const [found] = await admin`select 1 from pg_database where datname = ${name}`;
      if (found === undefined) {
        const building = `${name}_building`;
        await admin.unsafe(`drop database if exists ${building} with (force)`);
        await admin.unsafe(`create database ${building}`);
        const url = new URL(adminUrl);
        url.pathname = `/${building}`;
        const database = await (await client()).openPostgres(url.toString(), { max: 1 });
        try {
          await database.migrate();
        } finally {
          await database.close();
        }
        // A template nobody is connected to; renamed only once whole.
        await admin.unsafe(`alter database ${building} rename to ${name}`);
      }
      return name;
    } finally {
      await admin.end({ timeout: 5 });
    }
  })();
  return postgresTemplate;
}

/**
 * Creates `name` on the PostgreSQL of `adminUrl` as a copy of this run's migrated template, or
 * empty (to migrate at the server's start) when this run has no templates. Runs on `admin`.
 */
export async function createMigratedPostgres(admin: postgres.Sql, adminUrl: string, name: string): Promise<void> {
  const dir = templatesDir();
  if (dir === undefined) {
    await admin.unsafe(`create database ${name}`);
    return;
  }
  const template = await postgresTemplateOf(adminUrl, dir);
  await admin.unsafe(`create database ${name} template ${template}`);
}

/** A new, empty database on the PostgreSQL of `base` (TEST_DATABASE_URL's by default); `drop` removes it. */
export const freshPostgresDatabase = (base: string = process.env.TEST_DATABASE_URL!) =>
  databaseOfItsOwn(base, async (admin, name) => {
    await admin.unsafe(`create database ${name}`);
  });

/**
 * A new database on the PostgreSQL of `base` (TEST_DATABASE_URL's by default) with every
 * migration applied (a copy of this run's template); `drop` removes it.
 */
export const migratedPostgresDatabase = (base: string = process.env.TEST_DATABASE_URL!) =>
  databaseOfItsOwn(base, (admin, name) => createMigratedPostgres(admin, base, name));

async function databaseOfItsOwn(
  base: string,
  create: (admin: postgres.Sql, name: string) => Promise<void>,
): Promise<{ url: string; drop(): Promise<void> }> {
  const admin = postgres(base, { max: 1, connect_timeout: 3, onnotice: () => {} });
  const name = `ua_test_${Date.now()}_${Math.random().toString(36).slice(2, 8)}`;
  await create(admin, name);
  const url = new URL(base);
  url.pathname = `/${name}`;
  return {
    url: url.toString(),
    async drop() {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end({ timeout: 5 });
    },
  };
}

/** Drops this run's PostgreSQL template (the global setup's teardown). */
export async function dropPostgresTemplate(adminUrl: string, dir: string): Promise<void> {
  const admin = postgres(adminUrl, { max: 1, connect_timeout: 3, onnotice: () => {} });
  try {
    const name = postgresTemplateName(dir);
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.unsafe(`drop database if exists ${name}_building with (force)`);
  } finally {
    await admin.end({ timeout: 5 });
  }
}
