import { describe, expect, it } from 'vitest';
import { jsonBody } from './middleware/json-body.ts';
import { validBody, validQuery } from './routes/shared.ts';
import { problemOf, testApp } from './testing.ts';

// Through the route's own path (JSON parsing, trimming, the compiled schema), so that what is
// tested is what a client reads.
const app = testApp();
app.post('/create', jsonBody(), (c) => c.json(validBody(c, 'CreateUserRequest')));
app.post('/update', jsonBody(), (c) => c.json(validBody(c, 'UpdateUserRequest')));

const VALID = { email: 'ada@example.com', password: 'correct horse battery', name: 'Ada' };
const UPDATE_ID = '0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b';

async function errorsOf(path: string, body: unknown) {
  const response = await app.request(path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  expect(response.status).toBe(400);
  return (await problemOf(response)).errors;
}

describe('the errors of an invalid body', () => {
  it('tells a blank name once, as empty rather than as a bad format', async () => {
    expect(await errorsOf('/create', { ...VALID, name: '   ' })).toEqual([
      { pointer: '/name', code: 'too_short', message: 'must not be empty' },
    ]);
  });

  it('tells a short malformed email that it is not an email address, not that it is short', async () => {
    expect(await errorsOf('/create', { ...VALID, email: 'x' })).toEqual([
      {
        pointer: '/email',
        code: 'invalid_format',
        message: 'must be an email address such as name@example.com, with a dot in its domain',
      },
    ]);
  });

  it('tells a wrong type alone, whatever else the value breaks', async () => {
    expect(await errorsOf('/create', { ...VALID, name: 42 })).toEqual([
      { pointer: '/name', code: 'invalid_type', message: 'must be a string' },
    ]);
  });

  it('names both types a nullable field takes', async () => {
    expect(await errorsOf('/update', { _userId: UPDATE_ID, phone: 42 })).toEqual([
      { pointer: '/phone', code: 'invalid_type', message: 'must be a string or null' },
    ]);
  });

  it('gives two bad fields one error each, in the order of the schema', async () => {
    expect(await errorsOf('/create', { ...VALID, name: '', email: 'x' })).toEqual([
      {
        pointer: '/email',
        code: 'invalid_format',
        message: 'must be an email address such as name@example.com, with a dot in its domain',
      },
      { pointer: '/name', code: 'too_short', message: 'must not be empty' },
    ]);
  });

  it('tells a value too long that it is too long, even when its format is broken too', async () => {
    expect(await errorsOf('/create', { ...VALID, name: `A\n${'n'.repeat(200)}` })).toEqual([
      { pointer: '/name', code: 'too_long', message: 'must be at most 200 characters' },
    ]);
  });

  it('counts characters in plain English', async () => {
    expect(await errorsOf('/create', { ...VALID, password: 'short' })).toEqual([
      { pointer: '/password', code: 'too_short', message: 'must be at least 8 characters' },
    ]);
  });

  it('tells a missing field and an unknown one in their own words', async () => {
    const { name: _, ...nameless } = VALID;
    expect(await errorsOf('/create', { ...nameless, nickname: 'x' })).toEqual([
      { pointer: '/name', code: 'required', message: 'is required' },
      { pointer: '/nickname', code: 'unknown_field', message: 'is not a known field' },
    ]);
  });
});

describe('the query of an operation', () => {
  // Every query parameter the spec marks required, on every path that has one.
  const required: [string, string][] = [
    ['/api/1/audit', '_userId'],
    ['/api/1/user/data', '_userId'],
    ['/api/1/user/factor/list', '_userId'],
    ['/api/1/webhooks/deliveries', 'endpointId'],
  ];
  const queryApp = testApp();
  for (const [path] of required) queryApp.get(path, (c) => c.json(validQuery(c, path)));

  it.each(required)('%s without %s: 400 required at its pointer, as the spec marks it', async (path, name) => {
    const response = await queryApp.request(path);
    expect(response.status).toBe(400);
    expect((await problemOf(response)).errors).toContainEqual({
      pointer: `/${name}`,
      code: 'required',
      message: 'is required',
    });
  });
});

// Issue 41: "is not valid" told nothing; every message names what would be right.
describe('a value outside what the schema allows is told what is allowed', () => {
  const bodies = testApp();
  for (const name of ['DeleteUserRequest', 'IssueTicketRequest', 'CreateUserRequest'] as const) {
    bodies.post(`/${name}`, jsonBody(), (c) => c.json(validBody(c, name)));
  }
  const reads = testApp();
  reads.get('/api/1/user/list', (c) => c.json(validQuery(c, '/api/1/user/list')));
  const send = async (name: string, body: unknown) => {
    const response = await bodies.request(`/${name}`, {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    expect(response.status).toBe(400);
    return (await problemOf(response)).errors;
  };

  it('an enum: its values', async () => {
    expect(await send('IssueTicketRequest', { purpose: 'x', _userId: UPDATE_ID })).toEqual([
      {
        pointer: '/purpose',
        code: 'not_allowed',
        message: 'must be one of "verify_email", "verify_phone", "reset_password", "change_email" or "login"',
      },
    ]);
  });

  it('a maximum and a minimum: the bound', async () => {
    expect(await send('DeleteUserRequest', { _userId: UPDATE_ID, graceDays: 500 })).toEqual([
      { pointer: '/graceDays', code: 'not_allowed', message: 'must be at most 90' },
    ]);
    expect(await send('DeleteUserRequest', { _userId: UPDATE_ID, graceDays: -1 })).toEqual([
      { pointer: '/graceDays', code: 'not_allowed', message: 'must be at least 0' },
    ]);
  });

  it("a query's bounds: list?limit=0 and limit=1001", async () => {
    for (const [limit, message] of [
      ['0', 'must be at least 1'],
      ['1001', 'must be at most 1000'],
    ]) {
      const response = await reads.request(`/api/1/user/list?limit=${limit}`);
      expect(response.status).toBe(400);
      expect((await problemOf(response)).errors).toEqual([{ pointer: '/limit', code: 'not_allowed', message }]);
    }
  });

  it("a pattern: the spec's words for it (an email whose domain has no dot)", async () => {
    expect(await send('CreateUserRequest', { ...VALID, email: 'v@io' })).toEqual([
      {
        pointer: '/email',
        code: 'invalid_format',
        message: 'must be an email address such as name@example.com, with a dot in its domain',
      },
    ]);
  });

  it('a pattern without words of its own in the spec is told by what it refuses: control characters', async () => {
    expect(await send('CreateUserRequest', { ...VALID, name: 'Ada\u0007' })).toEqual([
      {
        pointer: '/name',
        code: 'invalid_format',
        message: 'must not contain control characters (U+0000–U+001F, U+007F–U+009F)',
      },
    ]);
  });

  it("a text rule of the server's: which one", async () => {
    expect(await send('CreateUserRequest', { ...VALID, name: 'Ada\u202eLovelace' })).toEqual([
      { pointer: '/name', code: 'invalid_format', message: 'must not contain bidirectional formatting characters' },
    ]);
  });
});
