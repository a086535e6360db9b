import { describe, expect, it } from 'vitest';
import { bySiteInTurn } from './in-turn.ts';

describe('bySiteInTurn', () => {
  it('gives each site one batch a round, and drops a site once its batch comes back short', async () => {
    const backlog = new Map([
      ['crowded', 10],
      ['quiet', 1],
      ['idle', 0],
    ]);
    const calls: string[] = [];
    const total = await bySiteInTurn([...backlog.keys()], 3, async (site) => {
      calls.push(site);
      const done = Math.min(3, backlog.get(site)!);
      backlog.set(site, backlog.get(site)! - done);
      return done;
    });
    expect(calls).toEqual(['crowded', 'quiet', 'idle', 'crowded', 'crowded', 'crowded']);
    expect(total).toBe(11);
    expect([...backlog.values()]).toEqual([0, 0, 0]);
  });

  it('does nothing for no sites, and refuses a batch that could never come back short', async () => {
    expect(await bySiteInTurn([], 3, async () => 3)).toBe(0);
    await expect(bySiteInTurn(['a'], 0, async () => 0)).rejects.toThrow(RangeError);
  });
});
