// Heavy reads (a list page, an export, a person's data) each hold megabytes and the event loop for
// their serialization: four list pages of 63 MB at once took another site's login p50 from 29 ms to
// 798 ms (issue 41, F2). Each process lets a site run a bounded number of them at once; a few more
// wait their turn in the site's own queue (first come, first served) for a short while, and the
// rest are refused at once. Another site's reads never wait behind them: each site has its own.

import { SiteQueues, type Waiter, waitInLine } from './site-queues.ts';

export interface HeavyReadLimits {
  /** Heavy reads of one site running at once. */
  perSite: number;
  /** Reads of one site that may wait for a place (beyond it: refused at once). */
  waitingPerSite: number;
  /** How long a read waits for a place at most before it is refused. */
  maxWaitMs: number;
}

/** How long a heavy read waits for its site's turn at most, and how many may wait per place. */
export const HEAVY_READ_WAIT_MS = 2_000;
export const WAITING_PER_PLACE = 8;

/** The bounds from HEAVY_READS_PER_SITE: eight times as many may wait as run, each 2 s at most. */
export const heavyReadLimits = (perSite: number): HeavyReadLimits => ({
  perSite,
  waitingPerSite: WAITING_PER_PLACE * perSite,
  maxWaitMs: HEAVY_READ_WAIT_MS,
});

export interface HeavyReadGate {
  /**
   * A place for one heavy read of `site`, given back by calling `leave` (once; later calls do
   * nothing): at once when the site has one free, else after waiting in the site's queue.
   * Resolves to `refused` when the queue is full or the wait ran out, and rejects with `signal`'s
   * reason when it aborts while waiting.
   */
  enter(site: string, signal?: AbortSignal): Promise<{ leave(): void } | 'refused'>;
  /** Heavy reads running now and waiting now, in this process. */
  readonly load: { running: number; waiting: number };
}

export function createHeavyReadGate(limits: HeavyReadLimits): HeavyReadGate {
  const running = new Map<string, number>();
  const queues = new SiteQueues<Waiter>();
  let runningAll = 0;

  const place = (site: string) => {
    let left = false;
    return {
      leave() {
        if (left) return;
        left = true;
        // The place passes on: the site's count stays as it is.
        const next = queues.shift(site);
        if (next !== undefined) return next.start();
        runningAll--;
        const n = (running.get(site) ?? 1) - 1;
        if (n === 0) running.delete(site);
        else running.set(site, n);
      },
    };
  };

  return {
    get load() {
      return { running: runningAll, waiting: queues.size };
    },
    enter(site, signal) {
      if (signal?.aborted) return Promise.reject(signal.reason);
      const now = running.get(site) ?? 0;
      // A free place means no one of the site waits: leave() hands each freed place on first.
      if (now < limits.perSite) {
        running.set(site, now + 1);
        runningAll++;
        return Promise.resolve(place(site));
      }
      if (queues.lengthOf(site) >= limits.waitingPerSite) return Promise.resolve('refused');
      return waitInLine<{ leave(): void } | 'refused'>(queues, site, {
        maxWaitMs: limits.maxWaitMs,
        signal,
        started: () => place(site),
        late: () => 'refused',
      });
    },
  };
}
