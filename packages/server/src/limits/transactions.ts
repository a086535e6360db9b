// A server's database connections, shared fairly between sites (issue 57, G1). Every write holds
// one connection of the pool from its BEGIN to its COMMIT, also while it waits on a lock: 24 of
// one site's writes queued on one row (or on the site's advisory lock) held the whole pool, and
// every other site's reads and logins waited behind them (×16 to ×341). Here each process lets a
// site hold at most `perSite` of its `slots` in transactions at once; a site's further writes wait
// in its own queue, without a connection, and a freed slot goes to the waiting site that holds the
// fewest (ties: the one that came first). A write that waited `maxWaitMs`, or that finds its
// site's queue full, is refused (429 `rate_limited` with `Retry-After`), as heavy reads are.
import { rateLimited } from '../errors.ts';
import { SiteQueues, type Waiter, waitInLine } from './site-queues.ts';

/** The refusal of a write that found no slot of its site's share in time. */
export const tooManyWrites = () =>
  rateLimited(
    "Too many of this site's writes are under way on this server already; try again after Retry-After seconds.",
    1,
  );

export interface TransactionShareOptions {
  /** Transactions of every site at once: the pool's connections, less those kept for reads. */
  slots: number;
  /** Transactions of one site at once. */
  perSite: number;
  /** Writes of one site that may wait for a slot (beyond it: refused at once). */
  waitingPerSite: number;
  /** How long a write waits for a slot at most before it is refused. */
  maxWaitMs: number;
  /** The error a write gets when it may not wait, or waited too long. */
  saturated: () => Error;
}

export interface TransactionShare {
  /**
   * A slot for one transaction of `site`, given back by calling the function it resolves to
   * (once; later calls do nothing). Rejects with `saturated()` when the site's queue is full or
   * the wait ran out, and with `signal`'s reason when it aborts while waiting.
   */
  enter(site: string, signal?: AbortSignal): Promise<() => void>;
  /** Transactions running now and writes waiting now, in this process. */
  readonly load: { running: number; waiting: number };
}

/** How long a write waits for its site's slot at most, and how many may wait per slot. */
export const WRITE_WAIT_MS = 2_000;
export const WAITING_PER_SLOT = 64;

/** The bounds for a pool of `pool` connections: two kept for reads, half the rest per site at most. */
export function transactionShareOptions(pool: number, saturated = tooManyWrites): TransactionShareOptions {
  const slots = Math.max(1, pool - 2);
  const perSite = Math.max(1, Math.floor(slots / 2));
  return { slots, perSite, waitingPerSite: WAITING_PER_SLOT * perSite, maxWaitMs: WRITE_WAIT_MS, saturated };
}

export function createTransactionShare(options: TransactionShareOptions): TransactionShare {
  const { slots, perSite, waitingPerSite, maxWaitMs, saturated } = options;
  const running = new Map<string, number>();
  // When each site last got a slot (a counter): ties go to the site served least recently, so that
  // a site that just gave one back does not take it again before a site waiting beside it.
  const served = new Map<string, number>();
  let turns = 0;
  // The sites with writes waiting, in the order they came (first come, first served within each).
  const queues = new SiteQueues<Waiter>();
  let runningAll = 0;

  const take = (site: string) => {
    running.set(site, (running.get(site) ?? 0) + 1);
    runningAll++;
    served.set(site, ++turns);
  };
  /** Hands free slots to the waiting sites that hold the fewest, each under its own bound. */
  const handOut = () => {
    while (runningAll < slots && queues.size > 0) {
      let next: string | undefined;
      let fewest = Number.POSITIVE_INFINITY;
      let longest = Number.POSITIVE_INFINITY;
      for (const site of queues.sites()) {
        const held = running.get(site) ?? 0;
        const last = served.get(site) ?? 0;
        if (held < perSite && (held < fewest || (held === fewest && last < longest)))
          [next, fewest, longest] = [site, held, last];
      }
      if (next === undefined) return;
      const waiter = queues.shift(next)!;
      take(next);
      waiter.start();
    }
  };
  const slot = (site: string) => {
    let left = false;
    return () => {
      if (left) return;
      left = true;
      runningAll--;
      const n = (running.get(site) ?? 1) - 1;
      if (n === 0) running.delete(site);
      else running.set(site, n);
      // Sites that hold nothing and wait for nothing are forgotten, but for the order of ties.
      if (served.size > 4 * (slots + 64)) {
        for (const name of served.keys()) if (!running.has(name) && !queues.has(name)) served.delete(name);
      }
      handOut();
    };
  };

  return {
    get load() {
      return { running: runningAll, waiting: queues.size };
    },
    enter(site, signal) {
      if (signal?.aborted) return Promise.reject(signal.reason);
      const held = running.get(site) ?? 0;
      // A free slot and no one of the site ahead: at once (waiting sites of others are under their
      // own bound, or handOut would have given them this slot).
      if (runningAll < slots && held < perSite && !queues.has(site)) {
        take(site);
        return Promise.resolve(slot(site));
      }
      if (queues.lengthOf(site) >= waitingPerSite) return Promise.reject(saturated());
      return waitInLine(queues, site, {
        maxWaitMs,
        signal,
        started: () => slot(site),
        late: () => Promise.reject(saturated()),
      });
    },
  };
}
