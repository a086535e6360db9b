// `./pnpmw test`: every tier in one run (vitest.config.ts), in two vitest processes side by side,
// then a third.
//
// The system-alone tier's files measure time (another site's latency under attack, a failover's
// "back within 10 s", a first screen within a second), so they run one at a time, never two at
// once. After the other tiers, as they used to, they left one core of two mostly idle for a
// quarter of the run. Here they start with the system tier, in a vitest process of their own whose
// scheduling priority is raised (nice −10; every worker, server, PostgreSQL, HAProxy and browser
// it starts inherits it), beside the other tiers at the normal priority: those take what the
// timed files leave, as a busy loop of lower priority would, rather than sharing the CPU evenly
// with them (which spoiled their bounds when two ran at once).
//
// The system-last tier (noisy-neighbours) runs after both, in a third vitest process at that
// priority, with nothing else of the run beside it.
//
// Raising a priority needs root or CAP_SYS_NICE: without it (or with TEST_ALONE_LAST=1) this is
// plain `vitest run`, with the system-alone and system-last tiers after the rest. Both ways write
// one report, .vitest/results.json, which .ci/run reads; the timed tiers' output follows the rest's.
import { spawn, spawnSync } from 'node:child_process';
import { appendFileSync, existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { getPriority, setPriority } from 'node:os';
import { dirname, join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import setup from './test-templates.ts';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const VITEST = join(dirname(fileURLToPath(import.meta.resolve('vitest/package.json'))), 'vitest.mjs');
const RESULTS = join(ROOT, '.vitest', 'results.json');
const PRIORITY = -10;
const OTHERS = ['unit', 'integration', 'contract', 'system'];

const canRaise =
  spawnSync(process.execPath, ['-e', `require("node:os").setPriority(${PRIORITY})`], { stdio: 'ignore' }).status === 0;

// Arguments (a file, `-t words`, `--project unit`) go to one plain `vitest run`.
const args = process.argv.slice(2);
if (args.length > 0 || process.env.TEST_ALONE_LAST === '1' || !canRaise) {
  if (!canRaise) console.log('[tests] no right to raise a priority here: the timed tiers run after the rest');
  const run = spawnSync(process.execPath, [VITEST, 'run', ...args], { stdio: 'inherit', cwd: ROOT });
  process.exit(run.status ?? 1);
}

interface Report {
  numTotalTests: number;
  numPassedTests: number;
  numFailedTests: number;
  numPendingTests: number;
  numTodoTests: number;
  numTotalTestSuites: number;
  numPassedTestSuites: number;
  numFailedTestSuites: number;
  numPendingTestSuites: number;
  startTime: number;
  success: boolean;
  testResults: unknown[];
  [key: string]: unknown;
}

const started = Date.now();
// The run's templates and server build, made once for all three processes (their global setup sees
// TEST_TEMPLATES_DIR and leaves it to this one).
const teardown = setup();
const reportOf = (name: string) => join(ROOT, '.vitest', `results-${name}.json`);
const TIMED_LOG = join(ROOT, '.vitest', 'system-alone.log');
const STAGES = ['others', 'system-alone', 'system-last'];
mkdirSync(join(ROOT, '.vitest'), { recursive: true });
// No report of an earlier run is read or left as this one's.
for (const file of [RESULTS, ...STAGES.map(reportOf), TIMED_LOG]) rmSync(file, { force: true });
const marker = join(process.env.TEST_TEMPLATES_DIR!, 'system-started'); // scripts/test-system-started.ts
rmSync(marker, { force: true });

function vitest(name: string, projects: string[], log?: string) {
  const child = spawn(process.execPath, [VITEST, 'run', ...projects.flatMap((p) => ['--project', p])], {
    cwd: ROOT,
    env: { ...process.env, TEST_RESULTS: reportOf(name) },
    stdio: log === undefined ? 'inherit' : ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const keep = (chunk: Buffer) => {
    output += chunk.toString();
    if (log !== undefined) appendFileSync(log, chunk); // kept as it comes: a killed run still has it
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  const exited = new Promise<number>((resolve) => {
    child.on('error', (error) => {
      output += `\n[tests] ${name}: ${error.message}\n`;
      resolve(1);
    });
    child.on('close', (code) => resolve(code ?? 1));
  });
  return { name, child, exited, output: () => output };
}

const others = vitest('others', OTHERS);
const timed: ReturnType<typeof vitest>[] = [];
let stopping = false;
// SIGTERM only: a terminal's Ctrl-C reaches every process of the group by itself.
process.on('SIGINT', () => {
  stopping = true;
});
process.on('SIGTERM', () => {
  stopping = true;
  for (const run of timed) run.child.kill('SIGTERM');
  others.child.kill('SIGTERM');
});

/** A vitest of one timed tier at the raised priority, its output kept for the end. */
function raised(name: string) {
  // Raised for the spawn (on Linux a priority is a thread's, and a child takes its parent's), then
  // put back: the child's threads and every process it starts inherit it.
  const own = getPriority();
  try {
    setPriority(PRIORITY);
    const run = vitest(name, [name], TIMED_LOG);
    timed.push(run);
    return run;
  } finally {
    setPriority(own);
  }
}

// The system-alone tier starts with the system tier (its setup file says so): beside the first
// three tiers it spoiled their own timing tests (verify's "as long for an unknown email", the
// sessions' misses "about the same time"). With no system tier in this run, once the rest is done.
let othersCode: number | undefined;
void others.exited.then((code) => {
  othersCode = code;
});
while (othersCode === undefined && !existsSync(marker)) await sleep(250);
let aloneCode = 1;
let lastCode = 1;
if (!stopping) aloneCode = await raised('system-alone').exited;
othersCode = await others.exited;
// Then system-last, with nothing else of the run beside it.
if (!stopping) lastCode = await raised('system-last').exited;
const HEADINGS: Record<string, string> = {
  'system-alone': 'the system-alone tier (beside the rest, at a higher priority; also in .vitest/system-alone.log)',
  'system-last': 'the system-last tier (after the rest, at a higher priority; also in .vitest/system-alone.log)',
};
for (const run of timed) {
  console.log(`\n== ${HEADINGS[run.name]}\n`);
  process.stdout.write(run.output());
}

// One report of the whole run, as one `vitest run` writes it.
const reports = STAGES.flatMap((name) => {
  try {
    return [JSON.parse(readFileSync(reportOf(name), 'utf8')) as Report];
  } catch {
    const ran = name === 'others' || timed.some((run) => run.name === name);
    console.log(`[tests] ${name}: no report (${ran ? 'its vitest ended before writing one' : 'not run: stopped'})`);
    return [];
  }
});
if (reports.length > 0) {
  const merged = { ...reports[0]! };
  const sums = Object.keys(merged).filter((k) => k.startsWith('num') && typeof merged[k] === 'number');
  for (const report of reports.slice(1)) {
    for (const key of sums) merged[key] = (merged[key] as number) + ((report[key] as number) ?? 0);
    merged.testResults = [...merged.testResults, ...report.testResults];
    merged.startTime = Math.min(merged.startTime, report.startTime);
    merged.success = merged.success && report.success;
  }
  // A tier without a report counts as a failed file, so the closing line cannot read clean.
  merged.numFailedTestSuites += STAGES.length - reports.length;
  merged.success = merged.success && reports.length === STAGES.length;
  writeFileSync(RESULTS, JSON.stringify(merged));
  for (const name of STAGES) rmSync(reportOf(name), { force: true });
  const skipped = merged.numPendingTests + merged.numTodoTests;
  console.log(
    `\nThe whole run: ${merged.numPassedTests} passed, ${merged.numFailedTests} failed, ${skipped} skipped` +
      `${reports.length < STAGES.length ? ' (a tier wrote no report)' : ''}, in ${Math.round((Date.now() - started) / 1000)} s`,
  );
}
await teardown?.();
process.exit([othersCode, aloneCode, lastCode].find((c) => c !== 0) ?? (reports.length < STAGES.length ? 1 : 0));
