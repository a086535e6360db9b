// A test file's tier follows from its name (issue 58, point 5): the word before `.test.ts`, or,
// without one, its package (packages/contract-tests: contract; any other: unit). Adding a test
// file needs no edit of vitest.config.ts, which builds its projects from this table, and
// scripts/check-test-tiers.ts refuses a word that is not in it (a typo would make a unit test).

/** The words a test file's name may end in, before `.test.ts`, and the vitest project each puts it in. */
export const TIER_SUFFIXES = {
  /** Server modules against a database they open (PGlite, or TEST_DATABASE_URL's PostgreSQL). */
  integration: 'integration',
  /** Processes of ours, a browser, HAProxy, a private PostgreSQL, a database at scale: two at a time. */
  system: 'system',
  /** System tests whose subject is time or latency under load: one at a time, at a raised priority. */
  timed: 'system-alone',
  /** Untimed system files that run one at a time after the timed ones, to even out the two processes. */
  alone: 'system-alone',
  /** Timed files with nothing else of the run beside them, after everything. */
  last: 'system-last',
} as const;

export type TierSuffix = keyof typeof TIER_SUFFIXES;

/** The glob of the test files whose names end in `.<suffix>.test.ts`, in any package. */
export const named = (...suffixes: TierSuffix[]) => suffixes.map((suffix) => `packages/*/src/**/*.${suffix}.test.ts`);

/** The word before `.test.ts` in a test file's name (`cli` of `cli.system.test.ts`), if it has one. */
export const suffixOf = (path: string): string | undefined => /\.([^./]+)\.test\.ts$/.exec(path)?.[1];
