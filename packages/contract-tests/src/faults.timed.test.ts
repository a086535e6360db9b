// Faults with a real PostgreSQL (a private cluster the tests may stop and SIGKILL) and a real
// server process: an outage under load, a database crash, a server crash (also on the embedded
// database), and a database that hangs. Each is bounded to a few seconds of load.
import { rmSync } from 'node:fs';
import { openPglite } from '@user-accounts/server/db';
import { processes, type Running } from '@user-accounts/server/testing/processes';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import {
  ackedSince,
  acknowledgedOps,
  call,
  createAccounts,
  FAULT_TOKEN,
  grouped,
  HALF_WRITTEN,
  lostWrites,
  type Outcome,
  rowsOf,
  waitUntil,
  writeLoad,
} from './faults/load.ts';
import { type PrivatePostgres, privatePostgres, privatePostgresUnavailable } from './faults/private-postgres.ts';
import { TEST_HASHES } from './targets.ts';

const procs = processes();
const clusters: PrivatePostgres[] = [];
afterEach(async () => {
  procs.cleanup();
  await Promise.all(clusters.splice(0).map((c) => c.remove()));
});
afterAll(() => procs.cleanup());

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const REQUEST_TIMEOUT_MS = 3_000;
const SERVER_ENV = {
  ...TEST_HASHES,
  API_TOKENS: FAULT_TOKEN,
  RATE_LIMIT: '10000000/60s',
  RATE_LIMIT_HASH: 'off',
  REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
  LOG_LEVEL: 'info', // the helper learns the address from the "listening" line
};

async function cluster(): Promise<PrivatePostgres> {
  const pg = await privatePostgres();
  clusters.push(pg);
  return pg;
}

async function serverOn(vars: Record<string, string>): Promise<Running> {
  const server = procs.server({ ...SERVER_ENV, ...vars });
  await server.ready;
  return server;
}

const unavailable = privatePostgresUnavailable();
const withPostgres = unavailable === undefined ? describe : describe.skip;
if (unavailable !== undefined) console.warn(`fault tests on PostgreSQL skipped: ${unavailable}`);

withPostgres('faults with PostgreSQL (a private cluster)', () => {
  it('PostgreSQL stopped for 4 s under a mixed load: fast 503s, /readyz false then true, back within 5 s, the process stays up', async () => {
    const pg = await cluster();
    const server = await serverOn({ DATABASE_URL: pg.url });
    const ids = await createAccounts(server.baseUrl, 10, 'outage');
    const log: Outcome[] = [];
    const ready: Outcome[] = [];
    let running = true;
    let n = 0;
    const worker = async (w: number) => {
      while (running) {
        const i = n++;
        const id = ids[i % ids.length]!;
        if (i % 10 === 0) {
          await call(
            server.baseUrl,
            'create',
            '/api/1/user/create',
            {
              method: 'POST',
              body: JSON.stringify({
                email: `outage.${w}.${i}@example.com`,
                password: `Outage-password-${i}`,
                name: 'Load',
              }),
              timeoutMs: REQUEST_TIMEOUT_MS + 5_000,
            },
            log,
          );
        } else if (i % 3 === 0) {
          await call(
            server.baseUrl,
            'update',
            '/api/1/user/update',
            {
              method: 'POST',
              body: JSON.stringify({ _userId: id, name: `n${i}` }),
              timeoutMs: REQUEST_TIMEOUT_MS + 5_000,
            },
            log,
          );
        } else {
          await call(
            server.baseUrl,
            'get',
            `/api/1/user/get?_userId=${id}`,
            { timeoutMs: REQUEST_TIMEOUT_MS + 5_000 },
            log,
          );
        }
        await sleep(5); // a steady load, not a flood: this is about behaviour, not throughput
      }
    };
    const poller = async () => {
      while (running) {
        await call(server.baseUrl, 'readyz', '/readyz', { timeoutMs: 5_000 }, ready);
        await sleep(100);
      }
    };
    const workers = [...Array.from({ length: 6 }, (_, w) => worker(w)), poller()];

    // The load is flowing before the outage (was a fixed 1.5 s).
    await waitUntil(
      '30 answers and a ready /readyz',
      () => ackedSince(log, 0) >= 30 && ready.some((o) => o.status === 200),
    );
    const downAt = Date.now();
    await pg.stop();
    await sleep(4_000); // the outage's length is what the test is about
    await pg.start();
    const upAt = Date.now();
    // Load (and /readyz polls) well past the 5 s the server has to be back (was a fixed 7 s):
    // what the checks below read.
    await waitUntil(
      'requests and /readyz polls started 5 s after PostgreSQL came back',
      () =>
        log.filter((o) => o.startedAt >= upAt + 5_000).length > 40 &&
        ready.filter((o) => o.startedAt >= upAt + 5_000).length >= 5,
      30_000,
    );
    running = false;
    await Promise.all(workers);

    const statuses = [...new Set(log.map((o) => o.status))].sort();
    console.log(
      `outage: ${log.length} requests; statuses ${statuses.join(', ')}; slowest ${Math.max(...log.map((o) => o.ms))} ms; ` +
        `503s ${log.filter((o) => o.status === 503).length}`,
    );
    // Every request got an answer, of a documented kind, and none waited past the deadline. A
    // failure says what came instead, when, and what the server printed if it is gone.
    const moments = { stop: downAt, start: upAt };
    const exited = () =>
      server.child.exitCode === null && server.child.signalCode === null
        ? ''
        : `; the server exited (${server.child.exitCode ?? server.child.signalCode}): ${server.stderr().slice(-2_000)}`;
    expect(
      grouped(
        log.filter((o) => o.status === 0),
        moments,
      ),
      `no answer${exited()}`,
    ).toEqual([]);
    expect(
      grouped(
        log.filter((o) => ![200, 201, 503].includes(o.status)),
        moments,
      ),
      'other statuses',
    ).toEqual([]);
    expect(
      grouped(
        log.filter((o) => o.status === 503 && o.code !== 'service_unavailable'),
        moments,
      ),
    ).toEqual([]);
    // The slowest, with when it started against the outage: what a failure needs to be understood.
    const slowest = log.reduce((a, b) => (b.ms > a.ms ? b : a));
    expect(
      slowest.ms,
      `slowest: ${JSON.stringify({ ...slowest, startedAt: undefined, afterStop: slowest.startedAt - downAt, afterStart: slowest.startedAt - upAt })}`,
    ).toBeLessThan(REQUEST_TIMEOUT_MS + 1_000);
    // The outage was seen, and /readyz said so, then said it was over.
    expect(log.filter((o) => o.status === 503 && o.startedAt >= downAt && o.startedAt < upAt).length).toBeGreaterThan(
      0,
    );
    expect(ready.some((o) => o.status === 503 && o.startedAt >= downAt && o.startedAt < upAt)).toBe(true);
    expect(ready.filter((o) => o.startedAt >= upAt + 5_000).every((o) => o.status === 200)).toBe(true);
    // Back within 5 s: every request started 5 s after PostgreSQL returned succeeded.
    const after = log.filter((o) => o.startedAt >= upAt + 5_000);
    expect(after.length).toBeGreaterThan(20);
    expect(
      grouped(
        after.filter((o) => o.status >= 500),
        moments,
      ),
      'failures 5 s after the start',
    ).toEqual([]);
    const firstGood = Math.min(...log.filter((o) => o.startedAt >= upAt && o.status < 500).map((o) => o.startedAt));
    console.log(`outage: first success ${firstGood - upAt} ms after PostgreSQL accepted connections again`);
    expect(server.child.exitCode).toBeNull();
  }, 180_000);

  it('PostgreSQL SIGKILLed during creates, updates and deletes: every acknowledged write is there after recovery', async () => {
    const pg = await cluster();
    const server = await serverOn({ DATABASE_URL: pg.url });
    const owned = await createAccounts(server.baseUrl, 24, 'crash-owned');
    const doomed = await createAccounts(server.baseUrl, 60, 'crash-doomed');
    const load = writeLoad(() => server.baseUrl, {
      creators: 2,
      updaters: 8,
      owned,
      doomed,
      tag: 'pgkill',
      timeoutMs: REQUEST_TIMEOUT_MS + 5_000,
    });
    // Writes flowing before the kill (was a fixed 2.5 s).
    await waitUntil('150 acknowledged writes', () => acknowledgedOps(load.log) >= 150);
    await pg.kill();
    await sleep(1_000); // down for a while, as a crashed database is
    await pg.start();
    // Writes acknowledged again after the restart (was a fixed 3 s).
    const restartedAt = Date.now();
    await waitUntil('50 writes acknowledged after the restart', () => ackedSince(load.log, restartedAt) >= 50);
    // Enough acknowledged writes to mean something, however busy the machine (other test files
    // run beside this one): the load goes on after recovery until there are, 15 s at most.
    for (const until = Date.now() + 15_000; acknowledgedOps(load.log) <= 1_000 && Date.now() < until; )
      await sleep(200);
    await load.stop();

    const rows = rowsOf(await pg.sql<{ id: string; name: string }[]>`select id, name from users`);
    const lost = lostWrites(load.acks, rows);
    const acked = acknowledgedOps(load.log);
    console.log(
      `postgres SIGKILL: ${load.log.length} writes sent, ${acked} acknowledged, ${load.log.filter((o) => o.status === 503).length} answered 503; lost: ${lost.length}`,
    );
    expect(lost).toEqual([]);
    expect(acked).toBeGreaterThan(1_000);
    expect(
      grouped(
        load.log.filter((o) => o.status >= 500 && o.status !== 503),
        { restart: restartedAt },
      ),
    ).toEqual([]);
    expect(await pg.sql.unsafe(HALF_WRITTEN)).toHaveLength(0);
    expect(server.child.exitCode).toBeNull();
  }, 180_000);

  it('the server SIGKILLed during writes and restarted: no half-written account, every acknowledged write there', async () => {
    const pg = await cluster();
    let server = await serverOn({ DATABASE_URL: pg.url });
    const owned = await createAccounts(server.baseUrl, 24, 'srvkill-owned');
    const doomed = await createAccounts(server.baseUrl, 60, 'srvkill-doomed');
    const load = writeLoad(() => server.baseUrl, {
      creators: 2,
      updaters: 8,
      owned,
      doomed,
      tag: 'srvkill',
      timeoutMs: REQUEST_TIMEOUT_MS + 5_000,
    });
    // Writes flowing before the kill (was a fixed 2 s).
    await waitUntil('150 acknowledged writes', () => acknowledgedOps(load.log) >= 150);
    server.child.kill('SIGKILL');
    await server.exited;
    server = await serverOn({ DATABASE_URL: pg.url });
    // Writes acknowledged by the new process (was a fixed 2 s).
    const restartedAt = Date.now();
    await waitUntil('50 writes acknowledged after the restart', () => ackedSince(load.log, restartedAt) >= 50);
    await load.stop();

    const rows = rowsOf(await pg.sql<{ id: string; name: string }[]>`select id, name from users`);
    const lost = lostWrites(load.acks, rows);
    console.log(
      `server SIGKILL (PostgreSQL): ${load.log.length} writes sent, ${acknowledgedOps(load.log)} acknowledged; lost: ${lost.length}`,
    );
    expect(lost).toEqual([]);
    expect(await pg.sql.unsafe(HALF_WRITTEN)).toHaveLength(0);
  }, 180_000);

  it('a database that hangs (a table lock): requests end in 503 at the deadline, never pile up, and a write that timed out changed nothing', async () => {
    const pg = await cluster();
    const server = await serverOn({ DATABASE_URL: pg.url, REQUEST_TIMEOUT_MS: '1500' });
    const [id] = await createAccounts(server.baseUrl, 1, 'hang');
    const locker = await pg.sql.reserve();
    await locker`begin`;
    await locker`lock table users in access exclusive mode`;
    const log: Outcome[] = [];
    // Six times the pool: most requests wait for a connection, not for the lock.
    const wave = Array.from({ length: 60 }, (_, i) =>
      i % 6 === 0
        ? call(
            server.baseUrl,
            'create',
            '/api/1/user/create',
            {
              method: 'POST',
              body: JSON.stringify({ email: `hang.${i}@example.com`, password: `Hang-password-${i}`, name: 'Hang' }),
              timeoutMs: 10_000,
            },
            log,
          )
        : i % 6 === 1
          ? call(
              server.baseUrl,
              'update',
              '/api/1/user/update',
              { method: 'POST', body: JSON.stringify({ _userId: id, name: `hung ${i}` }), timeoutMs: 10_000 },
              log,
            )
          : call(server.baseUrl, 'get', `/api/1/user/get?_userId=${id}`, { timeoutMs: 10_000 }, log),
    );
    await Promise.all(wave);
    await locker`rollback`;
    locker.release();
    console.log(
      `hang: 60 requests, slowest ${Math.max(...log.map((o) => o.ms))} ms, statuses ${[...new Set(log.map((o) => o.status))].join(', ')}`,
    );
    expect(log.every((o) => o.status === 503 && o.code === 'service_unavailable')).toBe(true);
    expect(Math.max(...log.map((o) => o.ms))).toBeLessThan(1_500 + 1_000);

    // Served again at once; the writes that timed out left nothing behind, even those still queued.
    await sleep(3_000);
    const { status, body } = await call(
      server.baseUrl,
      'get',
      `/api/1/user/get?_userId=${id}`,
      { timeoutMs: 5_000 },
      [],
    );
    expect(status).toBe(200);
    expect(body.result.name).toBe('Seed');
    expect(await pg.sql`select email from users where email like 'hang.%'`).toHaveLength(0);
    // Nor any change event: the only one is the seed's create (issue 15: none for a rolled-back 503).
    expect(await pg.sql`select type, subject::text from events`).toEqual([{ type: 'user.created', subject: id }]);
    const again: Outcome[] = [];
    await Promise.all(
      Array.from({ length: 30 }, () =>
        call(server.baseUrl, 'get', `/api/1/user/get?_userId=${id}`, { timeoutMs: 5_000 }, again),
      ),
    );
    expect(again.every((o) => o.status === 200)).toBe(true);
  }, 180_000);
});

describe('faults with the embedded database', () => {
  it('the server SIGKILLed during writes and restarted on the same folder: every acknowledged write there, none half-written', async () => {
    const dataDir = await procs.migratedDataDir();
    let server = await serverOn({ DATA_DIR: dataDir });
    const owned = await createAccounts(server.baseUrl, 16, 'pglite-owned');
    const doomed = await createAccounts(server.baseUrl, 40, 'pglite-doomed');
    const load = writeLoad(() => server.baseUrl, {
      creators: 2,
      updaters: 6,
      owned,
      doomed,
      tag: 'pglite',
      timeoutMs: REQUEST_TIMEOUT_MS + 5_000,
    });
    // Writes flowing before the kill (was a fixed 2 s).
    await waitUntil('100 acknowledged writes', () => acknowledgedOps(load.log) >= 100);
    server.child.kill('SIGKILL');
    await server.exited;
    server = await serverOn({ DATA_DIR: dataDir });
    // Writes acknowledged by the new process (was a fixed 1.5 s).
    const restartedAt = Date.now();
    await waitUntil('30 writes acknowledged after the restart', () => ackedSince(load.log, restartedAt) >= 30);
    await load.stop();
    server.child.kill('SIGTERM');
    await server.exited;

    const database = await openPglite(dataDir);
    try {
      const client = database.sql;
      const rows = rowsOf(await client.unsafe('select id, name from users'));
      const lost = lostWrites(load.acks, rows);
      console.log(
        `server SIGKILL (PGlite): ${load.log.length} writes sent, ${acknowledgedOps(load.log)} acknowledged; lost: ${lost.length}`,
      );
      expect(lost).toEqual([]);
      expect(await client.unsafe(HALF_WRITTEN)).toHaveLength(0);
    } finally {
      await database.close();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 180_000);
});

withPostgres('a server crash between a write and its answer (PostgreSQL)', () => {
  const until = async (what: string, done: () => Promise<boolean>) => {
    const deadline = Date.now() + 20_000;
    while (!(await done())) {
      if (Date.now() > deadline) throw new Error(`never: ${what}`);
      await sleep(20);
    }
  };

  // Issue 34, point 2. The kill comes once the account is committed and before the caller has
  // the answer (the test never reads the first one). The test holds the request at known points
  // with locks of its own: the users table, until the key is claimed; then the key's row, which
  // the answer is stored under. A server that stores the answer after the commit waits there with
  // the account committed, and is killed there; one that keeps it in the write's transaction
  // cannot commit before the test lets go of the row, so the test lets go and waits for the commit.
  it('SIGKILLed after a create committed, before its answer: the retry with the same Idempotency-Key replays the 201 (was 409 email_taken)', async () => {
    const pg = await cluster();
    let server = await serverOn({ DATABASE_URL: pg.url });
    const key = `crash-${Date.now()}`;
    const email = `idempotent.crash.${Date.now()}@example.com`;
    const create = (baseUrl: string) =>
      fetch(`${baseUrl}/api/1/user/create`, {
        method: 'POST',
        headers: { Authorization: FAULT_TOKEN, 'Content-Type': 'application/json', 'Idempotency-Key': key },
        body: JSON.stringify({ email, password: 'Crash-password-34', name: 'Crash' }),
      });
    const committed = async () =>
      (await pg.sql`select id::text as id from users where email = ${email}`).map((r) => r.id);

    const usersLock = await pg.sql.reserve();
    await usersLock`begin`;
    // Reads go on (its check for the email), its INSERT waits.
    await usersLock`lock table users in share row exclusive mode`;
    const first = create(server.baseUrl).catch(() => undefined);
    await until(
      'the key claimed',
      async () => (await pg.sql`select 1 from idempotency_keys where key = ${key}`).length === 1,
    );
    const keyLock = await pg.sql.reserve();
    await keyLock`begin`;
    await keyLock`select 1 from idempotency_keys where key = ${key} for update`;
    await usersLock`commit`;
    usersLock.release();
    // The server's connection, waiting to store the answer under the key.
    const waiting = async () =>
      (
        await pg.sql`select pid from pg_stat_activity
          where wait_event_type = 'Lock' and query ilike '%update%idempotency_keys%'`
      ).map((r) => r.pid as number);
    await until('the answer waiting for the key row', async () => (await waiting()).length === 1);
    const keptWithTheWrite = (await committed()).length === 0;
    if (keptWithTheWrite) {
      await keyLock`commit`;
      await until('the account committed', async () => (await committed()).length === 1);
    }
    server.child.kill('SIGKILL');
    await server.exited;
    if (!keptWithTheWrite) {
      // Its statement reached PostgreSQL before the crash only because the test held it: ended
      // with the server, it is the answer a crash a moment earlier never sent.
      for (const pid of await waiting()) await pg.sql`select pg_terminate_backend(${pid})`;
      await keyLock`commit`;
    }
    keyLock.release();
    await first;
    const [accountId] = await committed();
    expect(accountId).toBeDefined();
    // The claim's lease ran out, as it would 60 s after a crash: the retry may take an unanswered key over.
    await pg.sql`update idempotency_keys set locked_until = now() - interval '1 second' where key = ${key} and status is null`;

    server = await serverOn({ DATABASE_URL: pg.url });
    const retry = await create(server.baseUrl);
    const body = await retry.json();
    expect({ status: retry.status, code: body.code }).toEqual({ status: 201, code: undefined });
    expect(retry.headers.get('idempotent-replayed')).toBe('true');
    expect(body.result).toEqual({ _userId: accountId, status: 'user created' });
    expect(await committed()).toEqual([accountId]);
  }, 180_000);
});
