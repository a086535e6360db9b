// GET /metrics names the replica on every series (issue 64, point 4): six scrapes through HAProxy
// landed on three replicas with nothing saying which. REPLICA_NAME, else the host's name.
import { hostname } from 'node:os';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { embeddedServer, type Target, TEST_METRICS_TOKEN } from './targets.ts';

const scrape = async (target: Target) => {
  const answer = await fetch(`${target.baseUrl}/metrics`, {
    headers: { Authorization: `Bearer ${TEST_METRICS_TOKEN}` },
  });
  expect(answer.status).toBe(200);
  return (await answer.text()).split('\n').filter((line) => line !== '' && !line.startsWith('#'));
};

describe('the replica label of /metrics', () => {
  let named: Target;
  let unnamed: Target;
  beforeAll(async () => {
    [named, unnamed] = await Promise.all([
      embeddedServer({ env: { METRICS_TOKEN: TEST_METRICS_TOKEN, REPLICA_NAME: 'app2' } }),
      embeddedServer({ env: { METRICS_TOKEN: TEST_METRICS_TOKEN } }),
    ]);
  }, 120_000);
  afterAll(async () => {
    await Promise.all([named?.close(), unnamed?.close()]);
  });

  it('puts replica="REPLICA_NAME" on every series', async () => {
    await fetch(`${named.baseUrl}/health`);
    const samples = await scrape(named);
    expect(samples.length).toBeGreaterThan(20);
    expect(samples.filter((line) => !/[{,]replica="app2"[,}]/.test(line))).toEqual([]);
  });

  it("puts the host's name there without REPLICA_NAME", async () => {
    const samples = await scrape(unnamed);
    const label = `replica="${hostname()}"`;
    expect(samples.filter((line) => !line.includes(label))).toEqual([]);
  });
});
