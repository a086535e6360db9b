import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { ApiError } from '../../errors.ts';
import { problemOf, testApp } from '../testing.ts';
import { deadline } from './deadline.ts';

// On a fake clock: the test moves time, so "late" is late however busy the machine is.
const DEADLINE_MS = 30;
const LATE_MS = DEADLINE_MS * 4;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));
beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

/** The answer to a request sent now, after `ms` of the fake clock. */
async function answerAfter(response: Response | Promise<Response>, ms: number): Promise<Response> {
  await vi.advanceTimersByTimeAsync(ms);
  return response;
}

function deadlineApp() {
  const app = testApp();
  app.use(deadline(DEADLINE_MS));
  return app;
}

describe('deadline', () => {
  it('leaves a request done in time alone', async () => {
    const app = deadlineApp();
    app.get('/fast', (c) => c.json({ done: true }));
    const response = await app.request('/fast');
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ done: true });
  });

  it('answers 503 service_unavailable with Retry-After when the handler is slower than the deadline', async () => {
    const app = deadlineApp();
    let finished = false;
    app.get('/slow', async (c) => {
      await sleep(LATE_MS);
      finished = true;
      return c.json({ done: true });
    });
    const response = await answerAfter(app.request('/slow'), DEADLINE_MS);
    // The caller is answered at the deadline, not when the work ends.
    expect(finished).toBe(false);
    expect(response.status).toBe(503);
    expect(response.headers.get('Retry-After')).toBe('1');
    const problem = await problemOf(response);
    expect(problem).toMatchObject({ status: 503, code: 'service_unavailable' });
    expect(problem.detail).toContain(`${DEADLINE_MS} ms`);
  });

  it('lets a write that called commit() before expiry finish, and answers it however late', async () => {
    const app = deadlineApp();
    app.post('/write', async (c) => {
      c.get('deadline').commit();
      await sleep(LATE_MS);
      return c.json({ written: true }, 201);
    });
    const response = await answerAfter(app.request('/write', { method: 'POST' }), LATE_MS);
    expect(response.status).toBe(201);
    expect(await response.json()).toEqual({ written: true });
  });

  it('makes commit() throw after expiry, so that the late write rolls back', async () => {
    const app = deadlineApp();
    let thrown: unknown;
    const committed = Promise.withResolvers<void>();
    app.post('/write', async (c) => {
      await sleep(LATE_MS);
      try {
        c.get('deadline').commit();
      } catch (error) {
        thrown = error;
      }
      committed.resolve();
      return c.json({ written: true }, 201);
    });
    const response = await answerAfter(app.request('/write', { method: 'POST' }), DEADLINE_MS);
    expect(response.status).toBe(503);
    await vi.advanceTimersByTimeAsync(LATE_MS - DEADLINE_MS);
    await committed.promise;
    expect(thrown).toBeInstanceOf(ApiError);
    expect(thrown).toMatchObject({ status: 503, code: 'service_unavailable' });
  });
});
