// vitest's global setup (vitest.config.ts): a folder for this run's migrated templates, which the
// first test that needs a database makes (packages/server/src/testing/templates.ts); removed,
// with the PostgreSQL template, when the run ends. Every project inherits it: the first to start
// makes the folder, and only that one removes it.
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startTestBuild, stopTestBuild, TEST_BUILDS } from '../packages/server/src/testing/build.ts';
import { dropPostgresTemplate } from '../packages/server/src/testing/templates.ts';

export default function setup() {
  if (process.env.TEST_TEMPLATES_DIR) return;
  const dir = mkdtempSync(join(tmpdir(), 'ua-templates-'));
  // Workers are started after the global setup: they inherit it.
  process.env.TEST_TEMPLATES_DIR = dir;
  // The servers and CLIs the tests start (about 200 a run) compile the same modules: Node's
  // compile cache (https://nodejs.org/api/module.html#module-compile-cache) keeps their compiled
  // code for the run, so that each start after the first skips most of it.
  process.env.NODE_COMPILE_CACHE ??= join(dir, 'compile-cache');
  // The server and CLI those tests start, built once for the run (testing/build.ts): each start
  // then loads one module rather than 984. Built while the first tiers run; the first process
  // started waits for it. TEST_SERVER_SOURCES=1 keeps the sources.
  let build: ReturnType<typeof startTestBuild> | undefined;
  let buildDir: string | undefined;
  if (!process.env.TEST_SERVER_SOURCES && !process.env.TEST_SERVER_BUILD) {
    mkdirSync(TEST_BUILDS, { recursive: true });
    buildDir = mkdtempSync(join(TEST_BUILDS, 'run-'));
    build = startTestBuild(buildDir);
    process.env.TEST_SERVER_BUILD = buildDir;
  }
  return async () => {
    // A run that ended before its build (one quick file): stopped, esbuild with it, before its folder goes.
    if (build !== undefined) await stopTestBuild(build);
    if (buildDir !== undefined) {
      rmSync(buildDir, { recursive: true, force: true });
      delete process.env.TEST_SERVER_BUILD;
    }
    const url = process.env.TEST_DATABASE_URL;
    if (url) await dropPostgresTemplate(url, dir).catch(() => {});
    rmSync(dir, { recursive: true, force: true });
    delete process.env.TEST_TEMPLATES_DIR;
    if (process.env.NODE_COMPILE_CACHE === join(dir, 'compile-cache')) delete process.env.NODE_COMPILE_CACHE;
  };
}
