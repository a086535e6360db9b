// Builds the console (vite build into dist/) when dist/ is missing or older than its sources, so
// that `pnpm start` on a fresh clone serves /console without a separate step, and a start after
// that costs a few stat calls. The server's `pnpm build` runs it too, then copies dist/.
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('.', import.meta.url));
const built = join(root, 'dist', 'index.html');

function newest(path: string): number {
  const stat = statSync(path);
  if (!stat.isDirectory()) return stat.mtimeMs;
  return Math.max(stat.mtimeMs, ...readdirSync(path).map((name) => newest(join(path, name))));
}

/** True when the console was (re)built, false when it was up to date. Throws when the build fails. */
export async function buildConsoleIfStale(): Promise<boolean> {
  const sources = ['src', 'index.html', 'vite.config.ts', 'package.json', '../client/src'].map((p) => join(root, p));
  if (existsSync(built) && statSync(built).mtimeMs >= Math.max(...sources.map(newest))) return false;
  process.stderr.write('console: building packages/console into its dist/ (once per change)\n');
  // Loaded only when a build is due: a start with the console up to date never loads Vite.
  const { build } = await import('vite');
  await build({ root, configFile: join(root, 'vite.config.ts') });
  return true;
}

if (process.argv[1] === fileURLToPath(import.meta.url)) {
  try {
    await buildConsoleIfStale();
  } catch (error) {
    // The API does not need the console: say so, and let the server start.
    process.stderr.write(`console: ${(error as Error).message}; /console will say how to build it\n`);
  }
}
