// The short fuzz run of `pnpm test` (`pnpm fuzz` runs any number): requests generated from the
// spec against the server on the embedded database. FUZZ_SEED replays a run; FUZZ_RUNS sets its size.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { describeOutcomes, fuzz } from './fuzz/run.ts';
import { embeddedServer, type Target } from './targets.ts';

// 2,000 and 20 (5,000 and 40 until stop 69: its two minutes, beside the other files, were one of
// the suite's longest); each run draws a new seed, so the runs together cover more than one.
const RUNS = Number(process.env.FUZZ_RUNS ?? 2_000);
const SEQUENCES = Number(process.env.FUZZ_SEQUENCES ?? 20);
const SEED = process.env.FUZZ_SEED === undefined ? undefined : Number(process.env.FUZZ_SEED);

describe('fuzzing from the spec (server on embedded PGlite)', () => {
  let target: Target;
  beforeAll(async () => {
    target = await embeddedServer();
  });
  afterAll(async () => {
    await target?.close();
  });

  it(`answers ${RUNS} generated requests and ${SEQUENCES} stateful sequences as the spec says`, async () => {
    const report = await fuzz(target, {
      runs: RUNS,
      sequences: SEQUENCES,
      seed: SEED,
      log: (line) => console.log(line),
    });
    console.log(
      `fuzz: seed ${report.seed}; ${report.cases} requests, by outcome:\n${describeOutcomes(report).join('\n')}`,
    );
    expect(report.cases).toBeGreaterThanOrEqual(RUNS);
  }, 600_000);
});
