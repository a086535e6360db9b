// Four tiers (issue 34, point 5), all run by `./pnpmw test`, each by `./pnpmw test:<tier>`:
//   unit         no database, no process of ours, no browser; a fake clock where time matters.
//                The developer's loop: under a minute.
//   integration  server modules against a real database (PGlite in the test, or PostgreSQL).
//   contract     the HTTP contract: the suite on its four targets (PGlite, PostgreSQL, prism
//                proxy, the mock) and servers made for one question (CORS, verify, our faults).
//   system       processes of ours, a browser, a cluster, a private PostgreSQL, the README, deploy.
// A file's tier follows from its name (issue 58, point 5; the table is scripts/test-tiers.ts):
//   *.integration.test.ts  integration
//   *.system.test.ts       system, two at a time
//   *.timed.test.ts        system-alone: one at a time, beside the system tier at a raised priority
//   *.alone.test.ts        system-alone too, after the timed ones (it times nothing)
//   *.last.test.ts         system-last: one at a time, after everything
//   any other *.test.ts    contract under packages/contract-tests, unit elsewhere
// so that a new test file needs no edit here. scripts/check-test-tiers.ts (run by `./pnpmw test`)
// fails on a file in none or in two, on a word before `.test.ts` that names no tier, and on a unit
// test that opens a database or starts a process.
import { configDefaults, defineConfig } from 'vitest/config';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { named, TIER_SUFFIXES, type TierSuffix } from './scripts/test-tiers.ts';

const CONTRACT = 'packages/contract-tests/src/**/*.test.ts';
/** Every file with a tier's word in its name: neither unit nor contract. */
const NAMED = named(...(Object.keys(TIER_SUFFIXES) as TierSuffix[]));

/*
 * Why the system files run as they do (the suffixes above):
 *
 * *.system.test.ts start processes of ours (server, CLI, build, pack), a browser, HAProxy or
 * PostgreSQL, or load a database at scale (list-plans: 200,000 accounts). They share nothing (each
 * its own folders, databases and ports) and run two at a time, after the first three tiers.
 *
 * *.timed.test.ts are system tests whose subject is time or latency under load, one at a time: a
 * cluster's failover and "refused within 1 s", outages of a private PostgreSQL, limits shared by
 * servers, the deadline of a costly hash check, a site's schema checks past their deadline and in
 * turns (with two busy loops beside three files at a time, the schema worker's restarts outlived
 * the test's bounds), the console's first screen within a second, and verify's "as long for an
 * unknown email as for a wrong password" (production hashes; three files at a time beside it read
 * 1.11 of its 1.10 once, 2026-11-29). `./pnpmw test` (scripts/run-tests.ts) runs them beside the
 * system tier at a raised scheduling priority where it may, else after everything.
 *
 * *.alone.test.ts are untimed system files the system-alone tier runs after its timed ones, to
 * even out the two processes: it ended about 50 s before the system tier (410 against 459 s,
 * 2026-11-29, 503 s of tests), and the release archive's file (28 s, most of it building the
 * archive) moves 14 s of the system tier's two workers' time to it. They measure no time.
 *
 * *.last.test.ts are timed files with nothing else of the run beside them, after everything: on a
 * machine whose run took 1,076–1,227 s (2026-11-29), noisy-neighbours' victim tests (another
 * site's latency under attack, production hashes; a file beside it on the other core, at the same
 * priority, spoiled its /healthz bound) failed beside the system tier in two clean-clone runs of
 * five, even at the raised priority, and passed alone every time.
 */

/**
 * A system test's time limit, unless it names a longer one (and those name at least 120 s): it
 * starts processes, browsers and fresh databases on a machine the timed tier keeps busy at a
 * higher priority. On a 2-core machine whose run took 1,076 s rather than the usual 480–550 s,
 * a CLI test of the default 30 s (20 s where the run was quicker) and a fresh embedded database's
 * 60 s ran out (2026-11-29). A limit catches a hang; it is no measure of speed, which the tests
 * that are about time assert themselves.
 */
const SYSTEM_TIMEOUT = 120_000;

/**
 * Files side by side: vitest's default on 2 cores is one worker (cores − 1), and those files
 * often wait (on a server's answer, a hash, a database, a template being made), so more at a time
 * take less wall time with the same tests. The first three tiers run three at a time: 195 s alone
 * against 229 s two at a time (2026-11-29, 4,158 tests; the cores were 60–90% busy two at a
 * time in the tiers' first minutes). The system tier runs after them, two at a time, and beside
 * it its files that measure time (*.timed.test.ts), one at a time (scripts/run-tests.ts).
 * TEST_WORKERS sets both figures (1: every file one at a time).
 */
const workers = (fallback: number) => {
  const n = Number(process.env.TEST_WORKERS || fallback);
  if (!Number.isInteger(n) || n < 1) {
    throw new Error(`TEST_WORKERS must be a whole number of 1 or more (got ${process.env.TEST_WORKERS})`);
  }
  return n;
};
const FIRST_WORKERS = workers(3);
const WORKERS = workers(2);

/**
 * The integration and contract tiers' files share their worker's modules, as unit's do (isolate
 * false): re-importing the server, hono, ajv and the spec for each of their ~90 files was 16–17%
 * of those tiers' time. Measured on this 2-core machine with other work beside it, the two tiers
 * alone: 561 s isolated against 357 s shared, 3,027 tests passing in both. Every file still starts
 * its own servers on its own databases; what is shared is code and caches of compiled validators.
 * TEST_ISOLATE=1 gives each file fresh modules again (to rule a leak between files in or out).
 */
const ISOLATE = process.env.TEST_ISOLATE === '1';

/**
 * Seconds the long files of the tiers that run side by side took in a clean-clone run (503 s of
 * tests, 2026-11-29; the default reporter's times, hooks included): each tier starts them first,
 * longest first, so that its workers end together. A clean clone has no vitest cache, and vitest
 * then starts the largest files first whatever they cost: docs-browser began 226 s into the
 * system tier's 287 s (498 s of tests). Files not named here follow, largest first, as before.
 * The timed tiers (one file at a time) keep vitest's order, but for the *.alone.test.ts files,
 * last (a negative measure).
 */
const MEASURED_SECONDS: Record<string, number> = {
  // system
  'contract-tests/src/webhooks.system.test.ts': 98,
  'contract-tests/src/cli.system.test.ts': 94,
  'contract-tests/src/cli-import.system.test.ts': 69,
  'contract-tests/src/docs-browser.system.test.ts': 57,
  'contract-tests/src/client-install.system.test.ts': 52,
  'server/src/main.system.test.ts': 45,
  // measured alone, both databases, on a busy 2-core machine (2026-12-02): not yet a clean-clone figure
  'contract-tests/src/secrets-at-rest.system.test.ts': 40,
  // alone, both databases, on a loaded 2-core machine (2026-12-03)
  'contract-tests/src/messages.system.test.ts': 60,
  'contract-tests/src/messages-replicas.system.test.ts': 35,
  'client/src/pack.system.test.ts': 17,
  'server/src/ops/housekeeping-servers.system.test.ts': 17,
  'contract-tests/src/upgrade.system.test.ts': 15,
  'contract-tests/src/browser-client.system.test.ts': 13,
  'contract-tests/src/passkey-browser.system.test.ts': 11,
  // contract and integration (three at a time)
  'contract-tests/src/sessions.test.ts': 35,
  'contract-tests/src/proxied.test.ts': 29,
  'contract-tests/src/fuzz.test.ts': 27,
  'contract-tests/src/pglite-accounts.test.ts': 23,
  'contract-tests/src/postgres-data.test.ts': 23,
  // 1.06× and 1.05× their pglite-*.test.ts side by side with it (2026-12-02, one pipeline, a machine at load 14–16)
  'contract-tests/src/configured-life.test.ts': 22,
  'contract-tests/src/pglite-life.test.ts': 21,
  'contract-tests/src/body-limit.test.ts': 21,
  'contract-tests/src/pglite-data.test.ts': 20,
  'contract-tests/src/configured-accounts.test.ts': 18,
  'server/src/http/routes/list-events.integration.test.ts': 18,
  'contract-tests/src/postgres-accounts.test.ts': 17,
  'contract-tests/src/failures.test.ts': 16,
  'contract-tests/src/mock-parity.test.ts': 15,
  'server/src/limits/lockout.integration.test.ts': 13,
  'contract-tests/src/postgres-life.test.ts': 11,
  'contract-tests/src/metadata-index.test.ts': 10,
  // unit (three at a time)
};
const measured = (spec: TestSpecification) =>
  spec.moduleId.endsWith('.alone.test.ts')
    ? -1 // system-alone: after its timed files
    : (MEASURED_SECONDS[spec.moduleId.slice(spec.moduleId.lastIndexOf('packages/') + 'packages/'.length)] ?? 0);

/** vitest's order (group, project, then its own), and within a project the measured long files first. */
class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const sorted = await super.sort(files);
    // Each project in vitest's place, then its files by measure; sort is stable, so files of
    // equal measure keep vitest's order.
    const place = new Map<string, number>();
    for (const spec of sorted) if (!place.has(spec.project.name)) place.set(spec.project.name, place.size);
    const at = (spec: TestSpecification) => place.get(spec.project.name)!;
    return sorted.sort((a, b) => at(a) - at(b) || measured(b) - measured(a));
  }
}

export default defineConfig({
  test: {
    testTimeout: 30_000,
    hookTimeout: 120_000,
    // expect.poll waits for what a user would see (a browser's text, a delivery); vitest's 1 s
    // default was too short beside the system tier: the console's search count missed it in a
    // clean-clone run and passed alone. A poll still fails if the thing never appears; bounds on
    // time are asserted where they are meant (the timed files' own figures).
    expect: { poll: { timeout: 10_000 } },
    // This run's migrated databases, copied for each test server (testing/templates.ts).
    globalSetup: ['./scripts/test-templates.ts'],
    pool: 'forks',
    sequence: { sequencer: LongestFirst },
    // One report for the whole run, whichever tiers ran (.ci/run prints its totals).
    // The last lines: totals, and each skipped group with the command that runs it.
    reporters: [
      'default',
      // scripts/run-tests.ts runs three vitest processes, each with a report of its own, then merges them.
      ['json', { outputFile: process.env.TEST_RESULTS || '.vitest/results.json' }],
      './packages/contract-tests/src/reporting/summary.ts',
    ],
    projects: [
      {
        extends: true,
        test: {
          name: 'unit',
          maxWorkers: FIRST_WORKERS,
          // Files share a worker's modules: importing hono, ajv and the spec once per file was
          // two thirds of the tier's time (about 45 s against 15 s here). Tests that touch the
          // clock or the umask put them back.
          isolate: false,
          include: ['packages/*/src/**/*.test.ts'],
          exclude: [...configDefaults.exclude, CONTRACT, ...NAMED],
        },
      },
      {
        extends: true,
        test: { name: 'integration', include: named('integration'), maxWorkers: FIRST_WORKERS, isolate: ISOLATE },
      },
      {
        extends: true,
        test: {
          name: 'contract',
          include: [CONTRACT],
          exclude: [...configDefaults.exclude, ...NAMED],
          maxWorkers: FIRST_WORKERS,
          isolate: ISOLATE,
        },
      },
      {
        extends: true,
        // Two at a time, now that they start a build rather than the sources: the tier alone took
        // 490 s two at a time against 630 s one at a time (2026-11-29, 151 tests, the machine 95%
        // busy two at a time). The console's file, which times its first screen, went to
        // system-alone: two at a time it read 612 ms of its 1,000 (150–200 ms alone).
        test: {
          name: 'system',
          include: named('system'),
          maxWorkers: WORKERS,
          // Shared modules here too: each file's worker started vitest and imported its modules.
          isolate: ISOLATE,
          sequence: { groupOrder: 1 },
          testTimeout: SYSTEM_TIMEOUT,
          // Starts the system-alone tier beside it (scripts/run-tests.ts).
          setupFiles: ['./scripts/test-system-started.ts'],
        },
      },
      {
        extends: true,
        test: {
          name: 'system-alone',
          include: named('timed', 'alone'),
          maxWorkers: 1,
          sequence: { groupOrder: 2 },
          testTimeout: SYSTEM_TIMEOUT,
        },
      },
      {
        extends: true,
        test: {
          name: 'system-last',
          include: named('last'),
          maxWorkers: 1,
          sequence: { groupOrder: 3 },
          testTimeout: SYSTEM_TIMEOUT,
        },
      },
    ],
  },
});
