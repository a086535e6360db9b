import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../db/client.ts';
import { users } from '../db/schema.ts';
import { ApiError, describeError, isDatabaseUnavailable, sqlState } from '../errors.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { clip, problemBody } from './errors.ts';

const EMAIL = 'leaky.person@example.com';
const HASH = '$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$bm90IGEgcmVhbCBoYXNoIGF0IGFsbA';

describe('describeError, on a real query error', () => {
  let database: Database;
  let failure: unknown;

  // The real thing, not a hand-made imitation: drizzle's wrapper around the driver's error, with
  // the query's parameters in its message, is what must not reach a log.
  beforeAll(async () => {
    database = await openMigratedPglite();
    const row = { email: EMAIL, name: 'Leaky', passwordHash: HASH, origin: 'api' };
    await database.db.insert(users).values(row);
    try {
      await database.db.insert(users).values(row);
    } catch (error) {
      failure = error;
    }
  });
  afterAll(() => database?.close());

  it('is built from an error that does hold the secrets', () => {
    // Guards the test itself: if drizzle stopped putting parameters in its message, the
    // assertions below would pass for the wrong reason.
    expect(failure).toBeInstanceOf(Error);
    expect(String((failure as Error).message)).toContain('params:');
    expect(String((failure as Error).message)).toContain(EMAIL);
  });

  it('keeps neither the parameters nor their values, but keeps the SQLSTATE and the chain', () => {
    const described = JSON.stringify(describeError(failure));
    expect(described).not.toContain(EMAIL);
    expect(described).not.toContain(HASH);
    expect(described).not.toContain('$argon2id$');
    expect(described).not.toContain('params:');
    expect(described).toContain('23505');
    expect(describeError(failure)).toMatchObject({
      causes: [
        expect.objectContaining({ code: '23505', message: expect.stringContaining('users_site_email_origin_key') }),
      ],
    });
    expect(describeError(failure).stack).toMatch(/^ {4}at /);
  });

  it('finds the SQLSTATE under the wrapper, and does not take a conflict for an outage', () => {
    expect(sqlState(failure)).toBe('23505');
    expect(isDatabaseUnavailable(failure)).toBe(false);
  });
});

describe('describeError, on anything thrown', () => {
  it('describes a plain error, a string and nothing without failing', () => {
    expect(describeError(new TypeError('boom'))).toMatchObject({ name: 'TypeError', message: 'boom', causes: [] });
    expect(describeError('a string')).toMatchObject({ message: 'a string', stack: '', causes: [] });
    expect(describeError(undefined)).toEqual({ stack: '', causes: [] });
  });

  it('follows at most five causes, so that a cycle cannot hang it', () => {
    const a: { message: string; cause?: unknown } = { message: 'a' };
    a.cause = a;
    expect(describeError(a).causes).toHaveLength(4);
  });
});

describe('isDatabaseUnavailable', () => {
  it.each([
    ['a refused connection', { code: 'ECONNREFUSED' }],
    ['a connection exception (class 08)', { code: '08006' }],
    ['an admin shutdown under a wrapper', { name: 'DrizzleQueryError', cause: { code: '57P01' } }],
    ['a statement timeout two causes down', { cause: { cause: { code: '57014' } } }],
    ['too many connections', { code: '53300' }],
  ])('is true for %s', (_, error) => {
    expect(isDatabaseUnavailable(error)).toBe(true);
  });

  it.each([
    ['a unique violation', { code: '23505' }],
    ['a wrapped syntax error', { cause: { code: '42601' } }],
    ['a numeric code', { code: 8006 }],
    ['no code', new Error('boom')],
    ['nothing', undefined],
    ['null', null],
    // The chain is read five deep, no further.
    ['an outage six causes down', { cause: { cause: { cause: { cause: { cause: { code: 'ECONNRESET' } } } } } }],
  ])('is false for %s', (_, error) => {
    expect(isDatabaseUnavailable(error)).toBe(false);
  });
});

describe('sqlState', () => {
  it('finds a SQLSTATE on the error or under it', () => {
    expect(sqlState({ code: '23505' })).toBe('23505');
    expect(sqlState({ code: 'CONNECTION_CLOSED', cause: { code: '40001' } })).toBe('40001');
    expect(sqlState({ cause: { cause: { code: '23P01' } } })).toBe('23P01');
  });

  it('is undefined without one', () => {
    expect(sqlState({ code: 'ECONNREFUSED' })).toBeUndefined();
    // Five capital letters, but a socket error, not a SQLSTATE (no SQLSTATE class starts with E).
    expect(sqlState({ code: 'EPIPE' })).toBeUndefined();
    // A database dropped or renamed under a running server is unavailable, as /readyz says, not a bug.
    expect(isDatabaseUnavailable({ cause: { code: '3D000' } })).toBe(true);
    expect(sqlState({ code: 'EPIPE', cause: { code: '23505' } })).toBe('23505');
    expect(sqlState({ code: 23505 })).toBeUndefined();
    expect(sqlState({ code: '2350' })).toBeUndefined();
    expect(sqlState(new Error('boom'))).toBeUndefined();
    expect(sqlState(undefined)).toBeUndefined();
  });
});

describe('problemBody', () => {
  const unknownFields = (names: string[]) =>
    new ApiError('invalid_request', 'The request body is not valid.', {
      errors: names.map((name) => ({
        pointer: `/${name}`,
        code: 'unknown_field' as const,
        message: 'is not a known field',
      })),
    });

  it('lists at most 20 field errors, the first ones', () => {
    const names = Array.from({ length: 1000 }, (_, i) => `field${i}`);
    const { errors } = problemBody(unknownFields(names), 'r');
    expect(errors?.map((e) => e.pointer)).toEqual(names.slice(0, 20).map((n) => `/${n}`));
  });

  it('cuts a pointer to 64 characters ending in …, and leaves shorter ones alone', () => {
    const long = 'n'.repeat(60_000);
    const { errors } = problemBody(unknownFields([long, 'short', 'x'.repeat(63)]), 'r');
    expect(errors?.map((e) => e.pointer)).toEqual([`/${'n'.repeat(62)}…`, '/short', `/${'x'.repeat(63)}`]);
    expect(JSON.stringify(problemBody(unknownFields(Array(1000).fill(long)), 'r')).length).toBeLessThan(4096);
  });
});

describe('clip', () => {
  it('never splits a surrogate pair', () => {
    const clipped = clip(`${'a'.repeat(62)}😀😀`, 64);
    expect(clipped).toBe(`${'a'.repeat(62)}…`);
    expect(clipped.isWellFormed()).toBe(true);
    expect(clip('😀'.repeat(40), 64)).toBe(`${'😀'.repeat(31)}…`);
  });
});
