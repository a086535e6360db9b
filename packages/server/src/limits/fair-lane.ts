// A lane of hashing slots shared by every site of a deployment, shared by time rather than by
// turns: a freed slot goes to the waiting site that has used the least hashing time lately, so a
// site whose hashes each take a second gets a second's worth of turns, not as many turns as a
// site whose hashes take ten milliseconds. Waiting work whose request is gone (answered by its
// deadline, or its client disconnected) leaves the queue and never runs.

import { SiteQueues } from './site-queues.ts';

export interface LaneOptions {
  /** Hashes computed at once. */
  slots: number;
  /** Hashes allowed to wait for a slot, every site together (the waiting room). */
  maxWaiting: number;
  /** The error a hash gets when it may not wait. */
  saturated: () => Error;
  /** A site's hashing time counts half as much after this long (default 10 s). */
  halfLifeMs?: number;
  /** Milliseconds, monotonic: performance.now unless a test says otherwise. */
  now?: () => number;
}

export interface FairLane {
  /**
   * Runs `work` in a slot in `site`'s turn, charging the site its duration (`estimateMs` while it
   * runs). Rejects with `saturated()` when it may not wait, and with `signal`'s reason when the
   * signal aborts while it waits.
   */
  run<T>(site: string, estimateMs: number, work: () => Promise<T>, signal?: AbortSignal): Promise<T>;
  readonly load: { running: number; waiting: number };
}

interface Waiter {
  estimateMs: number;
  start(): void;
  refuse(error: unknown): void;
}

export function createFairLane(options: LaneOptions): FairLane {
  const { slots, maxWaiting, saturated } = options;
  const halfLifeMs = options.halfLifeMs ?? 10_000;
  const now = options.now ?? (() => performance.now());
  let running = 0;
  // The sites with hashes waiting, each with its own queue (first come, first served).
  const queues = new SiteQueues<Waiter>();
  // Each site's hashing time lately: milliseconds, decayed by halfLifeMs since `at`.
  const usage = new Map<string, { ms: number; at: number }>();

  const usedBy = (site: string, at = now()): number => {
    const entry = usage.get(site);
    return entry === undefined ? 0 : entry.ms * 2 ** (-(at - entry.at) / halfLifeMs);
  };
  const charge = (site: string, ms: number) => {
    const at = now();
    const used = Math.max(0, usedBy(site, at) + ms);
    if (used < 0.001 && !queues.has(site)) usage.delete(site);
    else usage.set(site, { ms: used, at });
    // Sites that stopped hashing long ago weigh nothing: keep the map to the active ones.
    if (usage.size > 4 * (slots + maxWaiting) + 64) {
      for (const [name] of usage) if (usedBy(name, at) < 0.001 && !queues.has(name)) usage.delete(name);
    }
  };

  /** Hands a freed slot to the waiting hash of the site that used the least time lately. */
  const release = () => {
    let next: string | undefined;
    let least = Number.POSITIVE_INFINITY;
    const at = now();
    // Ties go to the site that has waited longest: the map keeps the order the sites came in.
    for (const site of queues.sites()) {
      const used = usedBy(site, at);
      if (used < least) [next, least] = [site, used];
    }
    if (next === undefined) {
      running--;
      return;
    }
    const waiter = queues.shift(next)!;
    // The site goes to the back of the line for ties.
    queues.toBack(next);
    waiter.start(); // the slot passes on: running stays as it is
  };

  /** Room for one more waiting hash of `site`, pushing out the busiest site's newest if need be. */
  const makeRoom = (site: string): boolean => {
    if (queues.size < maxWaiting) return true;
    const mine = queues.lengthOf(site);
    let busiest: [string, readonly Waiter[]] | undefined;
    for (const entry of queues.entries())
      if (busiest === undefined || entry[1].length > busiest[1].length) busiest = entry;
    if (busiest === undefined || busiest[1].length <= mine) return false;
    const pushedOut = busiest[1].at(-1)!;
    queues.remove(busiest[0], pushedOut);
    pushedOut.refuse(saturated());
    return true;
  };

  const slot = (site: string, estimateMs: number, signal: AbortSignal | undefined): Promise<void> => {
    if (signal?.aborted) return Promise.reject(signal.reason);
    // A free slot means no one waits: release() hands each freed slot to a waiting hash first.
    if (running < slots) {
      running++;
      return Promise.resolve();
    }
    if (!makeRoom(site)) return Promise.reject(saturated());
    return new Promise<void>((resolve, reject) => {
      const onAbort = () => {
        if (queues.remove(site, waiter)) reject(signal!.reason);
      };
      const waiter: Waiter = {
        estimateMs,
        start() {
          signal?.removeEventListener('abort', onAbort);
          resolve();
        },
        refuse(error) {
          signal?.removeEventListener('abort', onAbort);
          reject(error);
        },
      };
      signal?.addEventListener('abort', onAbort, { once: true });
      queues.push(site, waiter);
    });
  };

  return {
    get load() {
      return { running, waiting: queues.size };
    },
    async run(site, estimateMs, work, signal) {
      await slot(site, estimateMs, signal);
      const started = now();
      // Charged as it starts, so that a site starting several at once is behind for the next slot.
      charge(site, estimateMs);
      try {
        return await work();
      } finally {
        charge(site, now() - started - estimateMs);
        release();
      }
    },
  };
}
