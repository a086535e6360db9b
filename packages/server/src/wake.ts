// Wakes what waits for new events (long-polls, the webhook sender) when the database says some
// committed (LISTEN on events.ts's channel). A notification says only "something new": waiters
// read what it is themselves, so a missed one costs a poll interval, never an event.

export interface Wake {
  /** Called by the listener on each notification. */
  notify(): void;
  /** Resolves on the next notification, after `ms`, or when `signal` aborts, whichever is first. */
  next(ms: number, signal?: AbortSignal): Promise<void>;
  /** Calls `fn` on each notification until the returned function is called. */
  subscribe(fn: () => void): () => void;
}

export function createWake(): Wake {
  const subscribers = new Set<() => void>();
  return {
    notify() {
      for (const fn of [...subscribers]) fn();
    },
    next(ms, signal) {
      return new Promise<void>((resolve) => {
        if (signal?.aborted) return resolve();
        const done = () => {
          clearTimeout(timer);
          subscribers.delete(done);
          signal?.removeEventListener('abort', done);
          resolve();
        };
        const timer = setTimeout(done, ms);
        subscribers.add(done);
        signal?.addEventListener('abort', done, { once: true });
      });
    },
    subscribe(fn) {
      subscribers.add(fn);
      return () => subscribers.delete(fn);
    },
  };
}
