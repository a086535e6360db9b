import { describe, expect, it } from 'vitest';
import { createFairLane } from './fair-lane.ts';

const saturated = () => new Error('saturated');

/** A lane on a clock the test moves, and work that ends when the test says so. */
function lane(slots: number, maxWaiting = 100) {
  let clock = 0;
  const fair = createFairLane({ slots, maxWaiting, saturated, now: () => clock });
  const running: { site: string; finish(): void }[] = [];
  const started: string[] = [];
  const submit = (site: string, estimateMs: number, signal?: AbortSignal) =>
    fair.run(
      site,
      estimateMs,
      () =>
        new Promise<void>((resolve) => {
          started.push(site);
          running.push({ site, finish: resolve });
        }),
      signal,
    );
  /** Lets `ms` pass, then ends the oldest running work. */
  const finishOldest = async (ms: number) => {
    await new Promise((r) => setImmediate(r));
    clock += ms;
    running.shift()!.finish();
    await new Promise((r) => setImmediate(r));
  };
  return { fair, submit, started, finishOldest, running };
}

describe('createFairLane', () => {
  it('shares the slot by time: a site whose hashes take 10× as long gets about a tenth of the turns', async () => {
    const { submit, started, finishOldest, running } = lane(1);
    // Each site always has work waiting: "slow" 100 ms hashes, "fast" 10 ms ones.
    const keepBusy = (site: string, ms: number) => {
      for (let i = 0; i < 80; i++) void submit(site, ms).catch(() => {});
    };
    keepBusy('slow', 100);
    keepBusy('fast', 10);
    for (let i = 0; i < 60; i++) {
      await new Promise((r) => setImmediate(r));
      await finishOldest(running[0]!.site === 'slow' ? 100 : 10);
    }
    const counts = { slow: 0, fast: 0 };
    for (const site of started.slice(0, 60)) counts[site as 'slow' | 'fast']++;
    // By turns it would be 30 and 30; by time, about 6 and 54.
    expect(counts.slow).toBeLessThanOrEqual(10);
    expect(counts.fast).toBeGreaterThanOrEqual(50);
  });

  it('gives a freed slot to a site that has not hashed lately before one that has', async () => {
    const { submit, started, finishOldest } = lane(1);
    void submit('evil', 1000);
    void submit('evil', 1000);
    void submit('evil', 1000);
    void submit('shop', 10);
    await finishOldest(1000);
    expect(started).toEqual(['evil', 'shop']);
  });

  it('drops waiting work whose signal aborts: it never runs and frees its place in the waiting room', async () => {
    const { fair, submit, started, finishOldest } = lane(1, 2);
    void submit('evil', 1000);
    const gone = new AbortController();
    const abandoned = [submit('evil', 1000, gone.signal), submit('evil', 1000, gone.signal)];
    expect(fair.load).toEqual({ running: 1, waiting: 2 });
    gone.abort(new Error('client went away'));
    await expect(Promise.all(abandoned)).rejects.toThrow('client went away');
    expect(fair.load).toEqual({ running: 1, waiting: 0 });
    void submit('shop', 10);
    await finishOldest(1000);
    expect(started).toEqual(['evil', 'shop']);
    // Work whose signal aborted before it asked is refused at once.
    await expect(submit('shop', 10, AbortSignal.abort(new Error('late')))).rejects.toThrow('late');
  });

  it('refuses the busiest site when the waiting room is full, and frees the slot of work that failed', async () => {
    const fair = createFairLane({ slots: 1, maxWaiting: 1, saturated });
    const failing = fair.run('a', 1, () => Promise.reject(new Error('odd input')));
    const waiting = fair.run('a', 1, async () => 'a2');
    await expect(fair.run('a', 1, async () => 'a3')).rejects.toThrow('saturated');
    await expect(failing).rejects.toThrow('odd input');
    expect(await waiting).toBe('a2');
    expect(fair.load).toEqual({ running: 0, waiting: 0 });
  });
});
