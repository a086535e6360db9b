// Checks the floors of packages/server/src (issue 42, point 3): no file outside `http/` imports
// from `http/` (the domain throws its errors, `http/` renders them), and no domain folder imports
// from `ops/` (nor `contract/`, nor a file at the top of src/ such as errors.ts and tracing.ts, which
// the domain builds on) — type imports included, tests included. The composition root (main.ts,
// assemble.ts, cli.ts and their tests) is the one place that wires the floors together.
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
  // What the domain builds on: the spec and its validators.
  'contract',
];
/** The composition root: wires http/, ops/ and the domain together, so it may import any of them. */
export const ROOTS = ['main.ts', 'main.system.test.ts', 'assemble.ts', 'assemble.integration.test.ts', 'cli.ts'];

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

export function checkFile(file: string, text: string): string[] {
  const faults: string[] = [];
  for (const { fileName, pos } of ts.preProcessFile(text, true, true).importedFiles) {
    const imported = target(file, fileName);
    const why = imported === undefined ? undefined : fault(file, imported);
    if (why !== undefined) {
      const line = text.slice(0, pos).split('\n').length;
      faults.push(`packages/server/src/${file}:${line}: imports ${fileName} — ${why}`);
    }
  }
  return faults;
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
  const files = globSync('**/*.ts', { cwd: src }).map((f) => f.split(sep).join('/'));
  const faults = files.sort().flatMap((file) => checkFile(file, readFileSync(join(src, file), 'utf8')));
  const built = ERROR_ROOTS.flatMap((dir) => globSync(`${dir}/**/*.ts`, { cwd: root }))
    .map((f) => f.split(sep).join('/'))
    .sort();
  const statuses = built.flatMap((file) => checkErrorStatuses(file, readFileSync(join(root, file), 'utf8')));
  if (faults.length > 0) {
    console.error(`Layers (scripts/check-layers.ts), ${faults.length} imports at fault:\n  ${faults.join('\n  ')}`);
  }
  if (statuses.length > 0) {
    console.error(
      `Errors (scripts/check-layers.ts), ${statuses.length} statuses written by hand:\n  ${statuses.join('\n  ')}`,
    );
  }
  if (faults.length > 0 || statuses.length > 0) process.exit(1);
  console.log(`Layers: ${files.length} files of packages/server/src, no floor reaches up`);
  console.log(`Errors: ${built.length} files of ${ERROR_ROOTS.join(' and ')}, every status from ERRORS`);
}
