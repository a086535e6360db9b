import { describe, expect, it } from 'vitest';
import { ApiError } from '../errors.ts';
import { arrayLogger, testApp } from '../testing/hono.ts';
import { accessLog } from './access-log.ts';
import { requestId } from './request-id.ts';

const SECRET_TOKEN = 'ua_secret-token-value';
const SECRET_EMAIL = 'private.person@example.com';

// As in the service: the request id comes first, so that the access line carries it.
function loggedApp() {
  const { logger, lines } = arrayLogger();
  const app = testApp({ deps: { logger } });
  app.use(requestId());
  app.use(accessLog());
  app.get('/api/1/user/get', (c) => c.json({ ok: true }));
  app.get('/users/:id', (c) => c.json({ id: c.req.param('id') }));
  app.post('/refuse', () => {
    throw new ApiError(409, 'email_taken', 'taken');
  });
  return { app, lines };
}

describe('accessLog', () => {
  it('writes one line per request with method, route, status, duration and request id', async () => {
    const { app, lines } = loggedApp();
    const response = await app.request('/api/1/user/get', { headers: { 'X-Request-Id': 'req-1' } });
    expect(response.status).toBe(200);
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({
      level: 30,
      msg: 'request',
      method: 'GET',
      route: '/api/1/user/get',
      status: 200,
      requestId: 'req-1',
    });
    expect(lines[0]!.durationMs).toEqual(expect.any(Number));
    expect(lines[0]!.durationMs).toBeGreaterThanOrEqual(0);
  });

  it('logs the route pattern, not the path, so that ids in paths stay out of the log', async () => {
    const { app, lines } = loggedApp();
    await app.request('/users/0198c6a4-0000-7000-8000-000000000001');
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatchObject({ route: '/users/:id', status: 200 });
    expect(JSON.stringify(lines)).not.toContain('0198c6a4');
  });

  it('logs the status of an error answer', async () => {
    const { app, lines } = loggedApp();
    await app.request('/refuse', { method: 'POST' });
    expect(lines).toEqual([expect.objectContaining({ method: 'POST', route: '/refuse', status: 409 })]);
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
});
