// How the service answers an error that is no ApiError (app.ts's errorRenderer): a write that
// collided with concurrent writes and was still rolled back after the unit of work's retries is
// 409 `conflict`, never a 500; the database gone is 503; anything else stays the 500 of a bug.
import { describe, expect, it } from 'vitest';
import { silentLogger } from '../testing/loggers.ts';
import { errorRenderer } from './app.ts';
import type { AppDeps } from './context.ts';
import { problemOf, testApp } from './testing.ts';

/** An error as drizzle throws a driver's: the SQLSTATE at `cause.code`. */
const wrapped = (code: string) =>
  Object.assign(new Error('Failed query: insert …\nparams: secret'), {
    cause: Object.assign(new Error('from the driver'), { code }),
  });

function answerTo(error: unknown) {
  const app = testApp();
  app.onError(errorRenderer({ logger: silentLogger() } as unknown as AppDeps));
  app.get('/x', () => {
    throw error;
  });
  return app.request('/x');
}

describe('errorRenderer', () => {
  it.each(['40P01', '40001'])(
    'answers %s (deadlock, serialization failure) 409 conflict with Retry-After',
    async (code) => {
      const response = await answerTo(wrapped(code));
      expect(response.status).toBe(409);
      expect(response.headers.get('Retry-After')).toBe('1');
      const problem = await problemOf(response);
      expect(problem).toMatchObject({ status: 409, code: 'conflict', title: 'Conflict' });
      expect(problem.detail).toMatch(/nothing was changed/);
      expect(JSON.stringify(problem)).not.toContain('secret');
    },
  );

  it('answers the database gone 503, and anything else 500 internal_error', async () => {
    expect((await problemOf(await answerTo(wrapped('57P01')))).code).toBe('service_unavailable');
    expect((await problemOf(await answerTo(wrapped('23505')))).code).toBe('internal_error');
  });
});
