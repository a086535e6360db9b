import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createWake } from './wake.ts';

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** Whether `promise` has settled once `ms` more of the fake clock have passed. */
async function within(promise: Promise<void>, ms: number): Promise<boolean> {
  let settled = false;
  void promise.then(() => {
    settled = true;
  });
  await vi.advanceTimersByTimeAsync(ms);
  return settled;
}

describe('wake', () => {
  it("wakes a site's long-poll for its own site's events and for a notification of any site, not for another site's", async () => {
    const wake = createWake();
    const a = wake.next(5_000, undefined, 'shop');
    wake.notify('blog');
    expect(await within(a, 50)).toBe(false);
    wake.notify('shop');
    expect(await within(a, 50)).toBe(true);

    const b = wake.next(5_000, undefined, 'shop');
    wake.notify(); // a server of an older version: its notification names no site
    expect(await within(b, 50)).toBe(true);
  });

  it('tells subscribers (the webhook sender) every notification with its site, and wakes site-less waiters on every site', async () => {
    const wake = createWake();
    const heard: (string | undefined)[] = [];
    const unsubscribe = wake.subscribe((site) => heard.push(site));
    const any = wake.next(5_000);
    wake.notify('blog');
    expect(await within(any, 50)).toBe(true);
    wake.notify();
    expect(heard).toEqual(['blog', undefined]);
    unsubscribe();
    wake.notify('blog');
    expect(heard).toEqual(['blog', undefined]);
  });

  it('answers at the end of the wait, or when the request is aborted, and forgets the waiter', async () => {
    const wake = createWake();
    const waiting30 = wake.next(30, undefined, 'shop');
    expect(await within(waiting30, 29)).toBe(false);
    expect(await within(waiting30, 1)).toBe(true);
    const aborted = new AbortController();
    const waiting = wake.next(5_000, aborted.signal, 'shop');
    aborted.abort();
    expect(await within(waiting, 50)).toBe(true);
    let woken = 0;
    // A waiter that was answered is not called again by a later notification.
    const later = wake.next(5_000, undefined, 'shop').then(() => woken++);
    wake.notify('shop');
    await later;
    wake.notify('shop');
    await vi.advanceTimersByTimeAsync(10);
    expect(woken).toBe(1);
  });
});
