// Every file a code comment names exists (issue 58, point 4): a comment that says where a thing
// lives ("restore alone: accounts/delete.ts") is a pointer, and one left behind by a move or a
// rename sends the reader to nothing.
//
// The rule, kept narrow so that it never cries wolf:
// - the comments of the repository's TypeScript (packages/*/src/**/*.ts(x), packages/*/*.ts,
//   scripts/*.ts and vitest.config.ts), as TypeScript's parser finds them: strings and code
//   are not comments;
// - a pointer is a path ending in `.ts` or `.tsx` with a folder in it or a `./` or `../` before
//   it (`accounts/delete.ts`, `./errors.ts`, `../../../scripts/check-layers.ts`,
//   `packages/server/src/…`); a bare name (`tokens.ts`) is a mention, not an address, and a
//   pattern (`pglite-*.test.ts`, `<name>.ts`) names no one file;
// - it resolves when the file exists relative to the comment's folder or any folder above it up
//   to the repository's root (so `src/errors.ts` from packages/server, `contract-tests/src/harness.ts`
//   from packages/, `packages/…` from anywhere), or to packages/server/src (whose folders every
//   package names from there: `sessions/rules.ts`).
// Only a file with a path that resolves nowhere is parsed (most name only files that exist, in
// their imports), which keeps the check to a second or so.
import { existsSync, globSync, readFileSync } from 'node:fs';
import { dirname, join, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const SERVER_SRC = join(ROOT, 'packages/server/src');

const SOURCES = globSync(['packages/*/src/**/*.{ts,tsx}', 'packages/*/*.ts', 'scripts/*.ts', 'vitest.config.ts'], {
  cwd: ROOT,
  exclude: (path) => /(^|\/)(node_modules|generated|\.[^/]+)$/.test(path),
})
  .map((f) => f.split(sep).join('/'))
  .sort();

/** Each comment of a file (its offset and text), once each, as TypeScript's parser sees them. */
function comments(fileName: string, text: string): { pos: number; comment: string }[] {
  const source = ts.createSourceFile(fileName, text, ts.ScriptTarget.Latest, false, ts.ScriptKind.TSX);
  const found = new Map<number, string>();
  const collect = (ranges: ts.CommentRange[] | undefined) => {
    for (const { pos, end } of ranges ?? []) found.set(pos, text.slice(pos, end));
  };
  const visit = (node: ts.Node) => {
    collect(ts.getLeadingCommentRanges(text, node.getFullStart()));
    collect(ts.getTrailingCommentRanges(text, node.end));
    ts.forEachChild(node, visit);
  };
  visit(source);
  collect(ts.getLeadingCommentRanges(text, source.endOfFileToken.getFullStart()));
  return [...found.entries()].sort(([a], [b]) => a - b).map(([pos, comment]) => ({ pos, comment }));
}

/** The paths a comment names: a `/` in them, `.ts` or `.tsx` at the end, no pattern characters. */
function pointers(comment: string): string[] {
  const path =
    /(?<![\w@.$*<>{}/-])((?:\.{1,2}\/)+[\w@.-]+(?:\/[\w@.-]+)*\.tsx?|[\w@-][\w@.-]*(?:\/[\w@.-]+)+\.tsx?)(?![\w*/-])/g;
  return [...comment.matchAll(path)].map((m) => m[1]!).filter((path) => !path.includes('*'));
}

/** Where a pointer in `file` (relative to the root) may lead: its folder and those above, and the server's src/. */
function resolves(file: string, pointer: string): boolean {
  const bases: string[] = [SERVER_SRC];
  for (let dir = dirname(join(ROOT, file)); ; dir = dirname(dir)) {
    bases.push(dir);
    if (relative(ROOT, dir) === '' || dir === dirname(dir)) break;
  }
  return bases.some((base) => existsSync(join(base, pointer)));
}

describe('the file pointers of code comments', () => {
  it('reads comments only, and takes paths with a folder (not bare names, not patterns)', () => {
    const text = [
      '// see accounts/delete.ts and ./x.ts, ../db/client.ts; tokens.ts alone is a name',
      "const s = 'not/a/comment.ts';",
      '/** packages/server/src/errors.ts, `pglite-*.test.ts`, `<file>.ts`, https://host/a/b.ts */',
      'const re = /a\\/b.ts/; // after a regex: http/routes/x.tsx.',
    ].join('\n');
    expect(comments('x.ts', text).flatMap(({ comment }) => pointers(comment))).toEqual([
      'accounts/delete.ts',
      './x.ts',
      '../db/client.ts',
      'packages/server/src/errors.ts',
      'http/routes/x.tsx',
    ]);
  });

  it('finds the files it reads', () => {
    expect(SOURCES).toContain('packages/server/src/kernel/in-reach.ts');
    expect(SOURCES).toContain('scripts/check-layers.ts');
    expect(SOURCES).toContain('packages/console/src/app.tsx');
    expect(SOURCES.length).toBeGreaterThan(400);
  });

  it('every .ts path a comment names exists (relative to its folder, a folder above, or packages/server/src)', () => {
    const dead: string[] = [];
    for (const file of SOURCES) {
      const text = readFileSync(join(ROOT, file), 'utf8');
      if (pointers(text).every((pointer) => resolves(file, pointer))) continue;
      for (const { pos, comment } of comments(file, text)) {
        for (const pointer of pointers(comment)) {
          const line = text.slice(0, pos + comment.indexOf(pointer)).split('\n').length;
          if (!resolves(file, pointer)) dead.push(`${file}:${line}: ${pointer}`);
        }
      }
    }
    expect(dead).toEqual([]);
  });
});
