import { createHash } from 'node:crypto';
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createBreachScreen } from './breached.ts';

const BREACHED = 'correct horse battery staple';
const sha1 = (text: string) => createHash('sha1').update(text, 'utf8').digest('hex').toUpperCase();

// A range API as Have I Been Pwned serves it: every suffix under the prefix with its count, and
// zero-count padding lines when asked for them.
let server: Server;
let url: string;
let asked: IncomingMessage[] = [];
let mode: 'answer' | 'hang' | 'fail' = 'answer';
beforeAll(async () => {
  server = createServer((request, response) => {
    asked.push(request);
    if (mode === 'hang') return; // never answers
    if (mode === 'fail') return void response.writeHead(503).end();
    const prefix = request.url!.split('/').at(-1)!;
    const lines = ['0018A45C4D1DEF81644B54AB7F969B88D65:3', 'FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF:0'];
    if (sha1(BREACHED).startsWith(prefix)) lines.push(`${sha1(BREACHED).slice(5)}:3645804`);
    response.writeHead(200, { 'Content-Type': 'text/plain' }).end(lines.join('\r\n'));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});
beforeEach(() => {
  asked = [];
  mode = 'answer';
});

describe('the breached-password screen', () => {
  it("counts a breached password from its range, and 0 for one the range doesn't list", async () => {
    const screen = createBreachScreen({ url, threshold: 1, timeoutMs: 2_000 });
    expect(await screen.count(BREACHED)).toBe(3645804);
    expect(await screen.count('a passphrase nobody has used 7f3a')).toBe(0);
  });

  it('sends only the first five hex digits of the SHA-1, with padding asked for', async () => {
    const screen = createBreachScreen({ url, threshold: 1, timeoutMs: 2_000 });
    await screen.count(BREACHED);
    expect(asked.map((r) => r.url)).toEqual([`/range/${sha1(BREACHED).slice(0, 5)}`]);
    expect(asked[0]!.headers['add-padding']).toBe('true');
    const sent = JSON.stringify({ url: asked[0]!.url, headers: asked[0]!.headers });
    expect(sent).not.toContain(sha1(BREACHED).slice(5, 12));
    expect(sent).not.toContain(BREACHED);
  });

  it('keeps a range: the same prefix is asked once, however many ask at the same time', async () => {
    const screen = createBreachScreen({ url, threshold: 1, timeoutMs: 2_000 });
    const counts = await Promise.all(Array.from({ length: 10 }, () => screen.count(BREACHED)));
    expect(new Set(counts)).toEqual(new Set([3645804]));
    expect(await screen.count(BREACHED)).toBe(3645804);
    expect(asked).toHaveLength(1);
  });

  it('answers unknown when the range API does not answer in time, or fails', async () => {
    mode = 'hang';
    const screen = createBreachScreen({ url, threshold: 1, timeoutMs: 200 });
    const started = performance.now();
    expect(await screen.count(BREACHED)).toBe('unknown');
    expect(performance.now() - started).toBeLessThan(1_500);
    mode = 'fail';
    expect(await screen.count(`${BREACHED}!`)).toBe('unknown');
  });

  it('asks again after an unknown: a failure is not kept', async () => {
    mode = 'fail';
    const screen = createBreachScreen({ url, threshold: 1, timeoutMs: 2_000 });
    expect(await screen.count(BREACHED)).toBe('unknown');
    mode = 'answer';
    expect(await screen.count(BREACHED)).toBe(3645804);
    expect(asked).toHaveLength(2);
  });

  it("bounds one site's range requests: a flood from one site waits for its own slots, another site's check goes out", async () => {
    mode = 'hang';
    const screen = createBreachScreen({ url, threshold: 1, timeoutMs: 1_000, concurrency: 4, perSite: 2 });
    // Five different passwords (five prefixes) from one site: two go out, three wait in line.
    const flood = Array.from({ length: 5 }, (_, i) => screen.count(`flood ${i} ${Math.random()}`, 'noisy'));
    await expect.poll(() => asked.length).toBe(2);
    mode = 'answer';
    expect(await screen.count(BREACHED, 'quiet')).toBe(3645804);
    expect(asked).toHaveLength(3);
    // The noisy site's hung requests time out: unknown, nothing else.
    expect(new Set(await Promise.all(flood))).toEqual(new Set(['unknown']));
  });
});
