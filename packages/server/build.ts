// `pnpm build`: the server and its CLI as single ES modules in dist/, with the contract and the
// migrations beside them, to run with plain `node dist/main.js`. Bundling is not only packaging:
// Node re-reads drizzle-orm's 180 KB package.json for each of its modules it resolves, which cost
// about 160 MB of heap and 0.4 s at every start (measured); the bundle resolves nothing.
// The packages left external are those the bundle imports at run time: buildServer() answers
// them (from esbuild's metafile), and `./pnpmw release` ships exactly those (release.ts).
import { cpSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { isBuiltin } from 'node:module';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { parse } from 'yaml';
import { buildConsoleIfStale } from '../console/build-if-stale.ts';

const root = fileURLToPath(new URL('.', import.meta.url));
/** The release's version: the root package.json's, the one place it is written (src/version.ts). */
export const VERSION = (JSON.parse(readFileSync(`${root}../../package.json`, 'utf8')) as { version: string }).version;

/** Builds into `out`; answers the packages the bundle imports from node_modules at run time. */
export async function buildServer(out: string): Promise<string[]> {
  rmSync(out, { recursive: true, force: true });
  mkdirSync(out, { recursive: true });
  const { metafile } = await build({
    // costly-check: the process the costly lane's password checks run in (passwords/costly-check.ts).
    // site-schema-worker: the schema worker (accounts/schema-checks.ts), started from its own file beside main.js.
    entryPoints: {
      main: `${root}src/main.ts`,
      cli: `${root}src/cli.ts`,
      'costly-check': `${root}src/passwords/costly-check-child.ts`,
      'site-schema-worker': `${root}src/accounts/site-schema-worker.ts`,
    },
    outdir: out,
    bundle: true,
    splitting: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    // Loaded from node_modules at run time: native addons, and a WASM build that finds its files
    // beside its own module.
    // (@scalar/api-reference is not one: its browser build is copied beside the bundle, below.)
    external: ['@node-rs/argon2', '@node-rs/bcrypt', '@electric-sql/pglite'],
    define: { __USER_ACCOUNTS_VERSION__: JSON.stringify(VERSION) },
    metafile: true,
    // Some bundled CommonJS dependencies call require() for Node's own modules.
    banner: {
      js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
    },
    sourcemap: true,
    logLevel: 'warning',
  });
  cpSync(`${root}../../spec/openapi.yaml`, `${out}/openapi.yaml`);
  // The server reads the contract as JSON once built (resources.ts, SPEC_JSON_PATH).
  writeFileSync(`${out}/openapi.json`, JSON.stringify(parse(readFileSync(`${root}../../spec/openapi.yaml`, 'utf8'))));
  cpSync(`${root}drizzle`, `${out}/drizzle`, { recursive: true });
  cpSync(
    fileURLToPath(new URL('browser/standalone.js', import.meta.resolve('@scalar/api-reference'))),
    `${out}/scalar.js`,
  );
  // The console (/console): Vite's build of packages/console, made first when missing or stale.
  await buildConsoleIfStale();
  cpSync(`${root}../console/dist`, `${out}/console`, { recursive: true });
  const imported = Object.values(metafile.outputs).flatMap((o) =>
    o.imports.filter((i) => i.external).map((i) => i.path),
  );
  const packages = imported
    .filter((path) => !isBuiltin(path))
    .map((path) =>
      path
        .split('/')
        .slice(0, path.startsWith('@') ? 2 : 1)
        .join('/'),
    );
  return [...new Set(packages)].sort();
}

if (import.meta.main) {
  const out = process.argv[2] ?? `${root}dist`;
  const packages = await buildServer(out);
  process.stdout.write(
    `built ${out}/main.js, ${out}/cli.js and ${out}/costly-check.js (${VERSION}); from node_modules: ${packages.join(', ')}\n`,
  );
}
