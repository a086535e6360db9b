// drizzle/checksums.json: every migration on main, by the sha256 of its file and its journal time
// (drizzle's migrator tells applied migrations by that time, so a changed time runs one again).
// checksums.test.ts holds the files to it: a migration is never edited once on main (add a new
// one), because databases out there have run the version that was. `./pnpmw migrations:seal`
// (this file, run) adds the migrations not yet listed, and never changes a listed one.
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { MIGRATIONS_DIR } from '../resources.ts';

export const MANIFEST = join(MIGRATIONS_DIR, 'checksums.json');

export interface Sealed {
  sha256: string;
  when: number;
}

/** The migrations in the journal, as they are now. */
export function currentMigrations(dir = MIGRATIONS_DIR): Map<string, Sealed> {
  const journal = JSON.parse(readFileSync(join(dir, 'meta', '_journal.json'), 'utf8')) as {
    entries: { tag: string; when: number }[];
  };
  return new Map(
    journal.entries.map((e) => [
      e.tag,
      {
        sha256: createHash('sha256')
          .update(readFileSync(join(dir, `${e.tag}.sql`), 'utf8'))
          .digest('hex'),
        when: e.when,
      },
    ]),
  );
}

export function readManifest(file = MANIFEST): Record<string, Sealed> {
  return JSON.parse(readFileSync(file, 'utf8')) as Record<string, Sealed>;
}

/** The manifest with the unlisted migrations added; listed ones as they were. */
export function sealed(manifest: Record<string, Sealed>, current: Map<string, Sealed>): Record<string, Sealed> {
  const next = { ...manifest };
  for (const [tag, seal] of current) next[tag] ??= seal;
  return next;
}

if (import.meta.main) {
  const before = readManifest();
  const after = sealed(before, currentMigrations());
  const added = Object.keys(after).filter((tag) => !(tag in before));
  writeFileSync(MANIFEST, `${JSON.stringify(after, null, 2)}\n`);
  process.stdout.write(added.length === 0 ? 'every migration was listed already\n' : `sealed ${added.join(', ')}\n`);
}
