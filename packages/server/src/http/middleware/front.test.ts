import { afterEach, describe, expect, it, vi } from 'vitest';
import type { Metrics } from '../../ops/metrics.ts';
import { arrayLogger } from '../../testing/loggers.ts';
import type { AppDeps } from '../context.ts';
import { problemOf, testApp } from '../testing.ts';
import { accessLogger } from './access-log.ts';
import { listedOriginsCors } from './cors.ts';
import { front } from './front.ts';

// The front step (front.ts) is what were six middlewares; these are the orders between them that
// a single step could get wrong. request-id.test.ts and access-log.test.ts hold its other rules.
const LISTED = 'https://app.example.com';
const DEADLINE_MS = 30;

afterEach(() => {
  vi.useRealTimers();
});

function frontApp(options: { cors?: boolean } = {}) {
  const { logger, lines } = arrayLogger();
  const observed: [string, string, number][] = [];
  const metrics = {
    observeRequest: (method: string, route: string, status: number) => void observed.push([method, route, status]),
  };
  const deps = { logger } as unknown as AppDeps;
  const app = testApp({ deps });
  app.use(
    front({
      deps,
      metrics: metrics as unknown as Metrics,
      timeoutFor: () => DEADLINE_MS,
      ...(options.cors
        ? {
            cors: listedOriginsCors([LISTED], {
              allowHeaders: ['Authorization'],
              exposeHeaders: ['X-Request-Id'],
              maxAge: 600,
            }),
          }
        : {}),
    }),
  );
  app.get('/api/1/user/get', (c) => c.json({ ok: true }));
  app.get('/api/1/user/slow', async (c) => {
    await new Promise((resolve) => setTimeout(resolve, DEADLINE_MS * 4));
    return c.json({ ok: true });
  });
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  return { app, lines, observed };
}

describe('the front step', () => {
  it('marks API answers no-store and counts them by route pattern; other paths are not marked', async () => {
    const { app, observed } = frontApp();
    const api = await app.request('/api/1/user/get');
    expect(api.headers.get('Cache-Control')).toBe('no-store');
    const health = await app.request('/healthz');
    expect(health.headers.get('Cache-Control')).toBeNull();
    expect(health.headers.get('X-Content-Type-Options')).toBe('nosniff');
    await app.request('/api/nothing/here');
    await app.request('/nothing');
    expect(observed).toEqual([
      ['GET', '/api/1/user/get', 200],
      ['GET', '/healthz', 200],
      ['GET', '/api/*', 404],
      ['GET', '/*', 404],
    ]);
  });

  it("renders the deadline's 503 where it is thrown: no-store, request id, counted and logged with its code", async () => {
    vi.useFakeTimers();
    const { app, lines, observed } = frontApp();
    const answer = app.request('/api/1/user/slow', { headers: { 'X-Request-Id': 'slow-1' } });
    await vi.advanceTimersByTimeAsync(DEADLINE_MS);
    const response = await answer;
    expect(response.status).toBe(503);
    expect(response.headers.get('Retry-After')).toBe('1');
    expect(response.headers.get('Cache-Control')).toBe('no-store');
    expect(response.headers.get('X-Request-Id')).toBe('slow-1');
    expect(await problemOf(response)).toMatchObject({ code: 'service_unavailable', requestId: 'slow-1' });
    expect(observed).toEqual([['GET', '/api/1/user/slow', 503]]);
    expect(lines).toEqual([
      expect.objectContaining({ requestId: 'slow-1', status: 503, code: 'service_unavailable', msg: 'request' }),
    ]);
  });

  it('answers a preflight before the metrics and no-store, but with its request id and access line', async () => {
    const { app, lines, observed } = frontApp({ cors: true });
    const response = await app.request('/api/1/user/get', {
      method: 'OPTIONS',
      headers: { Origin: LISTED, 'Access-Control-Request-Method': 'GET', 'X-Request-Id': 'pre-1' },
    });
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe(LISTED);
    expect(response.headers.get('Cache-Control')).toBeNull();
    expect(response.headers.get('X-Request-Id')).toBe('pre-1');
    expect(observed).toEqual([]);
    expect(lines).toEqual([
      expect.objectContaining({ requestId: 'pre-1', method: 'OPTIONS', route: '/api/*', status: 204 }),
    ]);
    const read = await app.request('/api/1/user/get', { headers: { Origin: LISTED } });
    expect(read.headers.get('access-control-allow-origin')).toBe(LISTED);
    expect(read.headers.get('Cache-Control')).toBe('no-store');
    expect(observed).toEqual([['GET', '/api/1/user/get', 200]]);
  });

  it('writes the access line as the base logger would: the same fields, in the same order', () => {
    const { logger, lines } = arrayLogger();
    const fields = {
      requestId: 'r-1',
      traceId: 't',
      parentId: 'p',
      method: 'GET',
      route: '/api/1/user/get',
      status: 200,
      durationMs: 1.5,
      tokenId: 'tok',
      site: 'shop',
    };
    logger.info(fields, 'request');
    accessLogger(logger).info(fields, 'request');
    const [base, access] = lines.map(({ time, ...rest }) => rest);
    expect(JSON.stringify(access)).toBe(JSON.stringify(base));
  });
});
