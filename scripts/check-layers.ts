// Checks the floors of packages/server/src (issue 42, point 3; issue 58, point 2), type imports
// and tests included:
// - no file outside `http/` imports from `http/` (the domain throws its errors, `http/` renders
//   them), and no domain folder imports from `ops/` (nor `contract/`, nor a file at the top of
//   src/ such as errors.ts and tracing.ts, which the domain builds on);
// - the floors' order (FLOORS, top to bottom): a folder imports only folders of floors below its
//   own, or its peers of the same floor;
// - no import cycle between folders (a depth-first walk over the folders' imports, which prints
//   the cycle and an import of each of its steps).
// The composition root (main.ts, assemble.ts, cli.ts and their tests) is the one place that
// wires the floors together; it is a floor of its own, below testing/ (the tests' harness, which
// starts it) and above every other. A test's import of testing/ or of the root is no edge: every
// floor's tests may use the harness and start a whole server.
// Every import form is read: `import … from`, `import type`, `export … from`, `import()` (also
// in a type), `require()`; TypeScript's preProcessFile scans the text without compiling
// it (comments and strings are not imports). Run by `./pnpmw test` before the tests, and by
// `./pnpmw lint`; exits 1 naming each line at fault. Also (issue 58, point 3): no `new ApiError(`
// with a hand-written status outside packages/server/src/errors.ts, in the server or the mock.
import { globSync, readFileSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';

const root = fileURLToPath(new URL('..', import.meta.url));
const serverDir = join(root, 'packages/server');
const src = join(serverDir, 'src');

/** Folders of the domain: they may use `db/` and each other, never `ops/` (nor `http/`). */
export const DOMAIN = [
  // Below the domains: the write layer and the deployment's keys, which every domain uses.
  'kernel',
  'accounts',
  'factors',
  'passwords',
  'auth',
  'limits',
  'events',
  'db',
  // Added by the features' round: the rule holds for them from their first file.
  'sessions',
  'identities',
  'orgs',
  'providers',
  'messages',
  'sso',
  // What the domain builds on: the spec and its validators.
  'contract',
];
/** The composition root: wires http/, ops/ and the domain together, so it may import any of them. */
export const ROOTS = ['main.ts', 'main.system.test.ts', 'assemble.ts', 'assemble.integration.test.ts', 'cli.ts'];

/** The floor of the composition root (ROOTS) in FLOORS and in a printed cycle. */
export const ROOT = '(the composition root)';
/** The floor of the other files at the top of src/: errors.ts, tracing.ts, resources.ts, version.ts. */
export const TOP = '(src/*.ts)';

/**
 * The floors, top to bottom: a folder of packages/server/src imports only folders of the floors
 * below its own, or its peers on the same floor (never in a cycle), type imports and tests
 * included. Each new folder takes its place here (and its row in docs/development.md's map).
 */
export const FLOORS: readonly (readonly string[])[] = [
  // The tests' harness: builds, processes, database templates; it starts the root's servers.
  ['testing'],
  // config → logger, database, tokens, limits, hasher, app; the server, the CLI.
  [ROOT],
  // Requests: parse → domain → render.
  ['http'],
  // The operator's commands and the chores; the environment read once.
  ['ops', 'config'],
  // Enterprise sign-in per organization (issue 61): above providers, whose OpenID Connect machinery
  // its OIDC connections reuse, and the identities, sessions and memberships its sign-ins make.
  ['sso'],
  // A site's sign-in providers (issue 59): above identities, whose links its callback will make.
  ['providers'],
  // The domains that own a flow across accounts: sign-in with another provider, sessions, organizations.
  ['identities'],
  ['sessions', 'orgs'],
  // Accounts; what a change of one means to the domains above is their hooks (kernel/account-hooks.ts).
  ['accounts'],
  // Messages (issue 60): senders, templates, the message outbox and its worker; below accounts, whose tickets they carry.
  ['factors', 'passwords', 'auth', 'events', 'messages'],
  // What every domain builds on: the unit of work, its outbox, audit rows, ids, reach, keys, hooks.
  ['kernel'],
  ['limits'],
  ['db', 'contract'],
  [TOP],
];

const SELF = '@user-accounts/server';
const exportsMap = (
  JSON.parse(readFileSync(join(serverDir, 'package.json'), 'utf8')) as { exports: Record<string, string> }
).exports;

/** The imported file, relative to src/ with `/`, or undefined for a package or a file outside src/. */
export function target(fromFile: string, specifier: string): string | undefined {
  let absolute: string | undefined;
  if (specifier.startsWith('.')) {
    absolute = normalize(join(dirname(join(src, fromFile)), specifier));
  } else if (specifier === SELF || specifier.startsWith(`${SELF}/`)) {
    // The package's own exports map (`./http/*` → `./src/http/*.ts`).
    const subpath = `.${specifier.slice(SELF.length)}`;
    for (const [key, value] of Object.entries(exportsMap)) {
      const star = key.indexOf('*');
      if (star === -1 ? key === subpath : subpath.startsWith(key.slice(0, star))) {
        const rest = star === -1 ? '' : subpath.slice(star);
        absolute = join(serverDir, star === -1 ? value : value.replace('*', rest));
        break;
      }
    }
  }
  if (absolute === undefined) return undefined;
  const path = relative(src, absolute);
  return path.startsWith('..') ? undefined : path.split(sep).join('/');
}

const floorOf = (path: string) => (path.includes('/') ? path.slice(0, path.indexOf('/')) : '');

/** Why `file` may not import `imported` (both relative to src/), or undefined when it may. */
export function fault(file: string, imported: string): string | undefined {
  const from = floorOf(file);
  const to = floorOf(imported);
  if (to === 'http' && from !== 'http' && !ROOTS.includes(file)) {
    return 'only http/ (and the composition root) imports http/: take the domain module instead';
  }
  if (to === 'ops' && DOMAIN.includes(from)) {
    return `${from}/ is a domain folder: it never imports ops/`;
  }
  // A file at the top of src/ other than the root (errors.ts, tracing.ts) is one the domain builds on.
  if (to === 'ops' && from === '' && !ROOTS.includes(file)) {
    return `${file} is shared by the domain: it never imports ops/`;
  }
  return undefined;
}

/** Each import of ours in `text`: the file it names (relative to src/), as written, and its line. */
function importsOf(file: string, text: string): { imported: string; specifier: string; line: number }[] {
  return ts.preProcessFile(text, true, true).importedFiles.flatMap(({ fileName, pos }) => {
    const imported = target(file, fileName);
    return imported === undefined
      ? []
      : [{ imported, specifier: fileName, line: text.slice(0, pos).split('\n').length }];
  });
}

export function checkFile(file: string, text: string): string[] {
  const faults: string[] = [];
  for (const { imported, specifier, line } of importsOf(file, text)) {
    const why = fault(file, imported);
    if (why !== undefined) faults.push(`packages/server/src/${file}:${line}: imports ${specifier} — ${why}`);
  }
  return faults;
}

/** The floor a file is on: its folder, the root, or the top of src/. */
export const folderOf = (file: string) => (ROOTS.includes(file) ? ROOT : floorOf(file) || TOP);
const shown = (folder: string) => (folder === ROOT || folder === TOP ? folder : `${folder}/`);
/** A test's file: `*.test.ts`, or a folder's `testing.ts` (its tests' helpers, imported by tests only). */
const isTest = (file: string) => file.endsWith('.test.ts') || file.split('/').pop() === 'testing.ts';
const floorIndex = new Map(FLOORS.flatMap((floor, index) => floor.map((folder) => [folder, index] as const)));

/**
 * The floors' order and the cycles between folders, over every file of src/ (relative path →
 * text): an import of a folder above, a folder on no floor, and each cycle, with an import of
 * each of its steps.
 */
export function checkFloors(files: ReadonlyMap<string, string>): string[] {
  const faults: string[] = [];
  const unplaced = new Set<string>();
  /** folder → folder → the first import that makes the edge, as `file:line imports specifier`. */
  const edges = new Map<string, Map<string, string>>();
  for (const [file, text] of [...files].sort(([a], [b]) => a.localeCompare(b))) {
    const from = folderOf(file);
    if (!floorIndex.has(from)) unplaced.add(from);
    for (const { imported, specifier, line } of importsOf(file, text)) {
      const to = folderOf(imported);
      if (to === from || ((to === 'testing' || to === ROOT) && isTest(file))) continue;
      const where = `packages/server/src/${file}:${line}: imports ${specifier}`;
      const [above, below] = [floorIndex.get(to), floorIndex.get(from)];
      if (above !== undefined && below !== undefined && above < below)
        faults.push(`${where} — ${shown(to)} is on a floor above ${shown(from)} (FLOORS, scripts/check-layers.ts)`);
      const out = edges.get(from) ?? edges.set(from, new Map()).get(from)!;
      if (!out.has(to)) out.set(to, where);
    }
  }
  for (const folder of [...unplaced].sort())
    faults.push(
      `packages/server/src/${folder}/ is on no floor: give it its place in FLOORS (scripts/check-layers.ts) and its row in docs/development.md's map`,
    );
  for (const cycle of cyclesOf(edges)) {
    const steps = cycle.slice(0, -1).map((from, i) => edges.get(from)!.get(cycle[i + 1]!)!);
    faults.push(`folders import each other in a cycle: ${cycle.map(shown).join(' → ')}\n    ${steps.join('\n    ')}`);
  }
  return faults;
}

/**
 * The cycles a depth-first walk finds (one a back edge), each as its folders from the first to
 * the first again, in a stable order.
 */
export function cyclesOf(edges: ReadonlyMap<string, ReadonlyMap<string, unknown>>): string[][] {
  const cycles: string[][] = [];
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const walk = (folder: string) => {
    state.set(folder, 'open');
    path.push(folder);
    for (const next of [...(edges.get(folder)?.keys() ?? [])].sort()) {
      if (state.get(next) === 'open') cycles.push([...path.slice(path.indexOf(next)), next]);
      else if (state.get(next) === undefined) walk(next);
    }
    path.pop();
    state.set(folder, 'done');
  };
  for (const folder of [...edges.keys()].sort()) if (state.get(folder) === undefined) walk(folder);
  return cycles;
}

/** The one file that writes an error's HTTP status: the errors' table (issue 58, point 3). */
export const ERRORS_FILE = 'packages/server/src/errors.ts';

/**
 * `new ApiError(<status>, …)` outside the errors' table (`file` relative to the repository): a
 * status is the code's, written once in ERRORS; a number as the first argument is one written
 * again by hand. Read from the syntax tree, so a comment or a string naming one is no fault.
 */
export function checkErrorStatuses(file: string, text: string): string[] {
  if (file === ERRORS_FILE || !text.includes('ApiError')) return [];
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const faults: string[] = [];
  const isNumber = (node: ts.Expression): boolean =>
    ts.isNumericLiteral(node) ||
    (ts.isPrefixUnaryExpression(node) && ts.isNumericLiteral(node.operand)) ||
    ((ts.isParenthesizedExpression(node) || ts.isAsExpression(node) || ts.isSatisfiesExpression(node)) &&
      isNumber(node.expression));
  const visit = (node: ts.Node): void => {
    if (ts.isNewExpression(node)) {
      const callee = node.expression;
      const name = ts.isPropertyAccessExpression(callee) ? callee.name.text : callee.getText(source);
      const first = node.arguments?.[0];
      if (name === 'ApiError' && first !== undefined && isNumber(first)) {
        const line = source.getLineAndCharacterOfPosition(node.getStart(source)).line + 1;
        faults.push(
          `${file}:${line}: new ApiError(${first.getText(source)}, …) — a status is written once, in ERRORS (${ERRORS_FILE}): new ApiError(code, detail) or the code's factory`,
        );
      }
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return faults;
}

/** Where errors are built: the server's source and the mock's, tests included. */
const ERROR_ROOTS = ['packages/server/src', 'packages/mock/src'];

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const files = new Map(
    globSync('**/*.ts', { cwd: src })
      .map((f) => f.split(sep).join('/'))
      .sort()
      .map((file) => [file, readFileSync(join(src, file), 'utf8')] as const),
  );
  const faults = [...[...files].flatMap(([file, text]) => checkFile(file, text)), ...checkFloors(files)];
  const built = ERROR_ROOTS.flatMap((dir) => globSync(`${dir}/**/*.ts`, { cwd: root }))
    .map((f) => f.split(sep).join('/'))
    .sort();
  const statuses = built.flatMap((file) => checkErrorStatuses(file, readFileSync(join(root, file), 'utf8')));
  if (faults.length > 0) {
    console.error(`Layers (scripts/check-layers.ts), ${faults.length} faults:\n  ${faults.join('\n  ')}`);
  }
  if (statuses.length > 0) {
    console.error(
      `Errors (scripts/check-layers.ts), ${statuses.length} statuses written by hand:\n  ${statuses.join('\n  ')}`,
    );
  }
  if (faults.length > 0 || statuses.length > 0) process.exit(1);
  console.log(`Layers: ${files.size} files of packages/server/src, no floor reaches up, no folder cycle`);
  console.log(`Errors: ${built.length} files of ${ERROR_ROOTS.join(' and ')}, every status from ERRORS`);
}
