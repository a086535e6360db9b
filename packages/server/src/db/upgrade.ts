// Databases migrated before a migration was edited on main. drizzle's migrator records each
// migration it applies by its journal time (`when`) and the hash of its file, and afterwards
// compares times only: a migration whose `when` changed is run a second time (0010 at 733e409:
// `DROP INDEX "events_unnumbered_idx"` failed, the index was gone), one whose text changed
// without its time is never run again (its fix never reaches that database). Migrations are never
// edited any more (drizzle/checksums.json and its test hold them); for those edited before,
// bridge() brings such a database to the state the committed file leaves, then records it as
// applied, and the migrator goes on from there.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { type SQL, sql } from 'drizzle-orm';
import { MIGRATIONS_DIR } from '../resources.ts';
import type { Db } from './client.ts';

async function rows<T>(db: Db, query: SQL): Promise<T[]> {
  return (await db.execute(query)) as unknown as T[];
}

/** A statement of a migration file without the comment lines before it. */
function bare(statement: string): string {
  return statement
    .split('\n')
    .filter((line) => !line.trimStart().startsWith('--'))
    .join('\n')
    .trim();
}

/** The committed file's statements, as drizzle splits them. */
function statements(tag: string): string[] {
  return readFileSync(join(MIGRATIONS_DIR, `${tag}.sql`), 'utf8')
    .split('--> statement-breakpoint')
    .filter((s) => bare(s) !== '');
}

/**
 * The statements of the committed `tag` that the database still lacks: `done` are those the
 * earlier version had already run (each must match one statement, or the file is not the one
 * this was written for); functions are replaced, since the earlier version made them.
 */
function remainder(tag: string, done: string[]): string[] {
  const all = statements(tag);
  for (const prefix of done) {
    if (all.filter((s) => bare(s).startsWith(prefix)).length !== 1)
      throw new Error(`upgrade: ${tag}.sql has no single statement starting ${prefix}`);
  }
  return all
    .filter((s) => !done.some((prefix) => bare(s).startsWith(prefix)))
    .map((s) => s.replace(/^CREATE FUNCTION /m, 'CREATE OR REPLACE FUNCTION '));
}

/** A version of a migration that was once on main and edited afterwards. */
interface Edited {
  tag: string;
  /** The hash drizzle recorded for it (sha256 of the file as it was). */
  hash: string;
  /** Its journal time then. */
  when: number;
  /** Where it was on main (a commit), for the message and the reader. */
  at: string;
  /** The statements that bring its database to what the committed file leaves; none: nothing differs that matters. */
  repair?: () => string[];
  /** Not upgraded in place: why, and what to do instead. */
  refused?: string;
}

const BEFORE_5B1690B =
  'its migrations 0007 and 0008 come from main before 5b1690b (2026-11-22 10:03 UTC), edited since in ways ' +
  'that change the events table; it cannot be upgraded in place. Stop its servers, export each site with the ' +
  "version that made it (`cli export --site NAME > FILE.ndjson`), then import into an empty database with this one's " +
  '`cli import --site NAME FILE.ndjson` (docs/deploy.md, "Upgrades").';

/** Every edited version found in `git log -p packages/server/drizzle` (see the commits named). */
export const EDITED: Edited[] = [
  {
    // No trigger on TRUNCATE: a TRUNCATE of api_tokens left servers trusting the tokens cached.
    tag: '0006_token_changes',
    hash: '890a024ffe07949c39ce80866071eab4bf3cc938de7d0ebc8d126c0388027005',
    when: 1795324902439,
    at: '77f4cf6',
    repair: () =>
      statements('0006_token_changes').filter((s) => bare(s).startsWith('CREATE TRIGGER "api_tokens_notify_truncate"')),
  },
  {
    tag: '0007_change_events',
    hash: 'a75451e026e25757985ff6d2748a746480689106a86539d5b767019850a2ed76',
    when: 1795336238799,
    at: '5805b04',
    refused: BEFORE_5B1690B,
  },
  {
    tag: '0008_events_notify',
    hash: '619c9a06864df7e664f7fc76b33c70812f58c5002de8434e0f347b36b522ad81',
    when: 1795336239447,
    at: '5805b04',
    refused: BEFORE_5B1690B,
  },
  {
    tag: '0007_change_events',
    hash: 'b878acb16ef5f1de9bd768c47708857c14f7396d3f4ed77db6229d7f602816ac',
    when: 1795341198094,
    at: '8edb22a',
    refused: BEFORE_5B1690B,
  },
  {
    tag: '0008_events_sequencer',
    hash: '190cd8fd5692570ccb2d8a04df0a33e42d18bf0e4cb4913e7cc8ca85972e698f',
    when: 1795341199035,
    at: '8edb22a',
    refused: BEFORE_5B1690B,
  },
  {
    // The first 0010 kept the BRIN on time and a unique (site, seq) over unnumbered events too,
    // left the snapshots of sites with nothing unnumbered null, and had the first functions. The
    // committed file's own statements do the rest, under its lock, once everything is numbered.
    tag: '0010_events_txid',
    hash: '5d5a088b95dd9dfe24513610669db4177a892a804152a4e9ef627abe417487ed',
    when: 1795366418492,
    at: '733e409',
    repair: () =>
      remainder('0010_events_txid', [
        'DROP INDEX "events_unnumbered_idx"',
        'ALTER TABLE "event_sequences" ADD COLUMN "snapshot"',
        'ALTER TABLE "events" ADD COLUMN "txid"',
        'CREATE INDEX "events_site_txid_idx"',
        'DROP FUNCTION number_site_events(text, bigint)',
      ]),
  },
  // The second 0010 differs in runtime guards only (a lock, a time limit, a check); 0011 replaces
  // both its functions.
  {
    tag: '0010_events_txid',
    hash: 'abaafccf10cff9cb6961c13faaaf5d93b607fb1618ef2742f073782d06174da0',
    when: 1795368000779,
    at: '908e0c0',
  },
  // The first two 0011s differ in their functions' bodies, which 0015 drops.
  {
    tag: '0011_event_batches',
    hash: '476dedd9aa327d83b40c1d873c67c623ac75412f834cc828ab7fccde6879e28d',
    when: 1795497128442,
    at: '1ca8b0c',
  },
  {
    tag: '0011_event_batches',
    hash: 'b22e7a810093ed4fc288647a024cebe6f656d72c919f81265bceb9f608265363',
    when: 1795497128442,
    at: 'dacbc1e',
  },
];

interface Journal {
  entries: { tag: string; when: number }[];
}

/** An upgrade that cannot be made; nothing was changed. */
export class UpgradeRefused extends Error {}

/**
 * Brings a database that holds an edited migration (EDITED) to the state its committed version
 * leaves, and records the committed version as applied; then drizzle's migrator can go on. Each
 * in one transaction. The caller holds the migration lock.
 */
export async function bridge(db: Db): Promise<string[]> {
  const [table] = await rows<{ name: string | null }>(
    db,
    sql`select to_regclass('drizzle.__drizzle_migrations')::text as name`,
  );
  if (table?.name == null) return [];
  const applied = await rows<{ id: number; hash: string; created_at: string }>(
    db,
    sql`select id, hash, created_at::text from drizzle.__drizzle_migrations order by created_at`,
  );
  const journal = JSON.parse(readFileSync(join(MIGRATIONS_DIR, 'meta', '_journal.json'), 'utf8')) as Journal;
  const bridged: string[] = [];
  for (const row of applied) {
    const edited = EDITED.find((e) => e.hash === row.hash && e.when === Number(row.created_at));
    if (edited === undefined) continue;
    if (edited.refused !== undefined) throw new UpgradeRefused(`This database cannot be migrated: ${edited.refused}`);
    const committed = journal.entries.find((e) => e.tag === edited.tag);
    if (committed === undefined) throw new Error(`upgrade: ${edited.tag} is not in the journal`);
    const hash = createHash('sha256')
      .update(readFileSync(join(MIGRATIONS_DIR, `${edited.tag}.sql`), 'utf8'))
      .digest('hex');
    await db.transaction(async (tx) => {
      for (const statement of edited.repair?.() ?? []) await tx.execute(sql.raw(statement));
      await tx.execute(
        sql`update drizzle.__drizzle_migrations set hash = ${hash}, created_at = ${committed.when} where id = ${row.id}`,
      );
    });
    bridged.push(`${edited.tag} (as at ${edited.at})`);
  }
  return bridged;
}

/** The migration whose statement `query` is, by its tag (the message says which failed). */
function migrationOf(query: string, journal: Journal): string | undefined {
  const wanted = query.trim();
  return journal.entries.find((e) => statements(e.tag).some((s) => s.trim() === wanted))?.tag;
}

/**
 * Runs drizzle's migrator (`migrate`) after bridge(); a failure says which migration failed, that
 * nothing was applied, and what to do.
 */
export async function upgrade(db: Db, migrate: () => Promise<void>): Promise<void> {
  await bridge(db);
  try {
    await migrate();
  } catch (error) {
    const journal = JSON.parse(readFileSync(join(MIGRATIONS_DIR, 'meta', '_journal.json'), 'utf8')) as Journal;
    const failed = error as Error & { query?: string; cause?: unknown };
    const tag = failed.query === undefined ? undefined : migrationOf(failed.query, journal);
    const cause = failed.cause instanceof Error ? failed.cause.message : failed.message.split('\n')[0];
    throw new Error(
      `Migrating the database failed${tag === undefined ? '' : ` in ${tag}`}: ${cause}. Nothing was changed: ` +
        'the pending migrations run in one transaction. What to do: keep the servers of the version you had running ' +
        '(the database is as they left it); check in CHANGELOG.md that this version upgrades the one that made the ' +
        'database (docs/deploy.md, "Upgrades"); fix what the error names (a role without CREATE on the database, ' +
        'a statement_timeout, a lock held by another session) and run `cli migrate` again.',
      { cause: error },
    );
  }
}
