import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../context.ts';
import { serviceUnavailable } from '../errors.ts';

export interface Deadline {
  /**
   * The point of no return of a write, called inside its transaction just before it commits:
   * throws (and so rolls back) once the deadline has passed; after it, the write is let finish
   * and answered, however late, because a 503 must mean that nothing changed.
   */
  commit(): void;
}

/**
 * Answers 503 service_unavailable when a request is not done within `ms` (a database that hangs,
 * a pool or hash queue that does not drain), so that callers never wait without bound. The work
 * itself goes on in the background until the database's statement_timeout stops it; a write that
 * has not reached `commit()` by then is rolled back there.
 */
export function deadline(msFor: number | ((path: string) => number)): MiddlewareHandler<AppEnv> {
  return async function deadlineMiddleware(c, next) {
    const ms = typeof msFor === 'number' ? msFor : msFor(c.req.path);
    let expired = false;
    let committing = false;
    c.set('deadline', {
      commit() {
        if (expired) throw serviceUnavailable('The request was not completed in time; nothing was changed.');
        committing = true;
      },
    });
    let timer: NodeJS.Timeout | undefined;
    const work = next();
    const late = new Promise<'late'>((resolve) => {
      timer = setTimeout(() => resolve('late'), ms);
    });
    try {
      if ((await Promise.race([work, late])) === 'late' && !committing) {
        expired = true;
        work.catch(() => {});
        throw serviceUnavailable(
          `The request was not completed within ${ms} ms; nothing was changed. Try again shortly.`,
        );
      }
      await work;
    } finally {
      clearTimeout(timer);
    }
  };
}
