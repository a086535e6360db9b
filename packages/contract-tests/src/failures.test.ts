// What a caller sees when something on our side fails: a problem with a stable code, never a
// stack trace, and nothing changed. Run on throwaway servers so the faults stay contained.

import { openPostgres } from '@user-accounts/server/db';
import { afterEach, describe, expect, it } from 'vitest';
import { checkedClient } from './harness.ts';
import { embeddedServer, PRODUCTION_HASHES, type ServerOptions, serverTarget, type Target } from './targets.ts';

const targets: Target[] = [];
afterEach(async () => {
  await Promise.all(targets.splice(0).map((t) => t.close()));
});

const clientFor = (target: Target) => checkedClient(target.baseUrl, target.token);

async function embedded(options: ServerOptions = {}) {
  const target = await embeddedServer(options);
  targets.push(target);
  return target;
}

describe('failures on our side', () => {
  it('answers 503 service_unavailable with Retry-After when the database is unreachable, and /readyz says so', async () => {
    // Nothing listens on port 1: connections are refused at once. Opened by the test, so never migrated.
    const database = await openPostgres('postgres://postgres@127.0.0.1:1/none', { max: 1 });
    const target = await serverTarget({ database }, async () => {});
    targets.push(target);
    const { error, response } = await clientFor(target).GET('/api/1/user/get', {
      params: { query: { email: 'a@example.com' } },
    });
    expect(response.status).toBe(503);
    expect(response.headers.get('retry-after')).toBe('1');
    expect(error?.code).toBe('service_unavailable');
    const ready = await fetch(`${target.baseUrl}/readyz`);
    expect(ready.status).toBe(503);
  });

  it('answers 503 with Retry-After when too many password hashes wait, and creates only what it answered 201 for', async () => {
    // Production's hashes: twelve creates must overlap in one slot and a queue of one.
    const target = await embedded({ env: { ...PRODUCTION_HASHES, HASH_CONCURRENCY: '1', HASH_QUEUE: '1' } });
    const client = clientFor(target);
    const results = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        client.POST('/api/1/user/create', {
          body: { email: `flood${i}@example.com`, password: `flood-password-${i}-x`, name: 'Flood' },
        }),
      ),
    );
    const statuses = results.map((r) => r.response.status);
    expect(new Set(statuses)).toEqual(new Set([201, 503]));
    for (const r of results.filter((r) => r.response.status === 503)) {
      expect(r.error?.code).toBe('service_unavailable');
      expect(r.response.headers.get('retry-after')).toBe('1');
    }
    const [row] = await target.sql('select count(*)::int as n from users');
    expect(row!.n).toBe(statuses.filter((s) => s === 201).length);
  });

  it('answers 500 internal_error for a bug, logging the cause and showing none of it', async () => {
    const target = await embedded();
    await target.sql('alter table users rename column phone to telephone');
    const { error, response } = await clientFor(target).GET('/api/1/user/get', {
      params: { query: { email: 'a@example.com' } },
    });
    expect(response.status).toBe(500);
    expect(error?.code).toBe('internal_error');
    expect(JSON.stringify(error)).not.toMatch(/telephone|phone|select|at /);
    const logged = target.logs.map((l) => JSON.parse(l)).find((l) => l.msg === 'unhandled error');
    expect(logged?.requestId).toBe(error?.requestId);
    expect(JSON.stringify(logged?.err)).toContain('42703'); // undefined_column, from PostgreSQL
  });
});
