import { describe, expect, it, onTestFinished, vi } from 'vitest';
import { parseTrustedProxies, type TrustedProxies } from '../../auth/client-address.ts';
import { addressKey, createAuthFailures } from '../../auth/failed-authentications.ts';
import type { TokenInfo, TokenVerifier } from '../../auth/tokens.ts';
import { arrayLogger } from '../../testing/loggers.ts';
import { problemOf, testApp } from '../testing.ts';
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

/** 401; the challenge says `error="invalid_token"` (RFC 6750 §3) unless no token was sent. */
async function expectUnauthorized(response: Response, tokenSent = true) {
  expect(response.status).toBe(401);
  expect(response.headers.get('WWW-Authenticate')).toBe(
    tokenSent ? 'Bearer realm="user-accounts", error="invalid_token"' : 'Bearer realm="user-accounts"',
  );
  expect(await problemOf(response)).toMatchObject({ status: 401, code: 'unauthorized', requestId: 'test-request-id' });
}

describe('requireToken', () => {
  it('refuses a request without Authorization, without asking the verifier', async () => {
    const { app, asked } = tokenApp();
    await expectUnauthorized(await app.request('/t'), false);
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

describe('requireToken with a limit of failed authentications per address', () => {
  const LIMIT = { limit: 3, windowSeconds: 10 };
  /** What @hono/node-server hands the app: the connection, whose peer is the client's address. */
  const from = (remoteAddress: string) => ({ incoming: { socket: { remoteAddress } } });

  function limitedApp(options: { verify?: TokenVerifier['verify']; trustedProxies?: string } = {}) {
    let clock = 1_000_000;
    const asked: string[] = [];
    const known = new Set([KNOWN]);
    const tokens: TokenVerifier = {
      verify:
        options.verify ??
        (async (token) => {
          asked.push(token);
          return known.has(token) ? WRITER : undefined;
        }),
      flushLastUsed: async () => {},
    };
    const authFailures = createAuthFailures(LIMIT, { now: () => clock });
    const { logger, lines } = arrayLogger();
    const trustedProxies =
      options.trustedProxies === undefined
        ? undefined
        : (parseTrustedProxies(options.trustedProxies) as TrustedProxies);
    const app = testApp({ deps: { tokens, authFailures, logger, ...(trustedProxies ? { trustedProxies } : {}) } });
    app.get('/t', requireToken(), (c) => c.json(c.get('token')));
    const call = (address: string, token: string, forwardedFor?: string) =>
      app.request(
        '/t',
        { headers: { Authorization: `Bearer ${token}`, ...(forwardedFor ? { 'X-Forwarded-For': forwardedFor } : {}) } },
        from(address),
      );
    return { call, asked, known, authFailures, lines, advance: (ms: number) => (clock += ms) };
  }

  it('refuses an address over its limit with 429 before looking the token up; other addresses go on', async () => {
    const { call, asked, lines } = limitedApp();
    for (let i = 0; i < 3; i++) await expectUnauthorized(await call('203.0.113.7', `ua_guess_${i}`));
    expect(asked).toHaveLength(3);
    expect(lines.filter((l) => String(l.msg).startsWith('failed authentications over the limit'))).toHaveLength(1);

    for (const token of ['ua_guess_3', KNOWN]) {
      const refused = await call('203.0.113.7', token);
      expect(refused.status).toBe(429);
      expect(refused.headers.get('Retry-After')).toBe('10');
      expect(refused.headers.get('RateLimit-Policy')).toBe('"failed_auth";q=3;w=10');
      expect(refused.headers.get('RateLimit')).toBe('"failed_auth";r=0;t=10');
      expect(refused.headers.get('WWW-Authenticate')).toBeNull();
      expect(await problemOf(refused)).toMatchObject({ status: 429, code: 'rate_limited' });
    }
    expect(asked).toHaveLength(3); // neither the guess nor the valid token was looked up

    await expectUnauthorized(await call('198.51.100.1', 'ua_guess_elsewhere'));
    expect((await call('198.51.100.1', KNOWN)).status).toBe(200);
  });

  it('ignores X-Forwarded-For by default: a client cannot escape its count by writing one', async () => {
    const { call, asked } = limitedApp();
    for (let i = 0; i < 3; i++) await expectUnauthorized(await call('203.0.113.7', `ua_guess_${i}`, `198.51.100.${i}`));
    expect((await call('203.0.113.7', 'ua_guess_3', '198.51.100.99')).status).toBe(429);
    expect(asked).toHaveLength(3);
  });

  it('counts the client a trusted proxy names (TRUSTED_PROXIES), not the proxy; others still by their own address', async () => {
    const { call, asked } = limitedApp({ trustedProxies: '10.0.0.0/8' });
    // Through the balancer: the attacker's failures are its own, the proxy's other clients go on.
    for (let i = 0; i < 3; i++) await expectUnauthorized(await call('10.0.0.5', `ua_guess_${i}`, `198.51.100.1`));
    expect((await call('10.0.0.5', 'ua_guess_3', '198.51.100.1')).status).toBe(429);
    expect((await call('::ffff:10.0.0.6', KNOWN, '203.0.113.50')).status).toBe(200);
    await expectUnauthorized(await call('10.0.0.5', 'ua_guess_other', '203.0.113.51'));
    // What the attacker writes in front of the proxy's entry changes nothing.
    expect((await call('10.0.0.5', 'ua_guess_4', '203.0.113.99, 198.51.100.1')).status).toBe(429);
    // An untrusted peer's header is still ignored, even one naming a fresh address.
    for (let i = 0; i < 3; i++) await call('192.0.2.1', `ua_direct_${i}`, `203.0.113.${60 + i}`);
    expect((await call('192.0.2.1', 'ua_direct_3', '203.0.113.70')).status).toBe(429);
    expect(asked).toHaveLength(8);
  });

  it('lets the address try again once its window ends, and says how long to wait until then', async () => {
    const { call, asked, advance } = limitedApp();
    for (let i = 0; i < 3; i++) await call('203.0.113.7', `ua_guess_${i}`);
    advance(6_500);
    expect((await call('203.0.113.7', 'ua_guess_3')).headers.get('Retry-After')).toBe('4');
    advance(3_500);
    await expectUnauthorized(await call('203.0.113.7', 'ua_guess_4'));
    expect((await call('203.0.113.7', KNOWN)).status).toBe(200);
    expect(asked).toEqual(['ua_guess_0', 'ua_guess_1', 'ua_guess_2', 'ua_guess_4', KNOWN]);
  });

  it('counts an IPv6 client by its /64, and an IPv4-mapped address as the IPv4 address', async () => {
    const { call } = limitedApp();
    await call('2001:db8::1', 'ua_a');
    await call('2001:db8:0:0:ffff::2', 'ua_b');
    await call('2001:0db8:0000:0000:1:2:3:4', 'ua_c');
    expect((await call('2001:db8::9', 'ua_d')).status).toBe(429);
    expect((await call('2001:db8:0:1::1', 'ua_e')).status).toBe(401);

    await call('::ffff:192.0.2.1', 'ua_a');
    await call('192.0.2.1', 'ua_b');
    await call('::ffff:192.0.2.1', 'ua_c');
    expect((await call('192.0.2.1', 'ua_d')).status).toBe(429);
  });

  it('keeps letting through a token accepted from an address with failures (clients behind one proxy), until it fails', async () => {
    const { call, asked, known } = limitedApp();
    await call('10.0.0.1', 'ua_guess_0');
    expect((await call('10.0.0.1', KNOWN)).status).toBe(200); // accepted while the address has failures
    await call('10.0.0.1', 'ua_guess_1');
    await call('10.0.0.1', 'ua_guess_2');
    expect((await call('10.0.0.1', 'ua_guess_3')).status).toBe(429);
    expect((await call('10.0.0.1', KNOWN)).status).toBe(200);
    expect(asked.filter((t) => t === KNOWN)).toHaveLength(2);

    known.delete(KNOWN); // revoked: its next failure takes its pass away
    await expectUnauthorized(await call('10.0.0.1', KNOWN));
    expect((await call('10.0.0.1', KNOWN)).status).toBe(429);
    expect(asked.filter((t) => t === KNOWN)).toHaveLength(3);
  });

  it('does not let a burst of concurrent lookups from a failing address outrun the limit', async () => {
    // Each lookup takes 20 ms of a fake clock: the whole burst arrives while the first are out.
    vi.useFakeTimers();
    onTestFinished(() => {
      vi.useRealTimers();
    });
    const asked: string[] = [];
    const { call } = limitedApp({
      verify: async (token) => {
        asked.push(token);
        await new Promise((resolve) => setTimeout(resolve, 20));
        return undefined;
      },
    });
    const first = call('203.0.113.7', 'ua_first');
    await vi.advanceTimersByTimeAsync(20);
    await first;
    const burst = Promise.all(
      Array.from({ length: 10 }, async (_, i) => (await call('203.0.113.7', `ua_burst_${i}`)).status),
    );
    await vi.advanceTimersByTimeAsync(20);
    const statuses = await burst;
    expect(statuses.filter((s) => s === 401)).toHaveLength(2);
    expect(statuses.filter((s) => s === 429)).toHaveLength(8);
    expect(asked).toHaveLength(3);
  });

  it('gives back the slot of a lookup that failed for another reason (the database down)', async () => {
    let down = false;
    const { call } = limitedApp({
      verify: async (token) => {
        if (down) throw new Error('database unavailable');
        return token === KNOWN ? WRITER : undefined;
      },
    });
    await call('203.0.113.7', 'ua_first');
    down = true;
    for (let i = 0; i < 5; i++) await expect(call('203.0.113.7', KNOWN)).rejects.toThrow('database unavailable');
    down = false;
    expect((await call('203.0.113.7', KNOWN)).status).toBe(200);
  });

  it('stores nothing for requests that succeed from addresses without failures', async () => {
    const { call, authFailures } = limitedApp();
    for (let i = 0; i < 50; i++) expect((await call(`192.0.2.${i}`, KNOWN)).status).toBe(200);
    expect(authFailures.size()).toEqual({ addresses: 0, tokens: 0 });
  });
});

describe('createAuthFailures', () => {
  it('holds at most maxAddresses addresses and maxTokens tokens, forgetting the oldest first', async () => {
    let clock = 1_000_000;
    const failures = createAuthFailures(
      { limit: 2, windowSeconds: 60 },
      { maxAddresses: 100, maxTokens: 10, now: () => clock },
    );
    for (let i = 0; i < 1_000; i++) {
      clock += 1;
      failures.attempt(`10.0.${i >> 8}.${i & 255}`, 'ua_guess').done('failed');
      failures.attempt(`10.0.${i >> 8}.${i & 255}`, `ua_valid_${i}`).done('accepted');
    }
    expect(failures.size()).toEqual({ addresses: 100, tokens: 10 });
    // The newest addresses are still counted; the oldest were forgotten.
    failures.attempt('10.0.3.231', 'ua_guess').done('failed');
    expect(failures.attempt('10.0.3.231', 'ua_guess').retryAfter).toBeGreaterThan(0);
    failures.attempt('10.0.0.0', 'ua_guess').done('failed');
    expect(failures.attempt('10.0.0.0', 'ua_guess').retryAfter).toBe(0);
  });

  it('forgets an address an hour after its last failure', () => {
    let clock = 1_000_000;
    const failures = createAuthFailures({ limit: 5, windowSeconds: 10 }, { now: () => clock });
    failures.attempt('10.0.0.1', 'ua_guess').done('failed');
    clock += 3_600_001;
    failures.attempt('10.0.0.2', 'ua_guess').done('failed');
    expect(failures.size().addresses).toBe(1);
  });
});

describe('addressKey', () => {
  it.each([
    ['203.0.113.7', '203.0.113.7'],
    ['::ffff:203.0.113.7', '203.0.113.7'],
    ['2001:db8::1', '2001:db8:0:0::/64'],
    ['2001:0DB8:0000:0000:0000:0000:0000:0001', '2001:db8:0:0::/64'],
    ['2001:db8:1:2:3:4:5:6', '2001:db8:1:2::/64'],
    ['::1', '0:0:0:0::/64'],
    ['fe80::1%eth0', 'fe80:0:0:0::/64'],
    [undefined, 'unknown'],
  ])('%s → %s', (address, key) => {
    expect(addressKey(address)).toBe(key);
  });
});
