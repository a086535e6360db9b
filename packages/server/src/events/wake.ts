// Wakes what waits for new events (long-polls, the webhook sender) when the database says some
// committed (LISTEN on events/queue.ts's channel, one notification per site numbered). A notification
// says only "something new for this site": waiters read what it is themselves, so a missed one
// costs a poll interval, never an event.

export interface Wake {
  /** Called by the listener on each notification: for one site, or (undefined) for any. */
  notify(site?: string): void;
  /**
   * Resolves on the next notification for `site` (or for any site), after `ms`, or when `signal`
   * aborts, whichever is first. Without a site, any notification.
   */
  next(ms: number, signal?: AbortSignal, site?: string): Promise<void>;
  /** Calls `fn` with each notification's site (undefined: any), until the returned function is called. */
  subscribe(fn: (site: string | undefined) => void): () => void;
}

export function createWake(): Wake {
  const subscribers = new Set<(site: string | undefined) => void>();
  const everyNotification = new Set<() => void>();
  /** Long-polls by site: a write of one site wakes only that site's. */
  const bySite = new Map<string, Set<() => void>>();
  const waiting = (site: string | undefined) => {
    if (site === undefined) return everyNotification;
    const set = bySite.get(site) ?? new Set<() => void>();
    bySite.set(site, set);
    return set;
  };
  return {
    notify(site) {
      const woken = [...everyNotification];
      if (site === undefined) for (const set of bySite.values()) woken.push(...set);
      else woken.push(...(bySite.get(site) ?? []));
      for (const fn of woken) fn();
      for (const fn of subscribers) fn(site);
    },
    next(ms, signal, site) {
      return new Promise<void>((resolve) => {
        if (signal?.aborted) return resolve();
        const set = waiting(site);
        const done = () => {
          clearTimeout(timer);
          set.delete(done);
          if (site !== undefined && set.size === 0 && bySite.get(site) === set) bySite.delete(site);
          signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        set.add(done);
        signal?.addEventListener('abort', done, { once: true });
      });
    },
    subscribe(fn) {
      subscribers.add(fn);
      return () => subscribers.delete(fn);
    },
  };
}
