// Test helper: the server and the CLI as an operator runs them, as child processes.
import { type ChildProcessWithoutNullStreams, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { builtEntry } from './build.ts';
import { copyMigratedPglite } from './templates.ts';

const MAIN = fileURLToPath(new URL('../main.ts', import.meta.url));
const CLI = fileURLToPath(new URL('../cli.ts', import.meta.url));

/** The Node flags a server is started with (`pnpm start`, the release's `bin/user-accounts serve`). */
const SERVER_FLAGS = ['--max-semi-space-size=16'];

export interface Running {
  child: ChildProcessWithoutNullStreams;
  baseUrl: string;
  stdout: () => string;
  stderr: () => string;
  exited: Promise<number | null>;
  /** Resolves when the server listens; rejects when it exits first. */
  ready: Promise<void>;
}

/** Tracks what the tests started, so that one call cleans everything up. */
export function processes() {
  const children: ChildProcessWithoutNullStreams[] = [];
  const dirs: string[] = [];
  const env = (extra: Record<string, string>) => ({
    PATH: process.env.PATH ?? '',
    PORT: '0',
    LOG_LEVEL: 'info',
    // The run's compile cache (scripts/test-templates.ts): a start after the first is quicker.
    ...(process.env.NODE_COMPILE_CACHE ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE } : {}),
    ...extra,
  });

  return {
    /**
     * The server with these environment variables (and nothing else of ours): the run's build of
     * src/main.ts (testing/build.ts), src/main.ts itself when the run has none, or `script`.
     */
    server(vars: Record<string, string>, script?: string): Running {
      // As operators start it (`bin/user-accounts serve`, which the systemd unit and the container
      // run): V8's young generation is otherwise sized from the machine's memory, and tests of what
      // a server holds (cli-import's export) would measure that.
      const child = spawn(process.execPath, [...SERVER_FLAGS, script ?? builtEntry('main.js') ?? MAIN], {
        env: env(vars),
      });
      children.push(child);
      let stdout = '';
      let stderr = '';
      const running = {
        child,
        baseUrl: '',
        stdout: () => stdout,
        stderr: () => stderr,
        // 'close', not 'exit': the last lines (written in a batch at exit) may still be in the pipe.
        exited: new Promise<number | null>((resolve) => child.on('close', (code) => resolve(code))),
      } as Running;
      running.ready = new Promise<void>((resolve, reject) => {
        child.stdout.on('data', (chunk: Buffer) => {
          stdout += chunk.toString();
          if (running.baseUrl) return; // a busy server logs a lot: stop looking once it listens
          const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(stdout);
          if (match) {
            running.baseUrl = match[1]!;
            resolve();
          }
        });
        child.stderr.on('data', (chunk: Buffer) => {
          stderr += chunk.toString();
        });
        void running.exited.then((code) => reject(new Error(`exited with ${code}: ${stderr}`)));
      });
      running.ready.catch(() => {}); // awaited only by the tests that expect a start
      return running;
    },
    /**
     * `node src/cli.ts ARGS` (the run's build of it, as server() starts; or `script`); resolves with its exit code and output. A CLI still running after
     * `timeoutMs` is killed (code null, and stderr says so): one left waiting on a database that
     * went away outlived a clean-clone CI run by 23 minutes. cleanup() kills any still running.
     */
    cli(
      args: string[],
      vars: Record<string, string>,
      timeoutMs = 300_000,
      script?: string,
    ): Promise<{ code: number | null; stdout: string; stderr: string }> {
      const child = spawn(process.execPath, [script ?? builtEntry('cli.js') ?? CLI, ...args], { env: env(vars) });
      children.push(child);
      let stdout = '';
      let stderr = '';
      const timer = setTimeout(() => {
        stderr += `\n[testing] cli ${args.slice(0, 2).join(' ')} killed after ${timeoutMs} ms\n`;
        child.kill('SIGKILL');
      }, timeoutMs);
      child.on('exit', () => clearTimeout(timer));
      child.stdout.on('data', (chunk: Buffer) => {
        stdout += chunk.toString();
      });
      child.stderr.on('data', (chunk: Buffer) => {
        stderr += chunk.toString();
      });
      // 'close', not 'exit': the output may still be in the pipes when the process has exited.
      return new Promise((resolve) => child.on('close', (code) => resolve({ code, stdout, stderr })));
    },
    dataDir(): string {
      const dir = mkdtempSync(join(tmpdir(), 'ua-proc-'));
      dirs.push(dir);
      return dir;
    },
    /**
     * A folder holding this run's migrated embedded database (testing/templates.ts), as a server's
     * first start leaves it before its own first writes (it still mints its dev token): for tests
     * whose subject is not the first start, which costs about 2.5 s of CPU (initdb, then every
     * migration) against 1 s for a start on a migrated folder. Empty without the run's templates.
     */
    async migratedDataDir(): Promise<string> {
      const dir = mkdtempSync(join(tmpdir(), 'ua-proc-'));
      dirs.push(dir);
      await copyMigratedPglite(dir);
      return dir;
    },
    cleanup(): void {
      for (const child of children) child.kill('SIGKILL');
      for (const dir of dirs) rmSync(dir, { recursive: true, force: true });
    },
  };
}
