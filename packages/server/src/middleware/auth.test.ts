import { describe, expect, it } from 'vitest';
import { problemOf, testApp } from '../testing/hono.ts';
import type { TokenInfo, TokenVerifier } from '../tokens.ts';
import { requireScope, requireToken } from './auth.ts';

const KNOWN = 'ua_known-token';
const READER: TokenInfo = { id: 'tok-reader', site: 'default', scopes: ['read'] };
const WRITER: TokenInfo = { id: 'tok-writer', site: 'default', scopes: ['read', 'write'] };

/** A verifier that knows one token and records what it was asked, to prove when it is not asked. */
function verifier(info: TokenInfo = WRITER) {
  const asked: string[] = [];
  const tokens: TokenVerifier = {
    verify: async (token) => {
      asked.push(token);
      return token === KNOWN ? info : undefined;
    },
    flushLastUsed: async () => {},
  };
  return { tokens, asked };
}

function tokenApp(info?: TokenInfo) {
  const { tokens, asked } = verifier(info);
  const app = testApp({ deps: { tokens } });
  app.get('/t', requireToken(), (c) => c.json(c.get('token')));
  return { app, asked };
}

async function expectUnauthorized(response: Response) {
  expect(response.status).toBe(401);
  expect(response.headers.get('WWW-Authenticate')).toBe('Bearer realm="user-accounts"');
  expect(await problemOf(response)).toMatchObject({ status: 401, code: 'unauthorized', requestId: 'test-request-id' });
}

describe('requireToken', () => {
  it('refuses a request without Authorization, without asking the verifier', async () => {
    const { app, asked } = tokenApp();
    await expectUnauthorized(await app.request('/t'));
    expect(asked).toEqual([]);
  });

  it.each([
    ['Bearer', `Bearer ${KNOWN}`],
    ['lower-case bearer', `bearer ${KNOWN}`],
    ['bare (the original interface)', KNOWN],
    ['surrounding spaces', `  Bearer   ${KNOWN}  `],
  ])('accepts a known token, %s form, and hands its identity on', async (_, header) => {
    const { app, asked } = tokenApp();
    const response = await app.request('/t', { headers: { Authorization: header } });
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual(WRITER);
    expect(asked).toEqual([KNOWN]);
  });

  it('refuses an unknown token with the same answer as a missing one', async () => {
    const { app, asked } = tokenApp();
    await expectUnauthorized(await app.request('/t', { headers: { Authorization: 'Bearer ua_unknown' } }));
    expect(asked).toEqual(['ua_unknown']);
  });

  it('refuses a token over 512 characters without hashing or looking it up', async () => {
    const { app, asked } = tokenApp();
    await expectUnauthorized(await app.request('/t', { headers: { Authorization: `Bearer ${'x'.repeat(513)}` } }));
    expect(asked).toEqual([]);
    // The bound is inclusive: 512 characters still reach the verifier.
    await expectUnauthorized(await app.request('/t', { headers: { Authorization: 'x'.repeat(512) } }));
    expect(asked).toEqual(['x'.repeat(512)]);
  });
});

describe('requireScope', () => {
  function scopedApp(info: TokenInfo) {
    const { app } = tokenApp(info);
    app.post('/w', requireToken(), requireScope('write'), (c) => c.text('written'));
    return app;
  }

  it('answers 403 forbidden to a valid token without the scope', async () => {
    const response = await scopedApp(READER).request('/w', { method: 'POST', headers: { Authorization: KNOWN } });
    expect(response.status).toBe(403);
    expect(response.headers.get('WWW-Authenticate')).toBeNull();
    const problem = await problemOf(response);
    expect(problem).toMatchObject({ status: 403, code: 'forbidden' });
    expect(problem.detail).toContain('write');
  });

  it('lets a token with the scope through', async () => {
    const response = await scopedApp(WRITER).request('/w', { method: 'POST', headers: { Authorization: KNOWN } });
    expect(response.status).toBe(200);
    expect(await response.text()).toBe('written');
  });
});
