// The client's build (`pnpm run build`, and `prepack` before `pnpm pack`): dist/ compiled aside,
// then put in place of the old one by two renames, so that dist/ is never missing while others
// read it. It was deleted first and compiled in place, and a test run packs the client (the
// release and registry tests) while other test files build the example page from dist/: one of
// those found it gone ("Could not load ../client/dist/index.js").
import { spawnSync } from 'node:child_process';
import { existsSync, renameSync, rmSync } from 'node:fs';
import { createRequire } from 'node:module';

const next = `dist.next-${process.pid}`;
const old = `dist.old-${process.pid}`;
const tsc = createRequire(import.meta.url).resolve('typescript/bin/tsc');
const built = spawnSync(process.execPath, [tsc, '-p', 'tsconfig.build.json', '--outDir', next], { stdio: 'inherit' });
if (built.status !== 0) {
  rmSync(next, { recursive: true, force: true });
  process.exit(built.status ?? 1);
}
if (existsSync('dist')) renameSync('dist', old);
renameSync(next, 'dist');
rmSync(old, { recursive: true, force: true });
