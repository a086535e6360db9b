import type { Context, MiddlewareHandler } from 'hono';
import { serviceUnavailable } from '../../errors.ts';
import type { AppEnv } from '../context.ts';

export interface Deadline {
  /**
   * The point of no return of a write, called inside its transaction just before it commits:
   * throws (and so rolls back) once the deadline has passed; after it, the write is let finish
   * and answered, however late, because a 503 must mean that nothing changed.
   */
  commit(): void;
  /**
   * Aborts once nothing the request does can reach its caller any more: the deadline has passed,
   * or the client went away. Work that waits its turn (a hash) gives up its place when it aborts.
   */
  readonly signal: AbortSignal;
}

/**
 * Answers 503 service_unavailable when a request is not done within `ms` (a database that hangs,
 * a pool or hash queue that does not drain), so that callers never wait without bound. The work
 * itself goes on in the background until the database's statement_timeout stops it; a write that
 * has not reached `commit()` by then is rolled back there.
 */
export function deadline(msFor: number | ((path: string) => number)): MiddlewareHandler<AppEnv> {
  return async function deadlineMiddleware(c, next) {
    await withDeadline(c, typeof msFor === 'number' ? msFor : msFor(c.req.path), next);
  };
}

/**
 * Runs `work` (the rest of the request) under a deadline of `ms`: deadline() as a function, so that
 * the front step (front.ts) runs it without a middleware frame of its own. Throws the 503.
 */
export async function withDeadline(c: Context<AppEnv>, ms: number, work: () => Promise<unknown>): Promise<void> {
  let expired = false;
  let committing = false;
  // Made only for requests that ask for it: most never wait for a turn.
  let late: AbortController | undefined;
  let signal: AbortSignal | undefined;
  c.set('deadline', {
    commit() {
      if (expired) throw serviceUnavailable('The request was not completed in time; nothing was changed.');
      committing = true;
    },
    get signal() {
      if (signal === undefined) {
        late = new AbortController();
        if (expired) late.abort(serviceUnavailable('The request was not completed in time.'));
        signal = AbortSignal.any([c.req.raw.signal, late.signal]);
      }
      return signal;
    },
  });
  let timer: NodeJS.Timeout | undefined;
  const working = work();
  const overdue = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), ms);
  });
  try {
    if ((await Promise.race([working, overdue])) === 'late' && !committing) {
      expired = true;
      late?.abort(serviceUnavailable('The request was not completed in time.'));
      working.catch(() => {});
      throw serviceUnavailable(
        `The request was not completed within ${ms} ms; nothing was changed. Try again shortly.`,
      );
    }
    await working;
  } finally {
    clearTimeout(timer);
  }
}
