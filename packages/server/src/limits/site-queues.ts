// The waiting lines of the per-site bounds (fair-lane.ts, heavy-reads.ts, transactions.ts): each
// site's waiters first come, first served, the sites in the order they came, and how many wait
// in all; and a place in such a line that a timeout or the request's end takes back.

/** Each site's waiters in line, and the sites in the order their first waiter came. */
export class SiteQueues<W> {
  readonly #queues = new Map<string, W[]>();
  #size = 0;

  /** Waiters of every site. */
  get size(): number {
    return this.#size;
  }
  /** Waiters of `site`. */
  lengthOf(site: string): number {
    return this.#queues.get(site)?.length ?? 0;
  }
  has(site: string): boolean {
    return this.#queues.has(site);
  }
  /** The sites with waiters, the longest-waiting first (or as toBack left them). */
  sites(): IterableIterator<string> {
    return this.#queues.keys();
  }
  entries(): IterableIterator<[string, readonly W[]]> {
    return this.#queues.entries();
  }
  first(site: string): W | undefined {
    return this.#queues.get(site)?.[0];
  }
  last(site: string): W | undefined {
    return this.#queues.get(site)?.at(-1);
  }
  push(site: string, waiter: W): void {
    const queue = this.#queues.get(site);
    if (queue === undefined) this.#queues.set(site, [waiter]);
    else queue.push(waiter);
    this.#size++;
  }
  /** Takes `waiter` out of `site`'s line; false when it is not in it (started, refused or gone). */
  remove(site: string, waiter: W): boolean {
    const queue = this.#queues.get(site);
    const index = queue?.indexOf(waiter) ?? -1;
    if (queue === undefined || index < 0) return false;
    queue.splice(index, 1);
    if (queue.length === 0) this.#queues.delete(site);
    this.#size--;
    return true;
  }
  /** Takes `site`'s first waiter out of the line. */
  shift(site: string): W | undefined {
    const waiter = this.first(site);
    if (waiter !== undefined) this.remove(site, waiter);
    return waiter;
  }
  /** Moves `site`, with what it has waiting, behind every other site (for ties). */
  toBack(site: string): void {
    const queue = this.#queues.get(site);
    if (queue === undefined) return;
    this.#queues.delete(site);
    this.#queues.set(site, queue);
  }
}

/** A waiter a freed place is handed to. */
export interface Waiter {
  start(): void;
}

/**
 * A place in `site`'s line of `queues`, resolved with `started()` when a freed place is handed to
 * it (its start()), with `late()` when it is still waiting after `maxWaitMs`, and rejected with
 * `signal`'s reason when the request ends while it waits: either way it leaves the line.
 */
export function waitInLine<T>(
  queues: SiteQueues<Waiter>,
  site: string,
  options: { maxWaitMs: number; signal?: AbortSignal | undefined; started: () => T; late: () => T | Promise<T> },
): Promise<T> {
  const { maxWaitMs, signal, started, late } = options;
  return new Promise<T>((resolve, reject) => {
    const done = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
    };
    const waiter: Waiter = {
      start() {
        done();
        resolve(started());
      },
    };
    const timer = setTimeout(() => {
      if (queues.remove(site, waiter)) {
        done();
        resolve(late());
      }
    }, maxWaitMs);
    const onAbort = () => {
      if (queues.remove(site, waiter)) {
        done();
        reject(signal!.reason);
      }
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    queues.push(site, waiter);
  });
}
