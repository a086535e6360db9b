// The last lines of `./pnpmw test`: the totals, and each group of tests that skipped itself (for a
// missing PostgreSQL, Redis, browser, HAProxy, promtool…) with the one command that runs it. The
// reasons were printed where each group skipped, scattered over hundreds of lines of output.
import type { Reporter, TestCase, TestModule } from 'vitest/node';

/** What runs a group that skipped for this reason, by the reason's words. */
const ENABLERS: [RegExp, string][] = [
  [/TEST_DATABASE_URL/, 'TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres ./pnpmw test'],
  [/TEST_REDIS_URL/, 'TEST_REDIS_URL=redis://127.0.0.1:6379 ./pnpmw test'],
  [/haproxy/i, 'apt-get install haproxy   (Debian; /usr/sbin is looked in too)'],
  [/redis-server/, 'apt-get install redis-server'],
  [/promtool/, 'apt-get install prometheus   (or bash .ci/run, which unpacks promtool into .toolchain/)'],
  [/podman|buildah/, 'apt-get install podman'],
  [/chrom/i, 'apt-get install chromium'],
];

/** "[contract-tests] cli on PostgreSQL: SKIPPED, TEST_DATABASE_URL is not set" → its group and reason. */
export function parseSkip(line: string): { group: string; reason: string } | undefined {
  const match = /^\s*\[[^\]]+\]\s*(.+?):?\s+SKIPPED[,:]\s*(.+?)\s*$/m.exec(line);
  if (match === null) return undefined;
  return { group: match[1]!, reason: match[2]! };
}

export function enablerOf(reason: string): string | undefined {
  return ENABLERS.find(([pattern]) => pattern.test(reason))?.[1];
}

export function summaryLines(
  counts: { passed: number; failed: number; skipped: number },
  skips: { group: string; reason: string }[],
): string[] {
  const lines = [`Tests: ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`];
  const unique = [...new Map(skips.map((s) => [`${s.group}\0${s.reason}`, s])).values()];
  if (unique.length === 0) return lines;
  lines.push('Skipped here, and how to run them:');
  for (const { group, reason } of unique) {
    lines.push(`  - ${group}: ${reason}`);
    const enabler = enablerOf(reason);
    if (enabler !== undefined) lines.push(`      ${enabler}`);
  }
  return lines;
}

export default class SummaryReporter implements Reporter {
  private readonly skips: { group: string; reason: string }[] = [];
  private readonly counts = { passed: 0, failed: 0, skipped: 0 };
  private readonly write: (text: string) => void;
  // Vitest passes a reporter's options from the config here (none for this one).
  constructor(options: { write?: (text: string) => void } = {}) {
    this.write = options.write ?? ((text) => void process.stdout.write(text));
  }

  onUserConsoleLog(log: { content: string }) {
    const skip = parseSkip(log.content);
    if (skip !== undefined) this.skips.push(skip);
  }

  onTestCaseResult(testCase: TestCase) {
    const state = testCase.result().state;
    if (state === 'passed') this.counts.passed++;
    else if (state === 'failed') this.counts.failed++;
    else this.counts.skipped++;
  }

  onTestRunEnd(_modules: ReadonlyArray<TestModule>) {
    this.write(`\n${summaryLines(this.counts, this.skips).join('\n')}\n`);
  }
}
