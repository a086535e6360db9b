// `pnpm fuzz [--runs N] [--sequences N] [--seed S] [--postgres]`: the fuzzer of `pnpm test`, at any
// size, against a server on a fresh embedded database (or a fresh database on TEST_DATABASE_URL).
import { parseArgs } from 'node:util';
import { embeddedServer, postgresTarget, type Target } from '../targets.ts';
import { describeOutcomes, fuzz } from './run.ts';

const { values } = parseArgs({
  options: {
    runs: { type: 'string', default: '20000' },
    sequences: { type: 'string', default: '200' },
    seed: { type: 'string' },
    postgres: { type: 'boolean', default: false },
    help: { type: 'boolean', default: false },
  },
});
if (values.help) {
  process.stdout.write('usage: pnpm fuzz [--runs N] [--sequences N] [--seed S] [--postgres]\n');
  process.exit(0);
}
const count = (name: string, raw: string | undefined) => {
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < 0) {
    process.stderr.write(`fuzz: --${name} must be a whole number (got "${raw}")\n`);
    process.exit(2);
  }
  return n;
};
const runs = count('runs', values.runs);
const sequences = count('sequences', values.sequences);
const seed = values.seed === undefined ? undefined : count('seed', values.seed);

let target: Target;
if (values.postgres) {
  const spec = await postgresTarget();
  if (spec.skip !== undefined) {
    process.stderr.write(`fuzz: --postgres: ${spec.skip}\n`);
    process.exit(2);
  }
  target = await spec.start();
} else {
  target = await embeddedServer();
}
const started = performance.now();
let failed = false;
try {
  const report = await fuzz(target, { runs, sequences, seed });
  const seconds = (performance.now() - started) / 1000;
  process.stdout.write(
    `${describeOutcomes(report).join('\n')}\nfuzz: passed: ${report.cases} requests and ${sequences} sequences in ${seconds.toFixed(1)} s (seed ${report.seed})\n`,
  );
} catch (error) {
  failed = true;
  process.stderr.write(`${error instanceof Error ? error.message : String(error)}\n`);
} finally {
  await target.close();
}
process.exit(failed ? 1 : 0);
