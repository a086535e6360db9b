// GET /metrics as Prometheus scrapes it: off by default, behind its own token when on, and
// counting the requests it is asked about.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { processes } from '@user-accounts/server/testing/processes';
import { afterAll, describe, expect, it } from 'vitest';
import { GHOST } from './harness.ts';
import { createSpecChecker } from './spec-check.ts';

const procs = processes();
afterAll(() => procs.cleanup());
const checker = createSpecChecker();
const METRICS_TOKEN = 'metrics_token_for_the_scraper_0123456789';

// Prometheus's own linter of the exposition format: `promtool` on PATH, or where .ci/run unpacks
// Debian's prometheus package (.toolchain/prometheus/usr/bin).
const unpacked = fileURLToPath(new URL('../../../.toolchain/prometheus/usr/bin/promtool', import.meta.url));
const promtool =
  spawnSync('promtool', ['--version']).status === 0 ? 'promtool' : existsSync(unpacked) ? unpacked : undefined;
if (promtool === undefined) {
  console.warn('\n[contract-tests] promtool check metrics: SKIPPED, promtool is not installed (Debian: prometheus)\n');
}

async function scrape(baseUrl: string, authorization?: string): Promise<Response> {
  const response = await fetch(`${baseUrl}/metrics`, {
    headers: authorization ? { Authorization: authorization } : {},
  });
  expect(await checker.check('GET', '/metrics', response)).toEqual([]);
  return response;
}

/** The value of one sample of the exposition text, 0 when absent. */
function sample(text: string, name: string, labels: Record<string, string>): number {
  const wanted = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  const line = text.split('\n').find((l) => l.startsWith(`${name}{`) && wanted.every((w) => l.includes(w)));
  return line === undefined ? 0 : Number(line.split(' ').pop());
}

describe('GET /metrics', () => {
  it('is 404 when METRICS_TOKEN is not set', async () => {
    const server = procs.server({ DATA_DIR: await procs.migratedDataDir() });
    await server.ready;
    expect((await scrape(server.baseUrl, `Bearer ${METRICS_TOKEN}`)).status).toBe(404);
    // Off, the path is not there for any method; on, another method is 405 (issue 41).
    expect((await fetch(`${server.baseUrl}/metrics`, { method: 'POST' })).status).toBe(404);
  });

  it('takes only the metrics token, and shows request counts moving, hashing and the process', async () => {
    const dataDir = await procs.migratedDataDir();
    const server = procs.server({ DATA_DIR: dataDir, METRICS_TOKEN });
    await server.ready;
    const apiToken = readFileSync(`${dataDir}/dev-token`, 'utf8').trim();
    const none = await scrape(server.baseUrl);
    expect(none.status).toBe(401);
    expect(none.headers.get('www-authenticate')).toBe('Bearer realm="user-accounts"');
    const wrong = await scrape(server.baseUrl, `Bearer ${apiToken}`);
    expect(wrong.status).toBe(401);
    expect(wrong.headers.get('www-authenticate')).toBe('Bearer realm="user-accounts", error="invalid_token"');
    expect((await scrape(server.baseUrl, METRICS_TOKEN)).status).toBe(401);
    const post = await fetch(`${server.baseUrl}/metrics`, { method: 'POST' });
    expect(post.status).toBe(405);
    expect(post.headers.get('allow')).toBe('GET, HEAD');

    const labels = { method: 'GET', route: '/api/1/user/get', status: '404' };
    const before = await (await scrape(server.baseUrl, `Bearer ${METRICS_TOKEN}`)).text();
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${server.baseUrl}/api/1/user/get?_userId=${GHOST}`, {
        headers: { Authorization: apiToken },
      });
      expect(r.status).toBe(404);
    }
    const created = await fetch(`${server.baseUrl}/api/1/user/create`, {
      method: 'POST',
      headers: { Authorization: apiToken, 'Content-Type': 'application/json' },
      body: JSON.stringify({ email: 'metrics@example.com', password: 'a passphrase for metrics', name: 'M' }),
    });
    expect(created.status).toBe(201);
    const response = await scrape(server.baseUrl, `Bearer ${METRICS_TOKEN}`);
    expect(response.status).toBe(200);
    const after = await response.text();

    expect(sample(after, 'http_requests_total', labels) - sample(before, 'http_requests_total', labels)).toBe(3);
    expect(sample(after, 'http_request_duration_seconds_count', labels)).toBe(
      sample(after, 'http_requests_total', labels),
    );
    expect(sample(after, 'http_requests_total', { route: '/api/1/user/create', status: '201' })).toBe(1);
    expect(after).toMatch(/^password_hash_duration_seconds_count\{replica="[^"]+"\} 1$/m);
    expect(after).toMatch(/^password_hash_queue_depth\{replica="[^"]+"\} 0$/m);
    expect(after).toMatch(/^db_ping_seconds\{replica="[^"]+"\} 0\.\d+/m);
    expect(after).toMatch(/^db_pool_max_connections\{replica="[^"]+"\} 1$/m);
    expect(after).toMatch(/^process_resident_memory_bytes\{replica="[^"]+"\} \d+/m);
    expect(after).toMatch(/^nodejs_eventloop_lag_seconds\{replica="[^"]+"\} /m);
    // No raw paths, ids or emails as label values.
    expect(after).not.toContain(GHOST);
    expect(after).not.toContain('metrics@example.com');
  });

  it.skipIf(promtool === undefined)(
    'passes promtool check metrics, with every default metric of the process',
    async () => {
      // Found by promtool: prom-client's nodejs_active_{handles,requests,resources}_total are gauges
      // with a counter's suffix (exit 3).
      const dataDir = await procs.migratedDataDir();
      const server = procs.server({ DATA_DIR: dataDir, METRICS_TOKEN });
      await server.ready;
      const apiToken = readFileSync(`${dataDir}/dev-token`, 'utf8').trim();
      await fetch(`${server.baseUrl}/api/1/user/get?_userId=${GHOST}`, { headers: { Authorization: apiToken } });
      const response = await scrape(server.baseUrl, `Bearer ${METRICS_TOKEN}`);
      expect(response.status).toBe(200);
      const text = await response.text();
      expect(text).toMatch(/^nodejs_active_handles\{/m);
      const checked = spawnSync(promtool!, ['check', 'metrics'], { input: text, encoding: 'utf8', timeout: 10_000 });
      expect({ status: checked.status, output: `${checked.stdout}${checked.stderr}`.trim() }).toEqual({
        status: 0,
        output: '',
      });
    },
  );
});
