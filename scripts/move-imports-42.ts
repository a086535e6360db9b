// One-shot codemod for merging code written before issue 42's point 3 (errors and shared shapes
// moved out of http/ and ops/): rewrites each import of a moved name to its new module, splitting
// a statement when only some of its names moved. Idempotent; then `./pnpmw format` (import order,
// line length) and `node scripts/check-layers.ts`. Delete it once every branch of that time is in.
//   node scripts/move-imports-42.ts [FILE...]     (default: every .ts under packages/*/src)
import { existsSync, globSync, readFileSync, writeFileSync } from 'node:fs';
import { dirname, join, normalize, relative, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const src = join(root, 'packages/server/src');
const SELF = '@user-accounts/server/';

/** Old module (relative to packages/server/src) → each moved name's new module; `*`: every other name. */
export const MOVES: Record<string, Record<string, string>> = {
  'http/errors.ts': Object.fromEntries(
    [
      'ErrorCode',
      'FieldError',
      'ApiError',
      'userNotFound',
      'serviceUnavailable',
      'isDatabaseUnavailable',
      'sqlState',
      'describeError',
    ].map((name) => [name, 'errors.ts']),
  ),
  'http/validation.ts': { '*': 'contract/validation.ts' },
  'http/spec.ts': { '*': 'contract/spec.ts' },
  'http/client-address.ts': { '*': 'auth/client-address.ts' },
  'ops/tracing.ts': { traceRequests: 'http/middleware/trace-requests.ts', '*': 'tracing.ts' },
  'http/routes/shared.ts': { toUser: 'accounts/to-user.ts' },
  'http/etag.ts': { IfMatch: 'accounts/conditions.ts' },
  'testing/hono.ts': { silentLogger: 'testing/loggers.ts', arrayLogger: 'testing/loggers.ts', '*': 'http/testing.ts' },
  // Tests that moved to the floor they drive.
  'events/queue.test.ts': { '*': 'http/routes/list-events.test.ts' },
  'factors/relying-party.test.ts': { '*': 'ops/relying-party.test.ts' },
};
/** Files that moved, new → old: a relative import in one may still be written from the old place. */
const MOVED: Record<string, string> = {
  'contract/validation.ts': 'http/validation.ts',
  'contract/spec.ts': 'http/spec.ts',
  'auth/client-address.ts': 'http/client-address.ts',
  'auth/client-address.test.ts': 'http/client-address.test.ts',
  'tracing.ts': 'ops/tracing.ts',
  'http/testing.ts': 'testing/hono.ts',
  'http/routes/list-events.test.ts': 'events/queue.test.ts',
  'ops/relying-party.test.ts': 'factors/relying-party.test.ts',
};

type Style = 'relative' | 'self';
const posix = (path: string) => path.split(sep).join('/');

function resolveFrom(file: string | undefined, specifier: string): [string, Style] | undefined {
  if (specifier.startsWith(SELF)) return [`${specifier.slice(SELF.length)}.ts`, 'self'];
  if (file === undefined || !specifier.startsWith('.')) return undefined;
  const path = posix(relative(src, normalize(join(dirname(join(src, file)), specifier))));
  return path.startsWith('..') ? undefined : [path, 'relative'];
}

function render(file: string | undefined, module: string, style: Style): string {
  if (style === 'self' || file === undefined) return `${SELF}${module.slice(0, -3)}`;
  const path = posix(relative(dirname(join(src, file)), join(src, module)));
  return path.startsWith('.') ? path : `./${path}`;
}

const DECLARATION = /^(import|export)(\s+type)?\s*\{([^}]*)\}\s*from\s*'([^']+)';/gm;
const OTHER = /((?:from|import\(|import)\s*)'([^']+)'/g;
const bare = (name: string) =>
  name
    .trim()
    .replace(/^type\s+/, '')
    .split(/\s+as\s+/)[0]!
    .trim();

export function rewrite(path: string, text: string): string {
  const inServer = path.startsWith(src + sep);
  const file = inServer ? posix(relative(src, path)) : undefined;
  const old = file === undefined ? undefined : (MOVED[file] ?? file);
  const resolve = (specifier: string) => {
    const here = resolveFrom(file, specifier);
    if (here === undefined || old === file || existsSync(join(src, here[0]))) return here;
    return resolveFrom(old, specifier);
  };

  const declarations = text.replace(
    DECLARATION,
    (whole, keyword: string, type = '', names: string, specifier: string) => {
      const resolved = resolve(specifier);
      if (resolved === undefined) return whole;
      const [module, style] = resolved;
      const moves = MOVES[module] ?? {};
      const groups = new Map<string, string[]>();
      for (const name of names.split(',').filter((n) => n.trim() !== '')) {
        const to = moves[bare(name)] ?? moves['*'] ?? module;
        groups.set(to, [...(groups.get(to) ?? []), name.trim()]);
      }
      if (groups.size === 1 && groups.has(module) && render(file, module, style) === specifier) return whole;
      return [...groups]
        .map(([to, list]) => `${keyword}${type} { ${list.join(', ')} } from '${render(file, to, style)}';`)
        .join('\n');
    },
  );

  // Side effects, namespaces, defaults, import(): whole modules only.
  let out = '';
  let last = 0;
  const other = (chunk: string) =>
    chunk.replace(OTHER, (whole, prefix: string, specifier: string) => {
      const resolved = resolve(specifier);
      if (resolved === undefined) return whole;
      const to = MOVES[resolved[0]]?.['*'] ?? resolved[0];
      const written = render(file, to, resolved[1]);
      return written === specifier ? whole : `${prefix}'${written}'`;
    });
  for (const match of declarations.matchAll(DECLARATION)) {
    out += other(declarations.slice(last, match.index)) + match[0];
    last = match.index + match[0].length;
  }
  return merged(out + other(declarations.slice(last)));
}

/** Two statements of the same kind from the same module become one. */
function merged(text: string): string {
  const byKey = new Map<string, RegExpExecArray[]>();
  for (const match of text.matchAll(DECLARATION)) {
    const key = `${match[1]}|${match[2] ?? ''}|${match[4]}`;
    byKey.set(key, [...(byKey.get(key) ?? []), match as RegExpExecArray]);
  }
  let out = text;
  for (const matches of byKey.values()) {
    if (matches.length < 2) continue;
    const names = [...new Set(matches.flatMap((m) => m[3]!.split(',').map((n) => n.trim()))).values()].filter(
      (n) => n !== '',
    );
    const [first, ...rest] = matches;
    out = out.replace(first![0], `${first![1]}${first![2] ?? ''} { ${names.join(', ')} } from '${first![4]}';`);
    for (const m of rest) out = out.replace(`${m[0]}\n`, '');
  }
  return out;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  const files =
    process.argv.length > 2
      ? process.argv.slice(2).map((f) => join(process.cwd(), f))
      : globSync('packages/*/src/**/*.ts', { cwd: root, exclude: (p) => p.includes('node_modules') }).map((f) =>
          join(root, f),
        );
  for (const path of files) {
    const text = readFileSync(path, 'utf8');
    const next = rewrite(path, text);
    if (next !== text) {
      writeFileSync(path, next);
      console.log(`rewrote ${relative(root, path)}`);
    }
  }
}
