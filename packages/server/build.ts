// `pnpm build`: the server and its CLI as single ES modules in dist/, with the contract and the
// migrations beside them, to run with plain `node dist/main.js`. Bundling is not only packaging:
// Node re-reads drizzle-orm's 180 KB package.json for each of its modules it resolves, which cost
// about 160 MB of heap and 0.4 s at every start (measured); the bundle resolves nothing.
import { cpSync, mkdirSync, rmSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { buildConsoleIfStale } from '../console/build-if-stale.ts';

const root = fileURLToPath(new URL('.', import.meta.url));
const out = process.argv[2] ?? `${root}dist`;

rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });
await build({
  entryPoints: { main: `${root}src/main.ts`, cli: `${root}src/cli.ts` },
  outdir: out,
  bundle: true,
  splitting: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  // Loaded from node_modules at run time: native addons, and a WASM build that finds its files
  // beside its own module.
  external: ['@node-rs/argon2', '@node-rs/bcrypt', '@electric-sql/pglite', '@scalar/api-reference'],
  // Some bundled CommonJS dependencies call require() for Node's own modules.
  banner: {
    js: "import { createRequire as __createRequire } from 'node:module'; const require = __createRequire(import.meta.url);",
  },
  sourcemap: true,
  logLevel: 'warning',
});
cpSync(`${root}../../spec/openapi.yaml`, `${out}/openapi.yaml`);
cpSync(`${root}drizzle`, `${out}/drizzle`, { recursive: true });
cpSync(
  fileURLToPath(new URL('browser/standalone.js', import.meta.resolve('@scalar/api-reference'))),
  `${out}/scalar.js`,
);
// The console (/console): Vite's build of packages/console, made first when missing or stale.
await buildConsoleIfStale();
cpSync(`${root}../console/dist`, `${out}/console`, { recursive: true });
process.stdout.write(`built ${out}/main.js and ${out}/cli.js\n`);
