// A body over the limit gets its 413 before the connection closes, chunked and without a
// Content-Length, every time (issue 41: one run under load got a connection reset instead). The
// server answers after 64 KiB while the client is still sending; closing then with the rest of
// the body unread would reset the connection, and the client could lose the answer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { requestLine, sendRawChunked } from './raw-http.ts';
import { embeddedServer, type Target } from './targets.ts';

let target: Target;
beforeAll(async () => {
  target = await embeddedServer();
});
afterAll(async () => {
  await target?.close();
});

const TWO_MB = Buffer.from(`{"address":"${'y'.repeat(2 * 1024 * 1024)}"}`);

describe('an oversized chunked body', () => {
  it.each([
    ['sent at once', { pauseMs: 0 }],
    // About 0.8 s to send, as a loaded server would read it: the answer is ready long before.
    ['sent slowly', { pauseMs: 12 }],
  ])('%s: answered 413 payload_too_large, the answer read after the whole body, 8 times in a row', async (_, pace) => {
    const head = [
      requestLine(target.baseUrl, 'POST', '/api/1/user/create'),
      `Authorization: ${target.token}`,
      'Content-Type: application/json',
    ].join('\r\n');
    for (let run = 1; run <= 8; run++) {
      const answer = await sendRawChunked(target.baseUrl, head, TWO_MB, pace);
      expect(answer.status, `run ${run}`).toBe(413);
      expect(answer.headers.connection, `run ${run}`).toBe('close');
      expect(JSON.parse(answer.body), `run ${run}`).toMatchObject({ code: 'payload_too_large', status: 413 });
    }
  });
});
