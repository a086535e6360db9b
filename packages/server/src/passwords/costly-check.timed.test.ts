// The costly lane's checks in a process of their own (issue 41, F8): the answers of checkPassword,
// and a check whose signal aborts is stopped with its process, so that no core works on for a
// request that is gone. A system test: it starts processes of ours.
import { randomBytes } from 'node:crypto';
import { hash as bcryptHash } from '@node-rs/bcrypt';
import { afterAll, describe, expect, it } from 'vitest';
import { createCostlyChecker } from './costly-check.ts';

const checker = createCostlyChecker({ maxIdle: 1, failed: () => new Error('the check process ended') });
afterAll(() => checker.close());

const b64 = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '');
/** PBKDF2-SHA512 at import's limit: seconds of a core. */
const HEAVY = `$pbkdf2-sha512$10000000$${b64(randomBytes(16))}$${b64(randomBytes(64))}`;

const until = async (done: () => boolean, ms: number) => {
  const end = performance.now() + ms;
  while (!done() && performance.now() < end) await new Promise((r) => setTimeout(r, 5));
  return done();
};

describe('createCostlyChecker', () => {
  it('answers as checkPassword does, in one process kept for the next check', async () => {
    const stored = await bcryptHash('Costly-check-password-41', { cost: 11 });
    expect(await checker.check(stored, 'Costly-check-password-41')).toBe(true);
    expect(await checker.check(stored, 'another password')).toBe(false);
    expect(await checker.check('not a hash', 'Costly-check-password-41')).toBe(false);
    expect(checker.processes).toBe(1);
  }, 180_000);

  it('kills the process when the signal aborts: the check rejects with its reason at once, and no process works on', async () => {
    expect(checker.processes).toBe(1);
    const started = performance.now();
    const stopped = checker.check(HEAVY, 'a wrong guess', AbortSignal.timeout(200));
    await expect(stopped).rejects.toMatchObject({ name: 'TimeoutError' });
    const answeredMs = performance.now() - started;
    // The process is gone (SIGKILL): its core is free, seconds before the check would have ended.
    expect(await until(() => checker.processes === 0, 1_000)).toBe(true);
    const goneMs = performance.now() - started;
    console.log(
      `[costly-check.test] aborted at 200 ms: rejected at ${Math.round(answeredMs)} ms, process gone at ${Math.round(goneMs)} ms`,
    );
    expect(answeredMs).toBeLessThan(1_000);
    // The next check starts a new process.
    const stored = await bcryptHash('Costly-check-password-41', { cost: 11 });
    expect(await checker.check(stored, 'Costly-check-password-41')).toBe(true);
  }, 180_000);

  it('never starts a check whose signal has already aborted', async () => {
    const before = checker.processes;
    await expect(checker.check(HEAVY, 'x', AbortSignal.abort(new Error('gone')))).rejects.toThrow('gone');
    expect(checker.processes).toBe(before);
  });
});
