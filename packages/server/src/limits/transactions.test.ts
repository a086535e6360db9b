import { describe, expect, it, vi } from 'vitest';
import { createTransactionShare, transactionShareOptions } from './transactions.ts';

const refusal = () => new Error('saturated');
const share = (slots: number, perSite: number, waitingPerSite = 8, maxWaitMs = 60_000) =>
  createTransactionShare({ slots, perSite, waitingPerSite, maxWaitMs, saturated: refusal });

describe('transaction share', () => {
  it('lets a site hold perSite slots at once; its further writes wait, and another site goes in at once', async () => {
    const s = share(4, 2);
    const a = await s.enter('evil');
    await s.enter('evil');
    let third = false;
    const waiting = s.enter('evil').then((leave) => {
      third = true;
      return leave;
    });
    await Promise.resolve();
    expect(third).toBe(false);
    expect(s.load).toEqual({ running: 2, waiting: 1 });
    // Shop is never behind evil's queue: two slots are left.
    const shop = await s.enter('shop');
    expect(s.load).toEqual({ running: 3, waiting: 1 });
    a();
    a(); // a second call gives nothing back
    const leave = await waiting;
    expect(third).toBe(true);
    expect(s.load).toEqual({ running: 3, waiting: 0 });
    leave();
    shop();
  });

  it('gives a freed slot to the waiting site that holds the fewest, whoever came first', async () => {
    const s = share(2, 2);
    const e1 = await s.enter('evil');
    await s.enter('evil');
    const order: string[] = [];
    const evilNext = s.enter('evil').then((l) => {
      order.push('evil');
      return l;
    });
    const shopNext = s.enter('shop').then((l) => {
      order.push('shop');
      return l;
    });
    e1();
    (await shopNext)();
    expect(order).toEqual(['shop']);
    // Then evil's, once shop's is given back (evil holds one, shop none, one slot free).
    await evilNext;
    expect(order).toEqual(['shop', 'evil']);
  });

  it('gives a tie to the site served least recently: with one slot, a flood and a newcomer take turns', async () => {
    // Found by review: the site that gave the slot back came first in the map, so a newcomer
    // waited for the flood's next write too.
    const s = share(1, 1);
    const order: string[] = [];
    const wait = (site: string) =>
      s.enter(site).then((leave) => {
        order.push(site);
        return leave;
      });
    const first = await s.enter('evil');
    const evil = [wait('evil'), wait('evil')];
    const shop = wait('shop');
    first();
    (await shop)();
    (await evil[0]!)();
    (await evil[1]!)();
    expect(order).toEqual(['shop', 'evil', 'evil']);
  });

  it("refuses at once past the site's waiting room, and after maxWaitMs; a gone request leaves the line", async () => {
    vi.useFakeTimers();
    try {
      const s = share(1, 1, 2, 2_000);
      const held = await s.enter('evil');
      const late = s.enter('evil');
      const stop = new AbortController();
      const gone = s.enter('evil', stop.signal);
      await expect(s.enter('evil')).rejects.toThrow('saturated');
      stop.abort(new Error('gone'));
      await expect(gone).rejects.toThrow('gone');
      expect(s.load).toEqual({ running: 1, waiting: 1 });
      const refused = expect(late).rejects.toThrow('saturated');
      await vi.advanceTimersByTimeAsync(2_000);
      await refused;
      expect(s.load).toEqual({ running: 1, waiting: 0 });
      held();
      expect(s.load).toEqual({ running: 0, waiting: 0 });
    } finally {
      vi.useRealTimers();
    }
  });

  it('keeps two of the pool for reads and half the rest per site, at least one', () => {
    expect(transactionShareOptions(10)).toMatchObject({ slots: 8, perSite: 4 });
    expect(transactionShareOptions(1)).toMatchObject({ slots: 1, perSite: 1 });
    expect(transactionShareOptions(3)).toMatchObject({ slots: 1, perSite: 1 });
  });
});
