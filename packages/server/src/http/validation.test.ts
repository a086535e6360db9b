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
      { pointer: '/email', code: 'invalid_format', message: 'must be an email address' },
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
      { pointer: '/email', code: 'invalid_format', message: 'must be an email address' },
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
