// The run's build of the server and CLI (build.ts: esbuild's single modules), which the system
// tests' processes start rather than src/main.ts and src/cli.ts. Loading the sources costs every
// start about 1.5 s and 150 MB more than the bundle (984 modules resolved, drizzle-orm's 180 KB
// package.json re-read for each of its 108): `cli token list` 2.1 s from src, 0.65 s built. The
// bundle is what a release ships (release.ts), built from this checkout's sources when the run
// starts. TEST_SERVER_SOURCES=1 starts the sources instead.
import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

const BUILD_SCRIPT = fileURLToPath(new URL('../../build.ts', import.meta.url));
/** Inside packages/server, so that the bundle's external packages (argon2, PGlite) resolve from its node_modules. */
export const TEST_BUILDS = fileURLToPath(new URL('../../.test-build/', import.meta.url));

/**
 * Starts building into `dir` (the global setup, once per run); `dir/status` holds the exit code
 * when done. In a process group of its own, so that stopTestBuild() ends esbuild's service too.
 */
export function startTestBuild(dir: string): ChildProcess {
  mkdirSync(dir, { recursive: true });
  const log = openSync(join(dir, 'build.log'), 'w');
  const child = spawn(process.execPath, [BUILD_SCRIPT, join(dir, 'dist')], {
    stdio: ['ignore', log, log],
    detached: true,
  });
  child.on('exit', (code) => writeFileSync(join(dir, 'status'), String(code)));
  return child;
}

/**
 * Stops a build still running (a run that ended first, as one quick file's does), and resolves
 * once it has exited (its `status` written), so that its folder can go. The whole group is
 * killed: esbuild bundles in a process of its own (its service), which otherwise finished the
 * bundle after its parent's death and wrote it into the removed folder.
 */
export async function stopTestBuild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return;
  const exited = new Promise((resolve) => child.once('exit', resolve));
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    child.kill('SIGKILL');
  }
  await exited;
}

const pause = new Int32Array(new SharedArrayBuffer(4));

/**
 * The built entry point `name` (main.js, cli.js) of this run, once the build is done (waited for
 * here, up to 3 minutes); undefined when the run has no build (a test module run on its own).
 */
export function builtEntry(name: 'main.js' | 'cli.js'): string | undefined {
  const dir = process.env.TEST_SERVER_BUILD;
  if (!dir) return undefined;
  const status = join(dir, 'status');
  const deadline = Date.now() + 180_000;
  while (!existsSync(status)) {
    if (Date.now() > deadline) throw new Error(`the run's server build (${dir}) did not end within 3 minutes`);
    Atomics.wait(pause, 0, 0, 100);
  }
  if (readFileSync(status, 'utf8') !== '0')
    throw new Error(`the run's server build failed:\n${readFileSync(join(dir, 'build.log'), 'utf8')}`);
  return join(dir, 'dist', name);
}
