// Preflights as the spec states them, on the server with CORS_ORIGINS and on the mock with
// MOCK_CORS_ORIGINS: 204 only for a listed origin on a path of an operation, naming that path's
// methods; any other OPTIONS is answered as any other method would be (405 with Allow, or 404).
// A black-box review found every OPTIONS under /api/ answered 204 (issue 17, finding 8).
import type { Problem } from '@user-accounts/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API } from './harness.ts';
import { embeddedServer, mockTarget, type Target } from './targets.ts';

const LISTED = 'https://app.example.com';
const REFUSED = 'https://evil.example';

/** A browser's preflight; `method` null: an OPTIONS that is no preflight. */
const preflight = (target: Target, path: string, origin: string, method: string | null = 'GET') =>
  fetch(`${target.baseUrl}${path}`, {
    method: 'OPTIONS',
    headers: {
      Origin: origin,
      ...(method === null ? {} : { 'Access-Control-Request-Method': method }),
      'Access-Control-Request-Headers': 'authorization',
    },
  });

async function expectProblem(response: Response, status: number, code: string): Promise<void> {
  expect(response.status).toBe(status);
  expect(response.headers.get('content-type')).toBe('application/problem+json');
  const problem = (await response.json()) as Problem;
  expect(problem.code).toBe(code);
  expect(response.headers.get('x-request-id')).toBe(problem.requestId);
  expect(response.headers.get('access-control-allow-origin')).toBeNull();
}

describe.each([
  ['the server, with CORS_ORIGINS', () => embeddedServer({ env: { CORS_ORIGINS: `https://other.example,${LISTED}` } })],
  ['the mock, with MOCK_CORS_ORIGINS', () => mockTarget({ corsOrigins: [LISTED] }).start()],
])('CORS on %s', (_, start) => {
  let target: Target;
  beforeAll(async () => {
    target = await start();
  }, 120_000);
  afterAll(async () => {
    await target?.close();
  });

  it("answers a listed origin's preflight on an operation's path 204, with that path's methods", async () => {
    for (const [path, methods] of [
      [`${API}/get`, 'GET,HEAD'],
      [`${API}/create`, 'POST'],
      [`${API}/delete`, 'DELETE'],
    ] as const) {
      const response = await preflight(target, path, LISTED);
      expect(response.status).toBe(204);
      expect(response.headers.get('access-control-allow-origin')).toBe(LISTED);
      expect(response.headers.get('access-control-allow-methods')).toBe(methods);
      expect(response.headers.get('access-control-allow-headers')).toMatch(/Authorization/);
      expect(response.headers.get('vary')).toMatch(/Origin/);
    }
  });

  it("answers another origin's preflight 405 method_not_allowed with Allow, as CORS off would", async () => {
    for (const origin of [REFUSED, 'null', `${LISTED}.evil.example`]) {
      const response = await preflight(target, `${API}/get`, origin);
      expect(response.headers.get('allow')).toBe('GET, HEAD');
      await expectProblem(response, 405, 'method_not_allowed');
    }
  });

  it('answers an OPTIONS that is no preflight 405, even from a listed origin', async () => {
    await expectProblem(await preflight(target, `${API}/update`, LISTED, null), 405, 'method_not_allowed');
  });

  it('answers a preflight on a path that is no operation 404 not_found, even from a listed origin', async () => {
    for (const path of [`${API}/search`, '/api/2/user/get', `${API}/get/`, '/api/']) {
      await expectProblem(await preflight(target, path, LISTED), 404, 'not_found');
    }
  });

  it('lets a listed origin read the answers, and no other', async () => {
    const get = (origin: string) =>
      fetch(`${target.baseUrl}${API}/get?email=a@example.com`, {
        headers: { Authorization: target.token, Origin: origin },
      });
    expect((await get(LISTED)).headers.get('access-control-allow-origin')).toBe(LISTED);
    expect((await get(REFUSED)).headers.get('access-control-allow-origin')).toBeNull();
  });
});
