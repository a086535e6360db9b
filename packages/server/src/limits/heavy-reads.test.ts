import { describe, expect, it, vi } from 'vitest';
import { createHeavyReadGate } from './heavy-reads.ts';

describe('heavy read gate', () => {
  it('lets a site run perSite at once, queues waitingPerSite more in order, and refuses the rest at once', async () => {
    const gate = createHeavyReadGate({ perSite: 2, waitingPerSite: 2, maxWaitMs: 60_000 });
    const a = await gate.enter('evil');
    const b = await gate.enter('evil');
    expect(a).not.toBe('refused');
    expect(b).not.toBe('refused');
    const order: string[] = [];
    const inOrder = (name: string) => (p: Awaited<ReturnType<typeof gate.enter>>) => {
      order.push(name);
      return p;
    };
    const third = gate.enter('evil').then(inOrder('third'));
    const fourth = gate.enter('evil').then(inOrder('fourth'));
    expect(await gate.enter('evil')).toBe('refused');
    expect(gate.load).toEqual({ running: 2, waiting: 2 });
    // Another site is never held back by evil's.
    const shop = await gate.enter('shop');
    expect(shop).not.toBe('refused');
    if (a === 'refused' || b === 'refused' || shop === 'refused') throw new Error('unreachable');
    a.leave();
    a.leave(); // a second leave gives nothing back
    const p3 = await third;
    expect(order).toEqual(['third']);
    expect(gate.load).toEqual({ running: 3, waiting: 1 });
    b.leave();
    const p4 = await fourth;
    expect(order).toEqual(['third', 'fourth']);
    for (const p of [p3, p4, shop]) if (p !== 'refused') p.leave();
    expect(gate.load).toEqual({ running: 0, waiting: 0 });
  });

  it('refuses a waiting read whose wait ran out, and drops one whose request is gone', async () => {
    vi.useFakeTimers();
    try {
      const gate = createHeavyReadGate({ perSite: 1, waitingPerSite: 4, maxWaitMs: 2_000 });
      const held = await gate.enter('evil');
      const late = gate.enter('evil');
      const gone = new AbortController();
      const abandoned = gate.enter('evil', gone.signal);
      gone.abort(new Error('client went away'));
      await expect(abandoned).rejects.toThrow('client went away');
      expect(gate.load.waiting).toBe(1);
      await vi.advanceTimersByTimeAsync(2_001);
      expect(await late).toBe('refused');
      expect(gate.load).toEqual({ running: 1, waiting: 0 });
      if (held !== 'refused') held.leave();
      expect(gate.load).toEqual({ running: 0, waiting: 0 });
    } finally {
      vi.useRealTimers();
    }
  });
});
