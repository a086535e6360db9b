import { createHash, randomBytes, randomUUID } from 'node:crypto';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createToken, type TokenInfo } from '../../auth/tokens.ts';
import type { Database } from '../../db/client.ts';
import { idempotencyKeys } from '../../db/schema.ts';
import { ApiError, invalidRequest, serviceUnavailable, writeConflict } from '../../errors.ts';
import { type KeyRing, parseKeyRing } from '../../kernel/secret-box.ts';
import { openMigratedPglite } from '../../testing/templates.ts';
import type { Answer, OpContext, ParseContext } from '../context.ts';
import { problemOf, type TestRow, testPipeline } from '../testing.ts';
import { canonicalJson, MAX_STORED_BODY, parseIdempotencyKey } from './idempotency.ts';

// One embedded database for the file (it takes seconds to start); each test uses keys of its own.
let database: Database;
let token: TokenInfo;

beforeAll(async () => {
  database = await openMigratedPglite();
  const created = await createToken(database.db, { site: 'default', scopes: ['read', 'write'], label: 'idempotency' });
  token = { id: created.id, site: 'default', scopes: ['read', 'write'] };
});
afterAll(() => database?.close());

type Handler = (n: number, c: OpContext) => Answer | Promise<Answer>;

/** The operation's own checks, which the pipeline runs between the key's two steps: refuses `{"invalid": …}`. */
function parse(c: ParseContext): unknown {
  if (Object.hasOwn(c.get('body') as object, 'invalid')) {
    throw invalidRequest('The request body is not valid.', [
      { pointer: '/invalid', code: 'unknown_field', message: 'is not a known field' },
    ]);
  }
  return undefined;
}

/** An idempotent operation's pipeline (pipeline.ts), with a handler that numbers its runs. */
function idempotentRow(handle: TestRow['handle'], leaseMs?: number): TestRow {
  return {
    method: 'POST',
    path: '/api/1/user/create',
    request: { body: 'CreateUserRequest' },
    idempotent: true,
    ...(leaseMs === undefined
      ? {}
      : { bulk: { bodyBytes: 64 * 1024, keptAnswerBytes: MAX_STORED_BODY, timeoutMs: leaseMs } }),
    parse,
    handle,
  };
}

function idempotentApp(handler: Handler = (n, c) => c.json({ run: n }, 201), factorKeys?: KeyRing) {
  let runs = 0;
  const app = testPipeline([idempotentRow((c) => handler(++runs, c))], {
    deps: { database, ...(factorKeys === undefined ? {} : { factorKeys }) },
    vars: { token },
  });
  const send = (key: string | undefined, body: string, requestIdHeader?: string) =>
    app.request('/api/1/user/create', {
      method: 'POST',
      headers: {
        'Content-Type': 'application/json',
        ...(key === undefined ? {} : { 'Idempotency-Key': key }),
        ...(requestIdHeader === undefined ? {} : { 'X-Request-Id': requestIdHeader }),
      },
      body,
    });
  return { send, runs: () => runs };
}

const storedRow = async (key: string) =>
  (await database.db.select().from(idempotencyKeys).where(eq(idempotencyKeys.key, key)))[0];

describe('idempotent', () => {
  it('holds a claimed key as long as its operation may run (import: 120 s), not the 60 s of the others', async () => {
    // Found by review: an import retried after 60 s took the key over and ran a second time.
    for (const [leaseMs, seconds] of [
      [undefined, 60],
      [120_000, 120],
    ] as const) {
      let held: Date | undefined;
      const key = randomUUID();
      const app = testPipeline(
        [
          idempotentRow(async (c) => {
            held = (await storedRow(key))?.lockedUntil ?? undefined;
            return c.json({ ok: true }, 201);
          }, leaseMs),
        ],
        { deps: { database }, vars: { token } },
      );
      const started = Date.now();
      await app.request('/api/1/user/create', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key },
        body: '{}',
      });
      const lease = (held!.getTime() - started) / 1000;
      expect(lease).toBeGreaterThan(seconds - 5);
      expect(lease).toBeLessThan(seconds + 5);
    }
  });

  it('runs every request without a key', async () => {
    const { send, runs } = idempotentApp();
    expect((await send(undefined, '{"a":1}')).status).toBe(201);
    expect((await send(undefined, '{"a":1}')).status).toBe(201);
    expect(runs()).toBe(2);
  });

  it('replays the first answer to a retry with the same key and body, marked Idempotent-Replayed', async () => {
    const { send, runs } = idempotentApp((n, c) =>
      c.json({ run: n }, 201, { Location: `/things/${n}`, 'X-Per-Delivery': `${n}` }),
    );
    const key = randomUUID();
    const first = await send(key, '{"email":"a@example.com","name":"A"}');
    expect(first.status).toBe(201);
    expect(first.headers.get('Idempotent-Replayed')).toBeNull();
    expect(await first.json()).toEqual({ run: 1 });

    // The same body in another key order is the same request.
    const retry = await send(key, '{ "name": "A", "email": "a@example.com" }');
    expect(retry.status).toBe(201);
    expect(retry.headers.get('Idempotent-Replayed')).toBe('true');
    expect(retry.headers.get('Location')).toBe('/things/1');
    expect(retry.headers.get('Content-Type')).toContain('application/json');
    // Only the headers that are part of the answer are kept.
    expect(retry.headers.get('X-Per-Delivery')).toBeNull();
    expect(await retry.json()).toEqual({ run: 1 });
    expect(runs()).toBe(1);
  });

  it('keeps keys apart per token', async () => {
    const key = randomUUID();
    const { send } = idempotentApp();
    expect((await send(key, '{}')).status).toBe(201);
    const other = testPipeline([idempotentRow((c) => c.json({ other: true }, 201))], {
      deps: { database },
      vars: { token: { ...token, id: randomUUID() } },
    });
    const response = await other.request('/api/1/user/create', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json', 'Idempotency-Key': key },
      body: '{}',
    });
    expect(response.headers.get('Idempotent-Replayed')).toBeNull();
    expect(await response.json()).toEqual({ other: true });
  });

  it('answers 422 idempotency_key_reused to the same key with a different body, without running', async () => {
    const { send, runs } = idempotentApp();
    const key = randomUUID();
    expect((await send(key, '{"email":"a@example.com"}')).status).toBe(201);
    const reused = await send(key, '{"email":"b@example.com"}');
    expect(reused.status).toBe(422);
    expect(await problemOf(reused)).toMatchObject({ status: 422, code: 'idempotency_key_reused' });
    expect(runs()).toBe(1);
    // The first answer is still the one kept.
    expect(await (await send(key, '{"email":"a@example.com"}')).json()).toEqual({ run: 1 });
  });

  it("keeps an HMAC under the deployment's key, which a copy of the database cannot recompute (issue 41, F4)", async () => {
    const ringOf = (text: string) => parseKeyRing(text) as KeyRing;
    const k1 = `k1:${randomBytes(32).toString('base64')}`;
    const body = '{"email":"a@example.com","password":"correct horse battery"}';
    const sha256 = createHash('sha256')
      .update(`POST /api/1/user/create\n${canonicalJson(JSON.parse(body))}`)
      .digest('hex');
    const stored: string[] = [];
    for (const ring of [ringOf(k1), ringOf(`k1:${randomBytes(32).toString('base64')}`), undefined]) {
      const { send, runs } = idempotentApp(undefined, ring);
      const key = randomUUID();
      expect((await send(key, body)).status).toBe(201);
      const fingerprint = (await storedRow(key))!.fingerprint;
      expect(fingerprint).not.toContain(sha256);
      expect(fingerprint).not.toContain('correct horse');
      stored.push(fingerprint);
      // The behaviour is the same: the same body replays, another is 422.
      expect((await send(key, body)).headers.get('Idempotent-Replayed')).toBe('true');
      expect((await send(key, '{"email":"b@example.com"}')).status).toBe(422);
      expect(runs()).toBe(1);
    }
    // Two deployments' keys (and the database's own, without FACTOR_ENCRYPTION_KEY) give three values.
    expect(stored[0]).toMatch(/^k1\.[A-Za-z0-9_-]{43}$/);
    expect(stored[2]).toMatch(/^@db\.[A-Za-z0-9_-]{43}$/);
    expect(new Set(stored).size).toBe(3);

    // A key put first in the ring (rotation) still replays what the older one kept.
    const key = randomUUID();
    const before = idempotentApp(undefined, ringOf(k1));
    expect((await before.send(key, body)).status).toBe(201);
    const after = idempotentApp(undefined, ringOf(`k2:${randomBytes(32).toString('base64')},${k1}`));
    expect((await after.send(key, body)).headers.get('Idempotent-Replayed')).toBe('true');
    expect((await after.send(key, '{"email":"b@example.com"}')).status).toBe(422);
    expect(after.runs()).toBe(0);
  });

  it('still answers a key kept before the HMAC (a SHA-256 fingerprint): replayed, or 422 for another body', async () => {
    const key = randomUUID();
    const body = '{"email":"a@example.com"}';
    const legacy = createHash('sha256')
      .update(`POST /api/1/user/create\n${canonicalJson(JSON.parse(body))}`)
      .digest('hex');
    await database.db.insert(idempotencyKeys).values({
      tokenId: token.id,
      key,
      fingerprint: legacy,
      status: 201,
      body: '{"run":0}',
      headers: { 'content-type': 'application/json' },
    });
    const { send, runs } = idempotentApp(
      undefined,
      parseKeyRing(`k1:${randomBytes(32).toString('base64')}`) as KeyRing,
    );
    const replayed = await send(key, body);
    expect(replayed.headers.get('Idempotent-Replayed')).toBe('true');
    expect(await replayed.json()).toEqual({ run: 0 });
    const reused = await send(key, '{"email":"b@example.com"}');
    expect(await problemOf(reused)).toMatchObject({ status: 422, code: 'idempotency_key_reused' });
    expect(runs()).toBe(0);
  });

  it('replays a 4xx problem with the requestId of the delivery it is in', async () => {
    const { send, runs } = idempotentApp(() => {
      throw new ApiError('email_taken', 'An account with this email already exists.');
    });
    const key = randomUUID();
    const first = await send(key, '{}', 'first-delivery');
    expect(first.status).toBe(409);
    expect(await problemOf(first)).toMatchObject({ code: 'email_taken', requestId: 'first-delivery' });

    const retry = await send(key, '{}', 'second-delivery');
    expect(retry.status).toBe(409);
    expect(retry.headers.get('Idempotent-Replayed')).toBe('true');
    expect(await problemOf(retry)).toMatchObject({ code: 'email_taken', requestId: 'second-delivery' });
    expect(runs()).toBe(1);
  });

  it('does not keep a 5xx answer: the retry runs again', async () => {
    const { send, runs } = idempotentApp((n, c) => {
      if (n === 1) throw serviceUnavailable('The database is unavailable; try again shortly.');
      return c.json({ run: n }, 201);
    });
    const key = randomUUID();
    expect((await send(key, '{}')).status).toBe(503);
    expect(await storedRow(key)).toBeUndefined();

    const retry = await send(key, '{}');
    expect(retry.status).toBe(201);
    expect(retry.headers.get('Idempotent-Replayed')).toBeNull();
    expect(await retry.json()).toEqual({ run: 2 });
    expect(runs()).toBe(2);
  });

  it('does not keep a 409 conflict (a write that collided, rolled back): the retry runs again', async () => {
    const { send, runs } = idempotentApp((n, c) => {
      if (n === 1) throw writeConflict();
      return c.json({ run: n }, 201);
    });
    const key = randomUUID();
    const first = await send(key, '{}');
    expect(first.status).toBe(409);
    expect(((await first.json()) as { code: string }).code).toBe('conflict');
    expect(await storedRow(key)).toBeUndefined();

    const retry = await send(key, '{}');
    expect(retry.status).toBe(201);
    expect(retry.headers.get('Idempotent-Replayed')).toBeNull();
    expect(await retry.json()).toEqual({ run: 2 });
    expect(runs()).toBe(2);
  });

  it('takes no key for a request the checks refuse: its retry with the same key is checked afresh', async () => {
    const { send, runs } = idempotentApp();
    const key = randomUUID();
    const refused = await send(key, '{"invalid":true}');
    expect(refused.status).toBe(400);
    expect(await storedRow(key)).toBeUndefined();
    // The same invalid request again is refused again, not replayed.
    const again = await send(key, '{"invalid":true}');
    expect(again.status).toBe(400);
    expect(again.headers.get('Idempotent-Replayed')).toBeNull();

    // Fixed, under the same key: a new request, not 422 idempotency_key_reused.
    const fixed = await send(key, '{"valid":true}');
    expect(fixed.status).toBe(201);
    expect(fixed.headers.get('Idempotent-Replayed')).toBeNull();
    expect(runs()).toBe(1);
    expect(await storedRow(key)).toMatchObject({ status: 201 });
  });

  it('does not keep an answer larger than 4 KiB: the retry runs again', async () => {
    const sized = (bytes: number, c: OpContext) => {
      const padding = 'x'.repeat(bytes - JSON.stringify({ pad: '' }).length);
      return c.json({ pad: padding }, 201);
    };
    const { send, runs } = idempotentApp((n, c) => sized(n === 1 ? MAX_STORED_BODY + 1 : MAX_STORED_BODY, c));
    const key = randomUUID();
    expect((await send(key, '{}')).status).toBe(201);
    expect(await storedRow(key)).toBeUndefined();

    // At the cap it is kept.
    const retry = await send(key, '{}');
    expect(retry.headers.get('Idempotent-Replayed')).toBeNull();
    expect((await retry.text()).length).toBe(MAX_STORED_BODY);
    expect(await storedRow(key)).toMatchObject({ status: 201 });
    expect((await send(key, '{}')).headers.get('Idempotent-Replayed')).toBe('true');
    expect(runs()).toBe(2);
  });

  it('answers 409 idempotency_key_in_use with Retry-After while the first request runs', async () => {
    const release = Promise.withResolvers<void>();
    const { send, runs } = idempotentApp(async (n, c) => {
      await release.promise;
      return c.json({ run: n }, 201);
    });
    const key = randomUUID();
    const first = send(key, '{}');
    // Until the first request has claimed the key, a second one could still take it.
    await expect.poll(() => runs()).toBe(1);
    const second = await send(key, '{}');
    expect(second.status).toBe(409);
    expect(second.headers.get('Retry-After')).toBe('1');
    expect(await problemOf(second)).toMatchObject({ code: 'idempotency_key_in_use' });
    release.resolve();
    expect((await first).status).toBe(201);
    expect(runs()).toBe(1);
  });

  it.each([
    ['a space', 'two words'],
    ['a control character', 'key\u007f'],
    ['non-ASCII', 'clé'],
    ['over 255 characters', 'k'.repeat(256)],
    ['an empty value', ''],
    ['an empty string', '""'],
    ['an unknown escape', '"a\\qb"'],
    ['no closing quote', '"abc'],
    ['a string over 255 characters', `"${'k'.repeat(256)}"`],
    ['non-ASCII in a string', '"clé"'],
  ])('answers 400 invalid_request to a key with %s, without running or storing', async (_, key) => {
    const { send, runs } = idempotentApp();
    const response = await send(key, '{}');
    expect(response.status).toBe(400);
    const problem = await problemOf(response);
    expect(problem).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(problem.errors).toEqual([expect.objectContaining({ pointer: 'Idempotency-Key', code: 'invalid_format' })]);
    expect(runs()).toBe(0);
    expect(await storedRow(key)).toBeUndefined();
  });

  it('reads a quoted key as an RFC 8941 String: the same key as bare, and it may hold a space', async () => {
    const { send, runs } = idempotentApp();
    const key = randomUUID();
    expect((await send(`"${key}"`, '{}')).status).toBe(201);
    const bare = await send(key, '{}');
    expect(bare.headers.get('Idempotent-Replayed')).toBe('true');
    expect(await storedRow(key)).toMatchObject({ status: 201 });

    const spaced = `${key} and words`;
    expect((await send(`"${spaced}"`, '{}')).status).toBe(201);
    expect((await send(`"${spaced}";ignored=?1`, '{}')).headers.get('Idempotent-Replayed')).toBe('true');
    expect(await storedRow(spaced)).toMatchObject({ status: 201 });
    expect(runs()).toBe(2);
  });

  it('accepts a key of 255 printable characters', async () => {
    const key = `${randomUUID()}~!`.padEnd(255, 'k');
    const { send } = idempotentApp();
    expect((await send(key, '{}')).status).toBe(201);
    expect(await storedRow(key)).toMatchObject({ status: 201, tokenId: token.id });
  });
});

describe('canonicalJson', () => {
  it('does not depend on the order of keys, at any depth', () => {
    const a = { email: 'a@example.com', profile: { name: 'A', phone: null }, tags: [{ x: 1, y: 2 }] };
    const b = { tags: [{ y: 2, x: 1 }], profile: { phone: null, name: 'A' }, email: 'a@example.com' };
    expect(canonicalJson(a)).toBe(canonicalJson(b));
    expect(canonicalJson(a)).toBe(
      '{"email":"a@example.com","profile":{"name":"A","phone":null},"tags":[{"x":1,"y":2}]}',
    );
  });

  it('keeps the order of arrays, which is meaningful', () => {
    expect(canonicalJson([1, 2, 3])).not.toBe(canonicalJson([3, 2, 1]));
    expect(canonicalJson({ a: ['x', 'y'] })).toBe('{"a":["x","y"]}');
  });

  it('tells apart values that only look alike', () => {
    expect(canonicalJson({ a: 1 })).not.toBe(canonicalJson({ a: '1' }));
    expect(canonicalJson({ a: null })).not.toBe(canonicalJson({}));
    expect(canonicalJson({ 'a,b': 1 })).not.toBe(canonicalJson({ a: 1, b: 1 }));
    expect(canonicalJson('quote " and \\')).toBe(JSON.stringify('quote " and \\'));
  });
});

describe('parseIdempotencyKey', () => {
  it.each([
    ['abc', 'abc'],
    ['"abc"', 'abc'],
    ['"8e03978e-40d5-43e8-bc93-6894a57f9324"', '8e03978e-40d5-43e8-bc93-6894a57f9324'],
    ['"two words"', 'two words'],
    ['"quote \\" and backslash \\\\"', 'quote " and backslash \\'],
    ['"k";a=1;b', 'k'],
    ['a"b\\c', 'a"b\\c'],
  ])('reads %s as the key %s', (field, key) => {
    expect(parseIdempotencyKey(field)).toBe(key);
  });

  it.each(['', '""', '"abc', '"a\\qb"', 'two words', '"é"', '"a"b', `"${'k'.repeat(256)}"`, 'k'.repeat(256)])(
    'refuses %s',
    (field) => {
      expect(parseIdempotencyKey(field)).toBeUndefined();
    },
  );
});
