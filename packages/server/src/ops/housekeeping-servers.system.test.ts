// Timed suspensions end by themselves in the server as an operator runs it (`node src/main.ts`,
// its housekeeping running): with no request about the account, on the embedded database, and on
// three servers sharing one PostgreSQL (a cluster's replicas), where the account has exactly one user.enabled event
// (issue 30, point 2). The claim itself is tested in housekeeping.integration.test.ts.
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { postgresUnavailable } from '../testing/postgres.ts';
import { processes, type Running } from '../testing/processes.ts';

const procs = processes();
afterAll(() => procs.cleanup());
const TOKEN = 'ua_housekeeping_servers_token_0123456789';
const pgSkip = await postgresUnavailable();
if (pgSkip !== undefined) console.warn(`\n[housekeeping-servers.test] three servers: SKIPPED, ${pgSkip}\n`);

const headers = { Authorization: TOKEN, 'Content-Type': 'application/json' };
const call = async (server: Running, method: string, path: string, body?: unknown) => {
  const response = await fetch(`${server.baseUrl}${path}`, {
    method,
    headers,
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  // The few fields these tests read, as the spec gives them.
  return {
    status: response.status,
    json: (await response.json()) as {
      result: { _userId: string; disabled: boolean; events: { subject: string; type: string }[] };
    },
  };
};

/** An account, suspended until `ms` from now; the test then sends nothing about it until it is enabled. */
async function suspendedAccount(server: Running, ms: number) {
  const email = `susp.${Date.now()}.${Math.random().toString(36).slice(2)}@example.com`;
  const created = await call(server, 'POST', '/api/1/user/create', {
    email,
    password: 'a long passphrase 42',
    name: 'Ada',
  });
  expect(created.status).toBe(201);
  const id = created.json.result._userId;
  const until = new Date(Date.now() + ms).toISOString();
  expect((await call(server, 'POST', '/api/1/user/disable', { _userId: id, until, reason: 'cool-off' })).status).toBe(
    200,
  );
  return { id, until };
}

/** The account's events of `type`, read from the feed after it was enabled. */
async function eventsOf(server: Running, id: string, type: string) {
  const { json } = await call(server, 'GET', '/api/1/events?limit=1000');
  return json.result.events.filter((e) => e.subject === id && e.type === type);
}

describe('a timed suspension in a running server', () => {
  it('ends by itself within 5 s of its end on the embedded database, with one user.enabled event', async () => {
    const server = procs.server({ DATA_DIR: await procs.migratedDataDir(), API_TOKENS: TOKEN });
    await server.ready;
    const { id, until } = await suspendedAccount(server, 1_000);
    // Read the feed (nothing about the account itself) until the job's event is there, at most
    // 5.5 s after the end (was a fixed wait to then: the chore runs every 5 s).
    const latest = new Date(until).getTime() + 5_500;
    while ((await eventsOf(server, id, 'user.enabled')).length === 0 && Date.now() < latest) {
      await new Promise((r) => setTimeout(r, 100));
    }
    const got = await call(server, 'GET', `/api/1/user/get?_userId=${id}`);
    expect(got.json.result).toMatchObject({ disabled: false, disabledUntil: null, disabledReason: null });
    expect(await eventsOf(server, id, 'user.enabled')).toHaveLength(1);
    server.child.kill('SIGTERM');
    expect(await server.exited).toBe(0);
  }, 180_000);

  it.skipIf(pgSkip !== undefined)(
    'ends once when three servers share one PostgreSQL: one user.enabled event, one audit row by the job',
    async () => {
      const admin = postgres(process.env.TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
      const name = `ua_hk_${Date.now()}_${process.pid}`;
      await admin.unsafe(`create database ${name}`);
      try {
        const url = new URL(process.env.TEST_DATABASE_URL!);
        url.pathname = `/${name}`;
        const one = procs.server({ DATABASE_URL: url.href, API_TOKENS: TOKEN });
        await one.ready;
        const two = procs.server({ DATABASE_URL: url.href, API_TOKENS: TOKEN });
        const three = procs.server({ DATABASE_URL: url.href, API_TOKENS: TOKEN });
        await Promise.all([two.ready, three.ready]);
        // Ten accounts ending at the same moment, so that every server's chores find them due.
        const accounts = await Promise.all(Array.from({ length: 10 }, () => suspendedAccount(one, 2_000)));
        const last = accounts
          .map((a) => a.until)
          .sort()
          .at(-1)!;
        await new Promise((r) => setTimeout(r, new Date(last).getTime() + 5_500 - Date.now()));
        for (const [i, { id }] of accounts.entries()) {
          const reader = [one, two, three][i % 3]!;
          expect((await call(reader, 'GET', `/api/1/user/get?_userId=${id}`)).json.result.disabled).toBe(false);
          expect(await eventsOf(reader, id, 'user.enabled')).toHaveLength(1);
        }
        const db = postgres(url.href, { max: 1, onnotice: () => {} });
        try {
          const audited = await db`select user_id from audit_log where operation = 'enable' and token_id = 'job'`;
          expect(audited.map((r) => r.user_id).sort()).toEqual(accounts.map((a) => a.id).sort());
        } finally {
          await db.end();
        }
        for (const server of [one, two, three]) server.child.kill('SIGTERM');
        expect([await one.exited, await two.exited, await three.exited]).toEqual([0, 0, 0]);
      } finally {
        await admin.unsafe(`drop database if exists ${name} with (force)`);
        await admin.end();
      }
    },
    180_000,
  );
});
