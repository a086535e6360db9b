import { beforeEach, describe, expect, it } from 'vitest';
import { isUuid } from '../../kernel/ids.ts';
import { arrayLogger } from '../../testing/loggers.ts';
import type { AppDeps } from '../context.ts';
import { testApp } from '../testing.ts';
import { front } from './front.ts';
import { parseTraceparent, requestId } from './request-id.ts';

const TRACE_ID = '4bf92f3577b34da6a3ce929d0e0e4736';
const PARENT_ID = '00f067aa0ba902b7';
const TRACEPARENT = `00-${TRACE_ID}-${PARENT_ID}-01`;

// The mock's gate uses the middleware; the service, its front step.
const STEPS = {
  requestId: () => requestId(),
  'the front step': (logger: AppDeps['logger']) => front({ deps: { logger } as AppDeps }),
};
let step: keyof typeof STEPS = 'requestId';

function idApp() {
  const { logger, lines } = arrayLogger();
  const app = testApp({ deps: { logger } });
  app.use(STEPS[step](logger));
  app.get('/r', (c) => {
    c.get('log').info('handled');
    return c.json({ requestId: c.get('requestId') });
  });
  // The handler's line comes first; the front step writes the access line after it (access-log.test.ts).
  return { app, lines, all: lines };
}

describe.each(Object.keys(STEPS) as (keyof typeof STEPS)[])('%s', (name) => {
  beforeEach(() => {
    step = name;
  });

  it('keeps a sane X-Request-Id, answers it, and puts it on every log line of the request', async () => {
    const { app, all } = idApp();
    const response = await app.request('/r', { headers: { 'X-Request-Id': 'client-42.retry:1_a' } });
    expect(response.status).toBe(200);
    expect(response.headers.get('X-Request-Id')).toBe('client-42.retry:1_a');
    expect(await response.json()).toEqual({ requestId: 'client-42.retry:1_a' });
    const lines = all.filter((line) => line.msg !== 'request');
    expect(lines).toEqual([expect.objectContaining({ msg: 'handled', requestId: 'client-42.retry:1_a' })]);
    for (const line of all) expect(line).toMatchObject({ requestId: 'client-42.retry:1_a' });
  });

  it('makes a UUIDv7 when none is given', async () => {
    const response = await idApp().app.request('/r');
    const id = response.headers.get('X-Request-Id')!;
    expect(isUuid(id)).toBe(true);
    expect(id[14]).toBe('7');
  });

  it.each([
    ['spaces', 'two words'],
    ['markup', '<script>alert(1)</script>'],
    ['a log-forging attempt', 'id","level":60,"x":"'],
    ['non-ASCII', 'réquest'],
    ['over 128 characters', 'a'.repeat(129)],
    ['an empty value', ''],
  ])('replaces an X-Request-Id with %s', async (_, given) => {
    const { app, lines } = idApp();
    const response = await app.request('/r', { headers: { 'X-Request-Id': given } });
    const id = response.headers.get('X-Request-Id')!;
    expect(id).not.toBe(given);
    expect(isUuid(id)).toBe(true);
    expect(lines[0]).toMatchObject({ requestId: id });
  });

  it('keeps an X-Request-Id of exactly 128 characters', async () => {
    const given = 'a'.repeat(128);
    const response = await idApp().app.request('/r', { headers: { 'X-Request-Id': given } });
    expect(response.headers.get('X-Request-Id')).toBe(given);
  });

  it('sets X-Content-Type-Options: nosniff, on errors too', async () => {
    const { app } = idApp();
    expect((await app.request('/r')).headers.get('X-Content-Type-Options')).toBe('nosniff');
    const missing = await app.request('/nowhere');
    expect(missing.status).toBe(404);
    expect(missing.headers.get('X-Content-Type-Options')).toBe('nosniff');
  });

  it("puts the caller's W3C trace on the log lines, and ignores an invalid one", async () => {
    const { app, all } = idApp();
    await app.request('/r', { headers: { traceparent: TRACEPARENT } });
    await app.request('/r', { headers: { traceparent: `00-${'0'.repeat(32)}-${PARENT_ID}-01` } });
    const lines = all.filter((line) => line.msg !== 'request');
    expect(lines[0]).toMatchObject({ traceId: TRACE_ID, parentId: PARENT_ID });
    expect(lines[1]).not.toHaveProperty('traceId');
    expect(lines[1]).not.toHaveProperty('parentId');
  });
});

describe('parseTraceparent', () => {
  it('reads the trace and parent ids of a valid header', () => {
    expect(parseTraceparent(TRACEPARENT)).toEqual({ traceId: TRACE_ID, parentId: PARENT_ID });
    expect(parseTraceparent(` ${TRACEPARENT}\t`)).toEqual({ traceId: TRACE_ID, parentId: PARENT_ID });
    expect(parseTraceparent(`00-${TRACE_ID}-${PARENT_ID}-00`)).toEqual({ traceId: TRACE_ID, parentId: PARENT_ID });
  });

  it('reads the first four fields of a later version, which may add fields', () => {
    const ids = { traceId: TRACE_ID, parentId: PARENT_ID };
    expect(parseTraceparent(`01-${TRACE_ID}-${PARENT_ID}-01-future`)).toEqual(ids);
    expect(parseTraceparent(`cc-${TRACE_ID}-${PARENT_ID}-01`)).toEqual(ids);
  });

  it.each([
    ['no header', undefined],
    ['an empty header', ''],
    ['an all-zero trace id', `00-${'0'.repeat(32)}-${PARENT_ID}-01`],
    ['an all-zero parent id', `00-${TRACE_ID}-${'0'.repeat(16)}-01`],
    ['version ff', `ff-${TRACE_ID}-${PARENT_ID}-01`],
    ['upper-case hex', `00-${TRACE_ID.toUpperCase()}-${PARENT_ID}-01`],
    ['an upper-case version', `0A-${TRACE_ID}-${PARENT_ID}-01`],
    ['extra fields on version 00', `00-${TRACE_ID}-${PARENT_ID}-01-extra`],
    ['a short trace id', `00-${TRACE_ID.slice(1)}-${PARENT_ID}-01`],
    ['a long parent id', `00-${TRACE_ID}-${PARENT_ID}0-01`],
    ['no flags', `00-${TRACE_ID}-${PARENT_ID}`],
    ['other separators', `00_${TRACE_ID}_${PARENT_ID}_01`],
  ])('ignores %s', (_, header) => {
    expect(parseTraceparent(header)).toBeUndefined();
  });
});
