// Failed authentications are limited per client address, on a real server: a flood of guessed
// tokens is refused before any lookup (it was 8,000 × 401 in 3 s, each a database query), while a
// client that shares the address and already authenticated keeps working.
import { randomBytes } from 'node:crypto';
import { DEFAULT_AUTH_FAILURE_LIMIT } from '@user-accounts/server/env';
import { afterEach, describe, expect, it } from 'vitest';
import { API, GHOST } from './harness.ts';
import { createSpecChecker } from './spec-check.ts';
import { embeddedServer, type ServerOptions, type Target } from './targets.ts';

const checker = createSpecChecker();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

async function embedded(options: ServerOptions): Promise<Target> {
  const target = await embeddedServer(options);
  cleanups.push(() => target.close());
  return target;
}

/** A get with this token; every answer must be one the spec documents, headers included. */
async function get(target: Target, token: string): Promise<Response> {
  const path = `${API}/get`;
  const response = await fetch(`${target.baseUrl}${path}?_userId=${GHOST}`, { headers: { Authorization: token } });
  expect(await checker.check('GET', path, response.clone())).toEqual([]);
  return response;
}

const guess = () => `ua_${randomBytes(32).toString('base64url')}`;

describe('failed authentications per client address', () => {
  it('refuses a flood of guessed tokens with 429 after 100 failures in 10 s (the default), before looking them up', async () => {
    const target = await embedded({ env: { AUTH_FAILURE_LIMIT: DEFAULT_AUTH_FAILURE_LIMIT } });
    const shared = await target.createToken({ label: 'a client behind the same proxy' });
    const idle = await target.createToken({ label: 'a client that has not called yet' });
    const earlier = await target.createToken({ label: 'a client that called before the attack' });
    // Before any failure: accepted, and remembered although its address had failed nothing yet.
    expect((await get(target, earlier.token)).status).toBe(404);

    expect((await get(target, guess())).status).toBe(401);
    // A client on the same address authenticates while the failures are counted: it keeps working.
    expect((await get(target, shared.token)).status).toBe(404);
    const statuses: number[] = [];
    const batch = async () => {
      for (let i = 0; i < 15; i++) statuses.push((await get(target, guess())).status);
    };
    await Promise.all(Array.from({ length: 20 }, batch)); // 300 guesses, 20 at a time

    expect(statuses.filter((s) => s === 401)).toHaveLength(99);
    expect(statuses.filter((s) => s === 429)).toHaveLength(201);

    const refused = await get(target, guess());
    expect(refused.status).toBe(429);
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThanOrEqual(1);
    expect(retryAfter).toBeLessThanOrEqual(10);
    expect(refused.headers.get('ratelimit-policy')).toBe('"failed_auth";q=100;w=10');
    expect(refused.headers.get('ratelimit')).toBe(`"failed_auth";r=0;t=${retryAfter}`);
    expect(refused.headers.get('x-request-id')).toBeTruthy();
    expect(await refused.json()).toMatchObject({ status: 429, code: 'rate_limited' });

    // A valid token never seen from this address is not even looked up, so it is refused too;
    // the one that authenticated during the failures still is.
    expect((await get(target, idle.token)).status).toBe(429);
    expect((await get(target, shared.token)).status).toBe(404);
    expect((await get(target, earlier.token)).status).toBe(404);
    expect(target.logs.some((line) => line.includes('failed authentications over the limit'))).toBe(true);
  });

  it('lets the address try again once its window ends', async () => {
    const target = await embedded({ env: { AUTH_FAILURE_LIMIT: '3/1s' } });
    for (let i = 0; i < 3; i++) expect((await get(target, guess())).status).toBe(401);
    const refused = await get(target, target.token);
    expect(refused.status).toBe(429);
    expect(refused.headers.get('retry-after')).toBe('1');
    await new Promise((resolve) => setTimeout(resolve, 1_000));
    expect((await get(target, target.token)).status).toBe(404);
    expect((await get(target, guess())).status).toBe(401);
  });
});
