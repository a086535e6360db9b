// The pipeline's steps (pipeline.ts) and their order, each seen from what a caller gets: the
// contract suites run every operation through it on every target; these pin the order of the
// steps where two refusals meet, and what each step puts on every answer.
import { describe, expect, it } from 'vitest';
import type { TokenInfo } from '../auth/tokens.ts';
import { ApiError } from '../errors.ts';
import type { PolicyState, RateLimiter } from '../limits/rate-limit.ts';
import { problemOf, type TestRow, testPipeline } from './testing.ts';

const TOKEN: TokenInfo = { id: 'tok-1', site: 'default', scopes: ['read'] };
const over: PolicyState = { name: 'all', limit: 1, windowSeconds: 60, remaining: 0, resetSeconds: 30, exceeded: true };
const within: PolicyState = { ...over, remaining: 5, exceeded: false, limit: 6 };
const limiterOf = (states: PolicyState[]): RateLimiter => ({
  consume: async () => states,
  consumeBudget: async () => [],
  close: async () => {},
});

let ran = 0;
const rows: TestRow[] = [
  {
    method: 'POST',
    path: '/write',
    scope: 'write',
    request: { body: 'CreateUserRequest' },
    parse: (c) => c.get('body'),
    handle: (c) => {
      ran++;
      return c.json({ ok: true });
    },
  },
  {
    method: 'GET',
    path: '/read',
    scope: 'read',
    handle: (c) => c.json({ result: { read: true } }, 200, { ETag: '"1"' }),
  },
  {
    method: 'GET',
    path: '/crash',
    handle: () => {
      throw new TypeError('a bug of ours');
    },
  },
  {
    method: 'GET',
    path: '/slow',
    handle: (c) => new Promise(() => void c), // never answers
  },
  {
    method: 'GET',
    path: '/stream',
    handle: async (c) =>
      c.body(
        new ReadableStream({
          start(controller) {
            controller.enqueue(new TextEncoder().encode('{"a":1}\n'));
            controller.enqueue(new TextEncoder().encode('{"a":2}\n'));
            controller.close();
          },
        }),
        200,
        { 'Content-Type': 'application/x-ndjson' },
      ),
  },
];

const app = (states: PolicyState[] = [within], token: TokenInfo | null = TOKEN) =>
  testPipeline(rows, {
    deps: { limiter: limiterOf(states), requestTimeoutMs: 200 },
    cors: { origins: new Set(['https://shop.example']), exposeHeaders: ['X-Request-Id', 'ETag'] },
    ...(token === null ? {} : { vars: { token } }),
  });
const badBody = { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: '{' } as const;

describe('the order of the steps', () => {
  it('judges the token before anything of the request: no token and a broken body is 401', async () => {
    const answer = await app([within], null).request('/write', badBody);
    expect((await problemOf(answer)).code).toBe('unauthorized');
    expect(answer.headers.get('RateLimit')).toBeNull(); // not counted: nobody to count against
  });

  it('counts the budget before the scope: over it, a token without the scope is 429, not 403', async () => {
    const answer = await app([over]).request('/write', badBody);
    expect((await problemOf(answer)).code).toBe('rate_limited');
    expect(answer.headers.get('Retry-After')).toBe('30');
  });

  it('judges the scope before the body, and the refusal carries the rate-limit fields', async () => {
    const answer = await app().request('/write', badBody);
    expect((await problemOf(answer)).code).toBe('forbidden');
    expect(answer.headers.get('RateLimit')).toBe('"all";r=5;t=30');
  });

  it('reads the body before the handler: broken JSON is 400 invalid_json and the handler never runs', async () => {
    ran = 0;
    const answer = await app([within], { ...TOKEN, scopes: ['write'] }).request('/write', badBody);
    expect((await problemOf(answer)).code).toBe('invalid_json');
    expect(ran).toBe(0);
  });
});

describe('what every answer carries', () => {
  it('no-store, the request id, nosniff and CORS for a listed origin, on a success and on a refusal', async () => {
    for (const path of ['/read', '/write']) {
      const answer = await app().request(path, {
        method: path === '/read' ? 'GET' : 'POST',
        headers: { Origin: 'https://shop.example', 'X-Request-Id': 'abc-123' },
      });
      expect(answer.headers.get('Cache-Control')).toBe('no-store');
      expect(answer.headers.get('X-Request-Id')).toBe('abc-123');
      expect(answer.headers.get('X-Content-Type-Options')).toBe('nosniff');
      expect(answer.headers.get('Access-Control-Allow-Origin')).toBe('https://shop.example');
      expect(answer.headers.get('Access-Control-Expose-Headers')).toBe('X-Request-Id,ETag');
      expect(answer.headers.get('Vary')).toBe('Origin');
    }
  });

  it('no Access-Control-Allow-Origin for an origin not listed', async () => {
    const answer = await app().request('/read', { headers: { Origin: 'https://evil.example' } });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('Access-Control-Allow-Origin')).toBeNull();
  });

  it('HEAD: the GET’s status and headers, no body', async () => {
    const answer = await app().request('/read', { method: 'HEAD' });
    expect(answer.status).toBe(200);
    expect(answer.headers.get('ETag')).toBe('"1"');
    expect(answer.headers.get('Content-Type')).toBe('application/json');
    expect(await answer.text()).toBe('');
  });

  it('an unexpected error is a 500 internal_error problem, never its message', async () => {
    const answer = await app().request('/crash');
    const problem = await problemOf(answer);
    expect(problem).toMatchObject({ status: 500, code: 'internal_error' });
    expect(JSON.stringify(problem)).not.toContain('a bug of ours');
  });

  it('the deadline: a request not done in time is 503, with the rate-limit fields', async () => {
    const answer = await app().request('/slow');
    expect((await problemOf(answer)).code).toBe('service_unavailable');
    expect(answer.headers.get('Cache-Control')).toBe('no-store');
  });

  it('a streamed answer (an export’s lines) arrives whole', async () => {
    const answer = await app().request('/stream');
    expect(answer.headers.get('Content-Type')).toBe('application/x-ndjson');
    expect(await answer.text()).toBe('{"a":1}\n{"a":2}\n');
  });

  it('an ApiError thrown by a handler is its problem', async () => {
    const crashing = testPipeline(
      [{ method: 'GET', path: '/x', handle: () => Promise.reject(new ApiError('user_not_found', 'none')) }],
      { vars: { token: TOKEN } },
    );
    expect(await problemOf(await crashing.request('/x'))).toMatchObject({ status: 404, code: 'user_not_found' });
  });
});
