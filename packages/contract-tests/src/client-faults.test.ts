// A client that breaks off its body, or frames it in a way HTTP does not know, is at fault
// itself: the answer is 400 (or the connection just closes), and nothing an operator watches
// (the log, the metrics, the audit trail) may call it a database outage.
import { connect } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkedClient, GHOST } from './harness.ts';
import { embeddedServer, type Target } from './targets.ts';

const METRICS_TOKEN = 'metrics_token_for_the_client_faults_0123';

let target: Target;
beforeAll(async () => {
  target = await embeddedServer({ env: { METRICS_TOKEN } });
}, 120_000);
afterAll(() => target?.close());

/**
 * Writes `head` and `body` on a raw connection. With `hangUp`, destroys the socket once the
 * bytes are out (a client that died mid-body); otherwise half-closes and waits for the answer.
 */
function rawRequest(head: string, body: string, options: { hangUp?: boolean } = {}): Promise<string> {
  const { port, hostname } = new URL(target.baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let answer = '';
    socket.setEncoding('utf8');
    socket.on('data', (chunk) => {
      answer += chunk;
    });
    socket.on('error', reject);
    socket.on('close', () => resolve(answer));
    socket.write(head + body, () => {
      if (options.hangUp) setTimeout(() => socket.destroy(), 50);
    });
  });
}

const createHead = (extra: string) =>
  'POST /api/1/user/create HTTP/1.1\r\n' +
  `Host: ${new URL(target.baseUrl).host}\r\n` +
  `Authorization: ${target.token}\r\n` +
  'Content-Type: application/json\r\n' +
  `X-Request-Id: ${extra.split('\n')[0]!.trim()}\r\n`;

/** What the server recorded about one request: its log lines, its audit rows. */
async function traces(requestId: string) {
  const lines = target.logs.filter((l) => l.includes(requestId)).map((l) => JSON.parse(l) as Record<string, unknown>);
  const audit = await target.sql('select status, outcome from audit_log where request_id = $1', [requestId]);
  return { lines, audit };
}

async function metricCount(status: string): Promise<number> {
  const text = await (
    await fetch(`${target.baseUrl}/metrics`, { headers: { Authorization: `Bearer ${METRICS_TOKEN}` } })
  ).text();
  return text
    .split('\n')
    .filter((l) => l.startsWith('http_requests_total{') && l.includes(`status="${status}"`))
    .reduce((sum, l) => sum + Number(l.split(' ').pop()), 0);
}

/** The service still answers, on a new connection, as if nothing had happened. */
async function stillServes(): Promise<void> {
  const client = checkedClient(target.baseUrl, target.token);
  const { response } = await client.GET('/api/1/user/get', { params: { query: { _userId: GHOST } } });
  expect(response.status).toBe(404);
}

const noOutage = (lines: Record<string, unknown>[]) => {
  expect(lines.map((l) => l.msg)).not.toContain('database unavailable');
  expect(lines.map((l) => l.status)).not.toContain(503);
  // Nothing above info; listed by name, so that a line whose level is not a known name fails too.
  expect(lines.filter((l) => !['trace', 'debug', 'info'].includes(String(l.level)))).toEqual([]);
};

/**
 * What a client's fault leaves behind, once the server has logged it: a 400 in the access log and
 * the audit trail, no outage logged, no 503 counted.
 */
async function expectClientFault(requestId: string, metric503Before: number): Promise<void> {
  await expect.poll(async () => (await traces(requestId)).lines.some((l) => l.msg === 'request')).toBe(true);
  const { lines, audit } = await traces(requestId);
  noOutage(lines);
  expect(lines.find((l) => l.msg === 'request')).toMatchObject({ status: 400 });
  expect(audit).toEqual([{ status: 400, outcome: 'invalid_request' }]);
  expect(await metricCount('503')).toBe(metric503Before);
}

describe('client faults', () => {
  it('treats a body broken off mid-way as the client’s: no outage logged, no 503 counted or audited', async () => {
    const requestId = `half-body-${Date.now()}`;
    const before = await metricCount('503');
    const half = JSON.stringify({ email: 'half@example.com', password: 'a passphrase never finished', name: 'H' });
    await rawRequest(`${createHead(requestId)}Content-Length: ${half.length * 2}\r\n\r\n`, half, { hangUp: true });

    // The server notices the hang-up asynchronously: expectClientFault waits for its access-log line.
    await expectClientFault(requestId, before);
    expect((await target.sql("select count(*)::int as n from users where email = 'half@example.com'"))[0]!.n).toBe(0);
    await stillServes();
  });

  it('closes the connection on a body framed with an unknown Transfer-Encoding, and calls it a 400', async () => {
    const requestId = `xchunked-${Date.now()}`;
    const before = await metricCount('503');
    const body = JSON.stringify({ email: 'xchunked@example.com', password: 'a passphrase in odd frames', name: 'X' });
    const answer = await rawRequest(
      `${createHead(requestId)}Transfer-Encoding: xchunked\r\n\r\n`,
      `${body.length.toString(16)}\r\n${body}\r\n0\r\n\r\n`,
    );

    // Node's parser refuses the framing once the request is under way, and drops the connection
    // (RFC 9112 §6.1 allows just closing it); should it ever answer instead, it must be a 400.
    if (answer !== '') {
      expect(answer).toMatch(/^HTTP\/1\.1 400 /);
      expect(JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4))).toMatchObject({ code: 'invalid_request' });
    }
    await expectClientFault(requestId, before);
    expect((await target.sql("select count(*)::int as n from users where email = 'xchunked@example.com'"))[0]!.n).toBe(
      0,
    );
    await stillServes();
  });
});
