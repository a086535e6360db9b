// assemble's outbox option: the benchmark's writes without change events, which no variable of
// the configuration can ask for (OUTBOX_DISABLED was one until issue 34).
import { mkdtempSync, rmSync } from 'node:fs';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assemble } from './assemble.ts';
import { loadConfig } from './config/env.ts';
import { serveApp } from './http/serve.ts';
import { copyMigratedPglite } from './testing/templates.ts';

const TOKEN = 'ua_assemble_test_token_0123456789abcdef';
// One embedded database for both services, a copy of the run's migrated one where there is one
// (migrating a fresh one took most of a minute here under load).
const dir = mkdtempSync(join(tmpdir(), 'ua-assemble-'));
beforeAll(() => copyMigratedPglite(dir));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** Creates one account on a service assembled with `outbox`, and answers the events the feed then holds. */
async function eventsAfterACreate(outbox: boolean | undefined): Promise<unknown[]> {
  const config = loadConfig({ DATA_DIR: dir, API_TOKENS: TOKEN, LOG_LEVEL: 'silent' });
  const service = await assemble(config, outbox === undefined ? {} : { outbox });
  const server = await new Promise<ReturnType<typeof serveApp>>((resolve) => {
    const s = serveApp(service.app, { port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });
  try {
    const base = `http://127.0.0.1:${(server.address() as AddressInfo).port}/api/1`;
    const headers = { Authorization: `Bearer ${TOKEN}`, 'Content-Type': 'application/json' };
    const created = await fetch(`${base}/user/create`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ email: `${outbox}@example.com`, password: 'a long passphrase 42', name: 'Outbox' }),
    });
    expect(created.status).toBe(201);
    const feed = await fetch(`${base}/events`, { headers });
    expect(feed.status).toBe(200);
    return ((await feed.json()) as { result: { events: unknown[] } }).result.events;
  } finally {
    await new Promise((resolve) => server.close(resolve));
    await service.close();
  }
}

describe('assemble', () => {
  it('makes a change event of each write by default, and none with outbox: false', async () => {
    const created = expect.objectContaining({ type: 'user.created' });
    expect(await eventsAfterACreate(undefined)).toEqual([created]);
    // The second create, without the outbox, adds nothing to the feed.
    expect(await eventsAfterACreate(false)).toEqual([created]);
  }, 180_000);
});
