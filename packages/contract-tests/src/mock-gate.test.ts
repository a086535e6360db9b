// The mock's gate is the only way to Prism, and it forwards only the spec's own operations, to
// paths it builds itself: it must never be a proxy to anything else on the developer's machine,
// nor to itself, nor readable by any web page the developer happens to have open.

import { readFileSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { connect } from 'node:net';
import { MOCK_TOKEN } from '@user-accounts/mock';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { mockTarget, type Target } from './targets.ts';

const SPEC_PATH = new URL('../../../spec/openapi.yaml', import.meta.url);
const SECRET = 'the contents of secret.txt';
let mock: Target;
let bystander: Server;
let bystanderPort: number;
let bystanderHits = 0;

/** A request exactly as written (fetch would normalize the path), and the raw answer. */
function raw(baseUrl: string, head: string): Promise<{ status: number; headers: string; body: string }> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname, () =>
      socket.end(`${head}\r\nHost: ${hostname}:${port}\r\nConnection: close\r\n\r\n`),
    );
    let text = '';
    socket.on('data', (chunk) => {
      text += chunk.toString();
    });
    socket.on('error', reject);
    socket.on('end', () => {
      const [headers = '', ...rest] = text.split('\r\n\r\n');
      resolve({ status: Number(headers.split(' ')[1]), headers, body: rest.join('\r\n\r\n') });
    });
  });
}

beforeAll(async () => {
  // Another local service, such as a developer runs beside the mock.
  bystander = createServer((_, res) => {
    bystanderHits++;
    res.end(SECRET);
  });
  await new Promise<void>((resolve) => bystander.listen(0, '127.0.0.1', resolve));
  bystanderPort = (bystander.address() as { port: number }).port;
  mock = await mockTarget().start();
});
afterAll(async () => {
  await mock?.close();
  bystander?.close();
});

describe('the mock gate', () => {
  it.each([
    ['an absolute-form path to another local server', () => `GET //127.0.0.1:${bystanderPort}/secret.txt HTTP/1.1`],
    [
      'the same with a token',
      () => `GET //127.0.0.1:${bystanderPort}/secret.txt HTTP/1.1\r\nAuthorization: ${MOCK_TOKEN}`,
    ],
    ['a full URL as the request target', () => `GET http://127.0.0.1:${bystanderPort}/secret.txt HTTP/1.1`],
    ['a dot-dot path out of the API', () => `GET /api/1/user/../../../127.0.0.1:${bystanderPort}/secret.txt HTTP/1.1`],
    ['an encoded slash', () => `GET /api/1/user%2fget?email=a@b.co HTTP/1.1\r\nAuthorization: ${MOCK_TOKEN}`],
    ['an unknown path', () => 'GET /secret.txt HTTP/1.1'],
  ])('never forwards %s: a problem+json 404 of its own, nothing reached', async (_, head) => {
    const before = bystanderHits;
    const answer = await raw(mock.baseUrl, head());
    expect([400, 404]).toContain(answer.status);
    expect(answer.headers).toMatch(/content-type: application\/problem\+json/i);
    expect(answer.body).not.toContain(SECRET);
    expect(bystanderHits).toBe(before);
  });

  it('does not call itself: a path repeating its own address 950 times is refused at once', async () => {
    const { port } = new URL(mock.baseUrl);
    const started = performance.now();
    const answer = await raw(mock.baseUrl, `GET ${`//127.0.0.1:${port}`.repeat(950)}/healthz HTTP/1.1`);
    expect([400, 404, 414, 431]).toContain(answer.status);
    expect(performance.now() - started).toBeLessThan(1000);
  });

  it('forwards the spec operations, health and docs without a token, and metrics only with one', async () => {
    expect((await fetch(`${mock.baseUrl}/healthz`)).status).toBe(200);
    expect((await fetch(`${mock.baseUrl}/openapi.json`)).status).toBe(200);
    // The key set of access tokens, as a verifier fetches it: no token, the spec's example keys.
    const jwks = await fetch(`${mock.baseUrl}/.well-known/jwks.json`);
    expect(jwks.status).toBe(200);
    expect(((await jwks.json()) as { keys: { alg: string }[] }).keys.map((k) => k.alg)).toEqual(['ES256', 'ES256']);
    const metrics = await fetch(`${mock.baseUrl}/metrics`);
    expect(metrics.status).toBe(401);
    expect(metrics.headers.get('content-type')).toBe('application/problem+json');
    const get = await fetch(`${mock.baseUrl}/api/1/user/get?email=a@b.co`, { headers: { Authorization: MOCK_TOKEN } });
    expect(get.status).toBe(200);
  });

  it('sends CORS headers only to the listed origins (the browser example by default)', async () => {
    const url = `${mock.baseUrl}/api/1/user/get?email=a@b.co`;
    const preflight = (origin: string) =>
      fetch(url, {
        method: 'OPTIONS',
        headers: {
          Origin: origin,
          'Access-Control-Request-Method': 'GET',
          'Access-Control-Request-Headers': 'authorization',
        },
      });
    const evil = await preflight('https://evil.example');
    expect(evil.headers.get('access-control-allow-origin')).toBeNull();
    const listed = await preflight('http://127.0.0.1:5173');
    expect(listed.headers.get('access-control-allow-origin')).toBe('http://127.0.0.1:5173');
    const read = await fetch(url, { headers: { Authorization: MOCK_TOKEN, Origin: 'https://evil.example' } });
    expect(read.headers.get('access-control-allow-origin')).toBeNull();
    const health = await fetch(`${mock.baseUrl}/healthz`, { headers: { Origin: 'https://evil.example' } });
    expect(health.headers.get('access-control-allow-origin')).toBeNull();
  });

  // Issue 41: what Schemathesis found reading the mock as a client would.
  it('answers the event feed without after or subject: a parameter not given is not sent as "undefined"', async () => {
    for (const query of ['', '?after=0', '?limit=5']) {
      const response = await fetch(`${mock.baseUrl}/api/1/events${query}`, { headers: { Authorization: MOCK_TOKEN } });
      expect(response.status, query).toBe(200);
    }
  });

  it('serves the contract itself at /openapi.yaml and /openapi.json, not an example of a string', async () => {
    const yaml = await fetch(`${mock.baseUrl}/openapi.yaml`);
    expect(yaml.status).toBe(200);
    expect(await yaml.text()).toBe(readFileSync(SPEC_PATH, 'utf8'));
    const json = await fetch(`${mock.baseUrl}/openapi.json`);
    expect(json.status).toBe(200);
    expect(await json.json()).toEqual(parse(readFileSync(SPEC_PATH, 'utf8')));
  });

  it("answers /metrics without the metrics token with a problem whose status and code are the answer's", async () => {
    const response = await fetch(`${mock.baseUrl}/metrics`, { headers: { Authorization: MOCK_TOKEN } });
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ status: 401, code: 'unauthorized' });
    const bearer = await fetch(`${mock.baseUrl}/metrics`, { headers: { Authorization: `Bearer ${MOCK_TOKEN}` } });
    expect(bearer.status).toBe(200);
    expect(bearer.headers.get('content-type')).toMatch(/^text\/plain/);
  });

  it('answers another method on the spec paths that are no operation 405 with Allow, as the server does', async () => {
    for (const path of [
      '/healthz',
      '/readyz',
      '/.well-known/jwks.json',
      '/docs',
      '/openapi.yaml',
      '/openapi.json',
      '/metrics',
    ]) {
      const response = await fetch(`${mock.baseUrl}${path}`, {
        method: 'POST',
        headers: { Authorization: MOCK_TOKEN },
      });
      expect(response.status, path).toBe(405);
      expect(response.headers.get('allow'), path).toBe('GET, HEAD');
    }
  });
});
