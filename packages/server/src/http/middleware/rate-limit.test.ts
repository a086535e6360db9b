import { describe, expect, it } from 'vitest';
import type { TokenInfo } from '../../auth/tokens.ts';
import { ApiError } from '../../errors.ts';
import type { Budget, PolicyState, RateLimiter } from '../../limits/rate-limit.ts';
import type { Answer, OpContext } from '../context.ts';
import { problemOf, testPipeline } from '../testing.ts';
import { consumeBudget } from './rate-limit.ts';

const TOKEN: TokenInfo = { id: 'tok-1', site: 'default', scopes: ['read', 'write'] };

/** Where a policy stands after `used` requests in its window. */
function state(name: PolicyState['name'], limit: number, windowSeconds: number, used: number, resetSeconds: number) {
  return { name, limit, windowSeconds, remaining: Math.max(0, limit - used), resetSeconds, exceeded: used > limit };
}

/**
 * A limiter that answers the given states (and `late` for a budget counted late) and records who
 * was counted for what.
 */
function limiter(states: PolicyState[], late: PolicyState[] = []) {
  const counted: [string, Budget | undefined][] = [];
  const countedLate: [string, Budget][] = [];
  const limiter: RateLimiter = {
    consume: async (tokenId, budget) => {
      counted.push([tokenId, budget]);
      return states;
    },
    consumeBudget: async (tokenId, budget) => {
      countedLate.push([tokenId, budget]);
      return late;
    },
    close: async () => {},
  };
  return { limiter, counted, countedLate };
}

/** The pipeline's budget step (pipeline.ts) before a handler: `/create` has the hash budget, `/get` none. */
function limitedApp(states: PolicyState[], handler: (c: OpContext) => Answer = (c) => c.text('ok')) {
  const { limiter: rateLimiter, counted } = limiter(states);
  let ran = 0;
  const handle = (c: OpContext) => {
    ran++;
    return handler(c);
  };
  const app = testPipeline(
    [
      { method: 'POST', path: '/create', budget: 'hash', handle },
      { method: 'GET', path: '/get', handle },
    ],
    { deps: { limiter: rateLimiter }, vars: { token: TOKEN } },
  );
  return { app, counted, ran: () => ran };
}

describe('the budget step', () => {
  it('counts the request against its token and budget, and puts the fields on the answer', async () => {
    const { app, counted } = limitedApp([state('all', 600, 60, 1, 60), state('hash', 100, 3600, 10, 3000)]);
    const response = await app.request('/create', { method: 'POST' });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('ok');
    expect(counted).toEqual([['tok-1', 'hash']]);
    expect(response.headers.get('RateLimit-Policy')).toBe('"all";q=600;w=60, "hash";q=100;w=3600');
    expect(response.headers.get('RateLimit')).toBe('"all";r=599;t=60, "hash";r=90;t=3000');
    expect(response.headers.get('Retry-After')).toBeNull();
  });

  it('counts an operation without a budget of its own against "all" only', async () => {
    const { app, counted } = limitedApp([state('all', 600, 60, 1, 60)]);
    const response = await app.request('/get');
    expect(response.status).toBe(200);
    expect(counted).toEqual([['tok-1', undefined]]);
    expect(response.headers.get('RateLimit-Policy')).toBe('"all";q=600;w=60');
  });

  it('puts the fields on an error answer of a later step too', async () => {
    const { app } = limitedApp([state('all', 5, 60, 2, 30)], () => {
      throw new ApiError('forbidden', 'no');
    });
    const response = await app.request('/create', { method: 'POST' });
    expect(response.status).toBe(403);
    expect(response.headers.get('RateLimit')).toBe('"all";r=3;t=30');
  });

  it('leaves the fields out when the token has no policy', async () => {
    const response = await limitedApp([]).app.request('/create', { method: 'POST' });
    expect(response.status).toBe(200);
    expect(response.headers.get('RateLimit')).toBeNull();
    expect(response.headers.get('RateLimit-Policy')).toBeNull();
  });

  it('answers 429 rate_limited with Retry-After, without running the handler, when a policy is exceeded', async () => {
    // Only the exceeded policy decides the wait: the other one resets later but is not the reason.
    const { app, ran } = limitedApp([state('all', 600, 60, 7, 55), state('hash', 5, 3600, 6, 42)]);
    const response = await app.request('/create', { method: 'POST' });
    expect(response.status).toBe(429);
    expect(response.headers.get('Retry-After')).toBe('42');
    expect(response.headers.get('RateLimit-Policy')).toBe('"all";q=600;w=60, "hash";q=5;w=3600');
    expect(response.headers.get('RateLimit')).toBe('"all";r=593;t=55, "hash";r=0;t=42');
    const problem = await problemOf(response);
    expect(problem).toMatchObject({ status: 429, code: 'rate_limited', requestId: 'test-request-id' });
    expect(problem.detail).toContain('"hash"');
    expect(problem.detail).not.toContain('"all"');
    expect(ran()).toBe(0);
  });

  it('waits for the latest reset when several policies are exceeded', async () => {
    const { app } = limitedApp([state('all', 1, 60, 2, 50), state('hash', 1, 3600, 2, 900)]);
    const response = await app.request('/create', { method: 'POST' });
    expect(response.status).toBe(429);
    expect(response.headers.get('Retry-After')).toBe('900');
    expect((await problemOf(response)).detail).toContain('"all" and "hash"');
  });

  describe('consumeBudget, for a budget an operation learns it spends only late', () => {
    /** `/update` counts "all" up front, then the hash budget where its handler is about to hash. */
    function lateApp(states: PolicyState[], late: PolicyState[], budgetUpFront?: Budget) {
      const { limiter: rateLimiter, counted, countedLate } = limiter(states, late);
      let hashed = 0;
      const app = testPipeline(
        [
          {
            method: 'POST',
            path: '/update',
            ...(budgetUpFront === undefined ? {} : { budget: budgetUpFront }),
            async handle(c) {
              await consumeBudget(c, 'hash');
              hashed++;
              return c.text('ok');
            },
          },
        ],
        { deps: { limiter: rateLimiter }, vars: { token: TOKEN } },
      );
      return { app, counted, countedLate, hashed: () => hashed };
    }

    it('counts it once, and its fields join the answer after "all"', async () => {
      const { app, counted, countedLate } = lateApp([state('all', 600, 60, 1, 60)], [state('hash', 10, 60, 3, 50)]);
      const response = await app.request('/update', { method: 'POST' });
      expect(response.status).toBe(200);
      expect(counted).toEqual([['tok-1', undefined]]);
      expect(countedLate).toEqual([['tok-1', 'hash']]);
      expect(response.headers.get('RateLimit-Policy')).toBe('"all";q=600;w=60, "hash";q=10;w=60');
      expect(response.headers.get('RateLimit')).toBe('"all";r=599;t=60, "hash";r=7;t=50');
    });

    it('does not count it again when the operation was counted against it up front', async () => {
      const { app, countedLate, hashed } = lateApp(
        [state('all', 600, 60, 1, 60), state('hash', 10, 60, 3, 50)],
        [state('hash', 10, 60, 4, 50)],
        'hash',
      );
      const response = await app.request('/update', { method: 'POST' });
      expect(response.status).toBe(200);
      expect(countedLate).toEqual([]);
      expect(hashed()).toBe(1);
      expect(response.headers.get('RateLimit')).toBe('"all";r=599;t=60, "hash";r=7;t=50');
    });

    it('throws 429 rate_limited over it, with Retry-After and every counted policy in the fields', async () => {
      const { app, hashed } = lateApp([state('all', 600, 60, 9, 55)], [state('hash', 2, 60, 3, 17)]);
      const response = await app.request('/update', { method: 'POST' });
      expect(response.status).toBe(429);
      expect(response.headers.get('Retry-After')).toBe('17');
      expect(response.headers.get('RateLimit-Policy')).toBe('"all";q=600;w=60, "hash";q=2;w=60');
      expect(response.headers.get('RateLimit')).toBe('"all";r=591;t=55, "hash";r=0;t=17');
      const problem = await problemOf(response);
      expect(problem).toMatchObject({ status: 429, code: 'rate_limited' });
      expect(problem.detail).toContain('"hash"');
      expect(problem.detail).not.toContain('"all"');
      expect(hashed()).toBe(0);
    });

    it('adds nothing when the budget is off', async () => {
      const { app, hashed } = lateApp([state('all', 600, 60, 1, 60)], []);
      const response = await app.request('/update', { method: 'POST' });
      expect(response.status).toBe(200);
      expect(hashed()).toBe(1);
      expect(response.headers.get('RateLimit-Policy')).toBe('"all";q=600;w=60');
    });
  });
});
