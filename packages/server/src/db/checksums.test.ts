import { describe, expect, it } from 'vitest';
import { currentMigrations, readManifest, sealed } from './checksums.ts';

// Databases out there ran each migration as it was when it reached main; an edit reaches none of
// them (drizzle runs a migration once), and a changed journal time runs it again (0010, 733e409).
describe('migrations on main are never edited (drizzle/checksums.json)', () => {
  const manifest = readManifest();
  const current = currentMigrations();

  it.each(Object.entries(manifest))('%s is as it was sealed', (tag, seal) => {
    const now = current.get(tag);
    expect(now, `${tag} left the journal; a migration on main stays`).toBeDefined();
    expect(
      now,
      `${tag}.sql or its journal time changed since it was sealed: databases have run it as it was. ` +
        'Undo the edit and make the change in a new migration (drizzle-kit generate, or a custom one).',
    ).toEqual(seal);
  });

  it('lists every migration in the journal', () => {
    const unlisted = [...current.keys()].filter((tag) => !(tag in manifest));
    expect(
      unlisted,
      'A new migration is sealed when it goes to main: run `./pnpmw migrations:seal` and commit drizzle/checksums.json with it.',
    ).toEqual([]);
  });

  it('sealing adds the unlisted and keeps what was sealed', () => {
    const next = sealed(
      { a: { sha256: 'old', when: 1 } },
      new Map([
        ['a', { sha256: 'edited', when: 2 }],
        ['b', { sha256: 'new', when: 3 }],
      ]),
    );
    expect(next).toEqual({ a: { sha256: 'old', when: 1 }, b: { sha256: 'new', when: 3 } });
  });
});
