import { describe, expect, it } from 'vitest';
import { testApp } from '../testing.ts';
import { listedOriginsCors } from './cors.ts';

const LISTED = 'https://app.example.com';

function corsApp() {
  const app = testApp();
  app.use(
    listedOriginsCors([LISTED], { allowHeaders: ['Authorization'], exposeHeaders: ['X-Request-Id'], maxAge: 600 }),
  );
  // What the routes behind it answer to an OPTIONS that is no preflight of a listed origin.
  app.all('/api/1/user/get', (c) => c.text('route', c.req.method === 'OPTIONS' ? 405 : 200));
  app.notFound((c) => c.text('none', 404));
  return app;
}

const options = (path: string, headers: Record<string, string>) =>
  corsApp().request(path, { method: 'OPTIONS', headers });

describe('listedOriginsCors', () => {
  it("answers a listed origin's preflight on an operation's path itself, naming that path's methods", async () => {
    const response = await options('/api/1/user/get', { Origin: LISTED, 'Access-Control-Request-Method': 'GET' });
    expect(response.status).toBe(204);
    expect(response.headers.get('access-control-allow-origin')).toBe(LISTED);
    expect(response.headers.get('access-control-allow-methods')).toBe('GET,HEAD');
    expect(response.headers.get('access-control-max-age')).toBe('600');
  });

  it.each([
    [
      'another origin',
      '/api/1/user/get',
      { Origin: 'https://evil.example', 'Access-Control-Request-Method': 'GET' },
      405,
    ],
    ['no Access-Control-Request-Method', '/api/1/user/get', { Origin: LISTED }, 405],
    ['no Origin', '/api/1/user/get', { 'Access-Control-Request-Method': 'GET' }, 405],
    [
      'a path that is no operation',
      '/api/1/user/search',
      { Origin: LISTED, 'Access-Control-Request-Method': 'GET' },
      404,
    ],
  ])('leaves an OPTIONS with %s to the routes, without CORS headers', async (_, path, headers, status) => {
    const response = await options(path, headers);
    expect(response.status).toBe(status);
    expect(response.headers.get('access-control-allow-origin')).toBeNull();
    expect(response.headers.get('access-control-allow-methods')).toBeNull();
  });

  it('lets a listed origin read an answer, and names no other', async () => {
    const get = (origin: string) => corsApp().request('/api/1/user/get', { headers: { Origin: origin } });
    expect((await get(LISTED)).headers.get('access-control-allow-origin')).toBe(LISTED);
    expect((await get('https://evil.example')).headers.get('access-control-allow-origin')).toBeNull();
  });
});
