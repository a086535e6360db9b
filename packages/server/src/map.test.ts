// The map of the code that docs/development.md opens with (issue 58, point 4) names every folder a
// newcomer meets: each folder of packages/server/src (`src/<folder>/`), each package
// (`packages/<name>/`) and each folder at the top of the repository (`spec/`, `scripts/` …, and
// `.ci/`). A folder added without its line fails here, and so does a line left behind by a folder
// that is gone. A line is a row of the map's table; its first cell names the folders in backticks.
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const PAGE = readFileSync(join(ROOT, 'docs/development.md'), 'utf8');

/** Folders git ignores (.gitignore's `name/` lines: data/, dist/, release/ …) hold no code of ours. */
const IGNORED = readFileSync(join(ROOT, '.gitignore'), 'utf8')
  .split('\n')
  .filter((line) => /^[^#!/][^/]*\/$/.test(line))
  .map(
    (line) =>
      new RegExp(
        `^${line
          .slice(0, -1)
          .replace(/[.+?^${}()|[\]\\]/g, '\\$&')
          .replaceAll('*', '.*')}$`,
      ),
  );

const folders = (dir: string) =>
  readdirSync(join(ROOT, dir), { withFileTypes: true })
    .filter((entry) => entry.isDirectory() && !entry.name.startsWith('.'))
    .filter((entry) => !IGNORED.some((pattern) => pattern.test(entry.name)))
    .map((entry) => entry.name)
    .sort();

/** What the map must name: the server's folders, the packages, the repository's own folders. */
const EXPECTED = [
  ...folders('packages/server/src').map((name) => `src/${name}/`),
  ...folders('packages').map((name) => `packages/${name}/`),
  ...folders('.')
    .filter((name) => name !== 'packages')
    .map((name) => `${name}/`),
  '.ci/',
];

/** The page's first section ("## The map" on this page), up to the next heading of its level. */
function firstSection(markdown: string): string {
  const start = markdown.search(/^## /m);
  if (start < 0) return '';
  const next = markdown.indexOf('\n## ', start + 1);
  return markdown.slice(start, next < 0 ? undefined : next);
}

/** The folders its table's rows name: each `…/` in backticks of a row's first cell. */
function named(section: string): string[] {
  return [...section.matchAll(/^\|([^|\n]*)\|/gm)].flatMap(([, cell]) =>
    [...cell!.matchAll(/`([^`]+\/)`/g)].map((m) => m[1]!),
  );
}

describe('the map of docs/development.md', () => {
  const section = firstSection(PAGE);
  const rows = named(section);

  it('is what the page opens with', () => {
    expect(section.split('\n')[0]).toBe('## The map');
  });

  it('names every folder of packages/server/src, every package and every folder of the repository', () => {
    expect(EXPECTED.filter((folder) => !rows.includes(folder))).toEqual([]);
  });

  it('names no folder that is not there', () => {
    const where = (folder: string) =>
      folder.startsWith('src/') ? join(ROOT, 'packages/server', folder) : join(ROOT, folder);
    expect(rows.filter((folder) => !existsSync(where(folder)))).toEqual([]);
  });

  it('fits on a screen: one row a folder, at most 50 lines before what follows', () => {
    expect(section.split('\n').length).toBeLessThanOrEqual(50);
  });

  it('reads the rows it checks', () => {
    const sample = '## The map\n| where | what |\n|---|---|\n| `src/db/`, `src/x.ts` | schema |\n| `.ci/` | CI |\n';
    expect(named(sample)).toEqual(['src/db/', '.ci/']);
    expect(EXPECTED).toContain('src/sessions/');
    expect(EXPECTED).toContain('packages/cluster/');
    expect(EXPECTED).toContain('patches/');
    expect(IGNORED.some((pattern) => pattern.test('node_modules'))).toBe(true);
    expect(IGNORED.some((pattern) => pattern.test('dist-browser'))).toBe(true);
  });
});
