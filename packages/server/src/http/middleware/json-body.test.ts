import { describe, expect, it } from 'vitest';
import { problemOf, testApp } from '../testing.ts';
import { BODY_LIMIT, jsonBody, MAX_DEPTH, nestingDepth } from './json-body.ts';

const JSON_TYPE = { 'Content-Type': 'application/json' };

function bodyApp() {
  const app = testApp();
  app.post('/echo', jsonBody(), (c) => c.json({ received: c.get('body') }));
  return app;
}

const post = (body: BodyInit | null, headers: Record<string, string> = JSON_TYPE, init: RequestInit = {}) =>
  bodyApp().request('/echo', { method: 'POST', headers, body, ...init });

const nested = (depth: number) => '['.repeat(depth) + ']'.repeat(depth);

/** A body with no Content-Length that never ends unless the reader stops; counts what was pulled. */
function endlessStream(chunkSize = 16 * 1024) {
  let pulled = 0;
  const stream = new ReadableStream<Uint8Array>({
    pull(controller) {
      pulled += chunkSize;
      controller.enqueue(new Uint8Array(chunkSize).fill(0x20));
    },
  });
  return { stream, pulled: () => pulled };
}

describe('jsonBody', () => {
  it('parses a JSON body and hands it on', async () => {
    const response = await post('{"email":"a@example.com","tags":["x"]}');
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ received: { email: 'a@example.com', tags: ['x'] } });
  });

  it.each([
    'application/json; charset=utf-8',
    'Application/JSON; Charset=UTF-8',
    'application/json;charset=utf-8',
    // RFC 9110 §8.3.1: a quoted parameter value is the same value.
    'application/json; charset="utf-8"',
  ])('accepts %s', async (type) => {
    expect((await post('{}', { 'Content-Type': type })).status).toBe(200);
  });

  it.each([
    ['no Content-Type', undefined],
    ['text/plain', 'text/plain'],
    ['form data', 'application/x-www-form-urlencoded'],
    ['a JSON look-alike', 'application/json-patch+json'],
    ['another charset', 'application/json; charset=iso-8859-1'],
    ['UTF-16', 'application/json; charset=utf-16'],
  ])('answers 415 unsupported_media_type to %s', async (_, type) => {
    const response = await post('{}', type === undefined ? {} : { 'Content-Type': type });
    expect(response.status).toBe(415);
    expect(await problemOf(response)).toMatchObject({ status: 415, code: 'unsupported_media_type' });
  });

  it('answers 413 on a declared Content-Length over the limit, before reading the body', async () => {
    const response = await post('{}', { ...JSON_TYPE, 'Content-Length': String(BODY_LIMIT + 1) });
    expect(response.status).toBe(413);
    // The body was not read, so the connection cannot carry another request.
    expect(response.headers.get('Connection')).toBe('close');
    expect(await problemOf(response)).toMatchObject({ status: 413, code: 'payload_too_large' });
  });

  it('accepts a body of exactly the limit', async () => {
    const body = `"${'a'.repeat(BODY_LIMIT - 2)}"`;
    const response = await post(body, { ...JSON_TYPE, 'Content-Length': String(BODY_LIMIT) });
    expect(response.status).toBe(200);
  });

  it('answers 413 to a streamed body without Content-Length once it passes the limit, and stops reading', async () => {
    const { stream, pulled } = endlessStream();
    const response = await post(stream, JSON_TYPE, { duplex: 'half' } as RequestInit);
    expect(response.status).toBe(413);
    expect(response.headers.get('Connection')).toBe('close');
    expect(await problemOf(response)).toMatchObject({ code: 'payload_too_large' });
    // Read up to the limit and a little beyond (the stream's read-ahead), never on and on.
    expect(pulled()).toBeLessThan(BODY_LIMIT * 2);
  });

  it('answers 400 invalid_request, closing the connection, to a body whose stream fails (the client hung up)', async () => {
    // What Node's request stream does when the client goes away mid-body: an ECONNRESET that,
    // let through, would read as a database outage.
    const aborted = Object.assign(new Error('aborted'), { code: 'ECONNRESET' });
    const stream = new ReadableStream<Uint8Array>({
      start(controller) {
        controller.enqueue(new TextEncoder().encode('{"email":"half'));
      },
      pull(controller) {
        controller.error(aborted);
      },
    });
    const response = await post(stream, JSON_TYPE, { duplex: 'half' } as RequestInit);
    expect(response.status).toBe(400);
    expect(response.headers.get('Connection')).toBe('close');
    expect(await problemOf(response)).toMatchObject({ code: 'invalid_request' });
  });

  it('answers 413 to a streamed body that understates its Content-Length', async () => {
    const { stream } = endlessStream();
    const response = await post(stream, { ...JSON_TYPE, 'Content-Length': '10' }, { duplex: 'half' } as RequestInit);
    expect(response.status).toBe(413);
  });

  it.each([
    ['bad JSON', '{"a":', 'not valid JSON'],
    ['a trailing comma', '{"a":1,}', 'not valid JSON'],
    ['an empty body', '', 'required'],
    ['a body of whitespace', ' \r\n\t', 'required'],
    ['bad UTF-8', new Uint8Array([0x7b, 0x22, 0x61, 0x22, 0x3a, 0x22, 0xff, 0xfe, 0x22, 0x7d]), 'UTF-8'],
    ['a lone UTF-8 continuation byte', new Uint8Array([0x22, 0x80, 0x22]), 'UTF-8'],
  ])('answers 400 invalid_json to %s', async (_, body, detail) => {
    const response = await post(body);
    expect(response.status).toBe(400);
    const problem = await problemOf(response);
    expect(problem).toMatchObject({ status: 400, code: 'invalid_json' });
    expect(problem.detail).toContain(detail);
  });

  it(`answers 400 invalid_request to nesting deeper than ${MAX_DEPTH}, and accepts ${MAX_DEPTH}`, async () => {
    const tooDeep = await post(nested(MAX_DEPTH + 1));
    expect(tooDeep.status).toBe(400);
    const problem = await problemOf(tooDeep);
    expect(problem).toMatchObject({ status: 400, code: 'invalid_request' });
    expect(problem.errors).toEqual([expect.objectContaining({ pointer: '', code: 'not_allowed' })]);

    const deepest = await post(nested(MAX_DEPTH));
    expect(deepest.status).toBe(200);
  });

  it('refuses deep nesting even when the text is not valid JSON, without parsing it', async () => {
    // Depth is checked first: a parser never sees an attack, valid or not.
    const response = await post('['.repeat(10_000));
    expect(response.status).toBe(400);
    expect(await problemOf(response)).toMatchObject({ code: 'invalid_request' });
  });
});

describe('nestingDepth', () => {
  it.each([
    ['a scalar', '42', 0],
    ['an empty object', '{}', 1],
    ['objects and arrays alike', '{"a":[{"b":[]}]}', 4],
    ['siblings, not their sum', '[[1],[2],[[3]]]', 3],
    ['brackets inside a string', '{"a":"[[[[{{{{"}', 1],
    ['closing brackets inside a string', '[["]]]]"], ["x"]]', 2],
    ['an escaped quote inside a string', '{"a":"\\"[[[[","b":[1]}', 2],
    ['an escaped backslash before the closing quote', '["\\\\",[[1]]]', 3],
    ['an escaped backslash then an escaped quote', '{"a":"\\\\\\"[[[","b":{}}', 2],
  ])('counts %s', (_, text, depth) => {
    expect(nestingDepth(text)).toBe(depth);
  });
});
