import { describe, expect, it } from 'vitest';
import type { TestCase } from 'vitest/node';
import SummaryReporter, { enablerOf, parseSkip } from './summary.ts';

const result = (state: string) => ({ result: () => ({ state }) }) as unknown as TestCase;

describe('the summary at the end of ./pnpmw test', () => {
  it('reads the skip lines the tests print', () => {
    expect(parseSkip('\n[contract-tests] cli on PostgreSQL: SKIPPED, TEST_DATABASE_URL is not set\n')).toEqual({
      group: 'cli on PostgreSQL',
      reason: 'TEST_DATABASE_URL is not set',
    });
    expect(parseSkip('[contract-tests] /docs Test Request tests SKIPPED: no chromium on PATH')).toEqual({
      group: '/docs Test Request tests',
      reason: 'no chromium on PATH',
    });
    expect(parseSkip('[lockout.test] the Redis store: SKIPPED, TEST_REDIS_URL is not set')).toMatchObject({
      group: 'the Redis store',
    });
    expect(parseSkip('an ordinary log line')).toBeUndefined();
  });

  it('names the command that runs each kind of skipped group', () => {
    expect(enablerOf('TEST_DATABASE_URL is not set')).toMatch(/^TEST_DATABASE_URL=postgres:\/\/.+ \.\/pnpmw test$/);
    expect(enablerOf('TEST_REDIS_URL is not set')).toMatch(/^TEST_REDIS_URL=redis:\/\/.+ \.\/pnpmw test$/);
    expect(enablerOf("no haproxy (Debian's package: apt-get install haproxy)")).toMatch(/apt-get install haproxy/);
    expect(enablerOf('no chromium on PATH')).toMatch(/apt-get install chromium/);
    expect(enablerOf('promtool is not installed (Debian: prometheus)')).toMatch(/prometheus/);
  });

  it('prints the totals, then each skipped group once with its command', () => {
    let out = '';
    const reporter = new SummaryReporter({
      write: (text) => {
        out += text;
      },
    });
    for (const state of ['passed', 'passed', 'failed', 'skipped']) reporter.onTestCaseResult(result(state));
    const line = '[contract-tests] webhooks on PostgreSQL: SKIPPED, TEST_DATABASE_URL is not set';
    reporter.onUserConsoleLog({ content: line });
    reporter.onUserConsoleLog({ content: line });
    reporter.onUserConsoleLog({ content: 'not a skip' });
    reporter.onTestRunEnd([]);
    expect(out.trim().split('\n')).toEqual([
      'Tests: 2 passed, 1 failed, 1 skipped',
      'Skipped here, and how to run them:',
      '  - webhooks on PostgreSQL: TEST_DATABASE_URL is not set',
      '      TEST_DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres ./pnpmw test',
    ]);
  });
});
