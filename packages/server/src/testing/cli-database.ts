// Test helper: the operator CLI's commands run in the test's own process (ops/commands.ts'
// runCommand, as `cli` runs them) on a migrated embedded database of the file's own, with a key
// ring of its own (FACTOR_ENCRYPTION_KEY's) and a private folder for the files a command reads its
// secrets from (mode 0600). What the ops/ integration tests of `cli provider` and `cli site set`
// (senders, templates) set up alike; the database is opened once for the file (beforeAll).
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll } from 'vitest';
import type { Database } from '../db/client.ts';
import { type KeyRing, mintKeyRingText, parseKeyRing } from '../kernel/secret-box.ts';
import { runCommand } from '../ops/commands.ts';
import { openMigratedPglite } from './templates.ts';

export interface CliDatabase {
  /** The migrated embedded database (after beforeAll). */
  readonly database: Database;
  /** The key ring the commands seal under, as FACTOR_ENCRYPTION_KEY's. */
  ring: KeyRing;
  /** The private folder, removed after the file. */
  dir: string;
  /** Each of `files`' names → its path in `dir`. */
  files: Record<string, string>;
  /** Runs `cli ARGV` on the database; what it prints and its exit code. */
  cli(argv: string[]): ReturnType<typeof runCommand>;
  /** A site's name no other test of the file uses. */
  newSite(): string;
}

/** The CLI over a migrated PGlite for this file; `files`: name → content, written 0600 into the folder. */
export function useCliDatabase(options: { prefix?: string; files?: Record<string, string> } = {}): CliDatabase {
  const ring = parseKeyRing(mintKeyRingText('k1')) as KeyRing;
  const dir = mkdtempSync(join(tmpdir(), `${options.prefix ?? 'cli'}-`));
  const files: Record<string, string> = {};
  for (const [name, content] of Object.entries(options.files ?? {})) {
    files[name] = join(dir, name);
    writeFileSync(files[name], content, { mode: 0o600 });
  }
  let database: Database | undefined;
  beforeAll(async () => {
    database = await openMigratedPglite();
  }, 60_000);
  afterAll(async () => {
    await database?.close();
    rmSync(dir, { recursive: true, force: true });
  });
  const opened = () => {
    if (database === undefined) throw new Error('useCliDatabase: the database opens in beforeAll');
    return database;
  };
  return {
    get database() {
      return opened();
    },
    ring,
    dir,
    files,
    cli: (argv) =>
      runCommand(argv, opened().db, undefined, undefined, { webhookAllowPrivate: false, factorKeys: ring }),
    newSite: () => `shop-${randomUUID().slice(0, 8)}`,
  };
}
