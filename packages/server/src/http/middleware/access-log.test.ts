import { type LoggerOptions, pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { loggerOptions } from '../../assemble.ts';
import type { TokenInfo } from '../../auth/tokens.ts';
import { ApiError } from '../../errors.ts';
import { arrayLogger } from '../../testing/loggers.ts';
import type { AppDeps } from '../context.ts';
import { renderProblem } from '../errors.ts';
import { testApp } from '../testing.ts';
import { type AccessLineWriter, directAccessLine, writeAccessLine } from './access-log.ts';
import { requireToken } from './auth.ts';
import { front } from './front.ts';

const SECRET_TOKEN = 'ua_secret-token-value';
const SECRET_EMAIL = 'private.person@example.com';
const SHOP: TokenInfo = { id: 'tok-shop', site: 'shop', scopes: ['read'], digest: 'digest-of-the-secret-token' };

// As in the service: the front step writes the line (with the request id) once the answer is
// made, and the token is checked after it, so that a refused token is logged too.
function loggedApp(readiness: 200 | 503 = 200) {
  const { logger, lines } = arrayLogger();
  const tokens = {
    verify: async (token: string) => (token === SECRET_TOKEN ? SHOP : undefined),
    flushLastUsed: async () => {},
  };
  const app = testApp({ deps: { logger, tokens } });
  app.use(front({ deps: { logger, tokens } as unknown as AppDeps }));
  app.get('/api/1/user/get', (c) => c.json({ ok: true }));
  app.get('/users/:id', (c) => c.json({ id: c.req.param('id') }));
  app.post('/refuse', () => {
    throw new ApiError('email_taken', 'taken');
  });
  // As the rate limit answers: a problem rendered, not thrown.
  app.get('/rendered', (c) => renderProblem(c, new ApiError('rate_limited', 'slow down')));
  app.get('/private', requireToken(), (c) => c.json({ ok: true }));
  app.get('/readyz', (c) => c.json({ status: readiness === 200 ? 'ready' : 'not ready' }, readiness));
  app.get('/healthz', (c) => c.json({ status: 'ok' }));
  return { app, lines };
}

describe('the access log (front step)', () => {
  it('writes one line per request with method, route, status, duration and request id', async () => {
    const { app, lines } = loggedApp();
    const response = await app.request('/api/1/user/get', { headers: { 'X-Request-Id': 'req-1' } });
    expect(response.status).toBe(200);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 'info',
      time: expect.stringMatching(/^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{3}Z$/),
      msg: 'request',
      method: 'GET',
      route: '/api/1/user/get',
      status: 200,
      requestId: 'req-1',
    });
    expect(lines[0]!.durationMs).toEqual(expect.any(Number));
    expect(lines[0]!.durationMs).toBeGreaterThanOrEqual(0);
    expect(lines[0]).not.toHaveProperty('code');
    expect(lines[0]).not.toHaveProperty('tokenId');
  });

  it('logs the route pattern, not the path, so that ids in paths stay out of the log', async () => {
    const { app, lines } = loggedApp();
    await app.request('/users/0198c6a4-0000-7000-8000-000000000001');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ route: '/users/:id', status: 200 });
    expect(JSON.stringify(lines)).not.toContain('0198c6a4');
  });

  it('logs the status and the problem code of an error answer, thrown or rendered', async () => {
    const { app, lines } = loggedApp();
    await app.request('/refuse', { method: 'POST' });
    await app.request('/rendered');
    expect(lines).toEqual([
      expect.objectContaining({ method: 'POST', route: '/refuse', status: 409, code: 'email_taken' }),
      expect.objectContaining({ method: 'GET', route: '/rendered', status: 429, code: 'rate_limited' }),
    ]);
  });

  it("names the token's id and site when the request was authenticated, and nothing else of the token", async () => {
    const { app, lines } = loggedApp();
    const response = await app.request('/private', { headers: { Authorization: `Bearer ${SECRET_TOKEN}` } });
    expect(response.status).toBe(200);
    expect(lines).toEqual([
      expect.objectContaining({ route: '/private', status: 200, tokenId: 'tok-shop', site: 'shop' }),
    ]);
    const logged = JSON.stringify(lines);
    for (const secret of [SECRET_TOKEN, SHOP.digest!, 'scopes']) expect(logged).not.toContain(secret);
  });

  it('names no token when authentication failed, and says why', async () => {
    const { app, lines } = loggedApp();
    const response = await app.request('/private', { headers: { Authorization: 'Bearer ua_wrong-token' } });
    expect(response.status).toBe(401);
    expect(lines).toEqual([expect.objectContaining({ route: '/private', status: 401, code: 'unauthorized' })]);
    expect(lines[0]).not.toHaveProperty('tokenId');
    expect(lines[0]).not.toHaveProperty('site');
    expect(JSON.stringify(lines)).not.toContain('ua_wrong-token');
  });

  it('never logs the query string or the Authorization header', async () => {
    const { app, lines } = loggedApp();
    const response = await app.request(`/api/1/user/get?email=${encodeURIComponent(SECRET_EMAIL)}&x=1`, {
      headers: { Authorization: `Bearer ${SECRET_TOKEN}`, Cookie: 'session=cookie-secret' },
    });
    expect(response.status).toBe(200);
    expect(lines).toHaveLength(1);
    const logged = JSON.stringify(lines);
    const secrets = [SECRET_EMAIL, encodeURIComponent(SECRET_EMAIL), 'email=', SECRET_TOKEN, 'Bearer', 'cookie-secret'];
    for (const secret of secrets) {
      expect(logged).not.toContain(secret);
    }
    expect(lines[0]).toMatchObject({ route: '/api/1/user/get' });
  });

  // A balancer asks each replica twice a second: at info that was two lines a second per replica.
  it('logs a health check that succeeds at debug, so that an info log holds only the traffic', async () => {
    const { app, lines } = loggedApp();
    for (const path of ['/readyz', '/healthz']) expect((await app.request(path)).status).toBe(200);
    expect(lines.map((line) => [line.route, line.level])).toEqual([
      ['/readyz', 'debug'],
      ['/healthz', 'debug'],
    ]);
  });

  it('logs a health check that fails at info, as any other request', async () => {
    const { app, lines } = loggedApp(503);
    expect((await app.request('/readyz')).status).toBe(503);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ level: 'info', status: 503 });
  });
});

describe('directAccessLine', () => {
  const linesOf = (options: LoggerOptions) => {
    const lines: string[] = [];
    const logger = pino(options, { write: (line: string) => void lines.push(line) });
    return { logger, lines };
  };
  const args: Parameters<AccessLineWriter> = [
    { requestId: 'r-1', traceId: '0af7651916cd43dd8448eb211c80319c', parentId: 'b7ad6b7169203331' },
    'GET',
    '/api/1/user/get',
    404,
    1.5,
    { id: 'tok-"shop"', site: 'shóp\\', scopes: [] },
    'user_not_found',
  ];

  it("writes the line pino writes for the same fields, with the service's options", () => {
    const direct = linesOf(loggerOptions('info'));
    const viaPino = linesOf(loggerOptions('info'));
    const write = directAccessLine(direct.logger);
    expect(write).toBeDefined();
    write!(...args);
    writeAccessLine(viaPino.logger, 'info', ...args);
    const withoutTime = (line: string) => line.replace(/"time":"[^"]+"/, '"time":"…"');
    expect(direct.lines.map(withoutTime)).toEqual(viaPino.lines.map(withoutTime));
    expect(JSON.parse(direct.lines[0]!)).toMatchObject({ level: 'info', site: 'shóp\\', code: 'user_not_found' });
  });

  it('is not used where pino would write something else (a mixin, other formatters)', () => {
    expect(directAccessLine(linesOf({ ...loggerOptions('info'), mixin: () => ({ extra: 1 }) }).logger)).toBeUndefined();
    expect(directAccessLine(linesOf({ ...loggerOptions('info'), formatters: {} }).logger)).toBeUndefined();
    // Without a time, the line has none, as pino's.
    const untimed = linesOf({ ...loggerOptions('info'), timestamp: false });
    directAccessLine(untimed.logger)!(...args);
    writeAccessLine(untimed.logger, 'info', ...args);
    expect(untimed.lines[0]).toBe(untimed.lines[1]);
  });
});
