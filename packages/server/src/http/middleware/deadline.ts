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
  const deadline = new RequestDeadline(() => c.req.raw.signal);
  c.set('deadline', deadline);
  let timer: NodeJS.Timeout | undefined;
  const working = work();
  const overdue = new Promise<'late'>((resolve) => {
    timer = setTimeout(() => resolve('late'), ms);
  });
  try {
    if ((await Promise.race([working, overdue])) === 'late' && !deadline.committing) {
      deadline.expire();
      working.catch(() => {});
      throw deadlinePassed(ms);
    }
    await working;
  } finally {
    clearTimeout(timer);
  }
}

/** The 503 of a request not done within `ms` (withDeadline's, and the pipeline's). */
export const deadlinePassed = (ms: number) =>
  serviceUnavailable(`The request was not completed within ${ms} ms; nothing was changed. Try again shortly.`);

/**
 * A request's Deadline. A class, not an object literal: a literal with a getter is made by V8's
 * slow path in the old generation, and so kept everything its closures reached (the request, its
 * context, its answer) alive through every young-generation collection until the next full one:
 * about 5 KB promoted a request, an old generation 4× its live size, 90 MB more resident memory
 * under load (issue 47).
 */
export class RequestDeadline implements Deadline {
  expired = false;
  committing = false;
  #late: AbortController | undefined;
  #signal: AbortSignal | undefined;
  readonly #client: () => AbortSignal;
  /** `client`: the request's own signal (aborted when the client goes away), asked for only when needed. */
  constructor(client: () => AbortSignal) {
    this.#client = client;
  }
  commit(): void {
    if (this.expired) throw serviceUnavailable('The request was not completed in time; nothing was changed.');
    this.committing = true;
  }
  get signal(): AbortSignal {
    if (this.#signal === undefined) {
      // Made only for requests that ask for it: most never wait for a turn.
      this.#late = new AbortController();
      if (this.expired) this.#late.abort(serviceUnavailable('The request was not completed in time.'));
      this.#signal = AbortSignal.any([this.#client(), this.#late.signal]);
    }
    return this.#signal;
  }
  /** The deadline passed: what waits for a turn gives it up. */
  expire(): void {
    this.expired = true;
    this.#late?.abort(serviceUnavailable('The request was not completed in time.'));
  }
}
