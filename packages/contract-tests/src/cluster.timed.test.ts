// Past one machine (issue 16): three replicas behind HAProxy (deploy/haproxy.cfg) on a PostgreSQL
// primary with a synchronous standby and Redis, as `./pnpmw cluster up` starts them. Each test
// runs a mixed load through HAProxy, breaks something, and checks the database afterwards: every
// acknowledged create, update and delete is there, nothing is half-written.
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, statSync } from 'node:fs';
import { type AddressInfo, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { alive, type Cluster, type ClusterState, clusterUnavailable, freePort, up } from '@user-accounts/cluster';
import { builtEntry } from '@user-accounts/server/testing/build';
import { processes } from '@user-accounts/server/testing/processes';
import postgres from 'postgres';
import { SMTPServer } from 'smtp-server';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  ackedSince,
  acknowledged,
  acknowledgedOps,
  call,
  createAccounts,
  FAULT_TOKEN,
  HALF_WRITTEN,
  lostWrites,
  type Outcome,
  rowsOf,
  type WriteLoad,
  waitUntil,
  writeLoad,
} from './faults/load.ts';
import { type Answer, type SlowClients, send, slowClients } from './faults/sources.ts';
import { receiverOn } from './receiver.ts';

const unavailable = clusterUnavailable();
if (unavailable !== undefined) console.warn(`\n[contract-tests] cluster tests: SKIPPED, ${unavailable}\n`);
const withCluster = unavailable === undefined ? describe : describe.skip;

const METRICS_TOKEN = 'metrics_token_for_the_cluster_tests_01234';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const REQUEST_TIMEOUT_MS = 3_000;
// The failover and load tests drive the cluster from one address, as fast as it answers: with
// haproxy.cfg's defaults (2,000 new connections per 10 s per address) a failover's fast 503s
// tripped the per-address limit and every later connection was refused, so the service never
// came "back". Those limits are tested in their own block, at their defaults.
const LOAD_FROM_ONE_ADDRESS = { UA_SOURCE_NEW_CONNS: '10000000', UA_SOURCE_REQUESTS: '10000000' };

const SERVER_ENV = {
  API_TOKENS: FAULT_TOKEN,
  RATE_LIMIT: '10000000/60s',
  RATE_LIMIT_HASH: 'off',
  REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
  // One hash slot per replica: three replicas on two cores, beside PostgreSQL and the load.
  HASH_CONCURRENCY: '1',
  // The failover's mail load sends to 20 accounts for as long as the failover lasts.
  MESSAGE_ACCOUNT_HOURLY_LIMIT: '1000',
};

/** The replicas run the run's build of the server, as the other system tests' servers do (testing/build.ts). */
const replicasRun = () => {
  const serverMain = builtEntry('main.js');
  return serverMain === undefined ? {} : { serverMain };
};
const failed = (o: Outcome) => o.status === 0 || o.status >= 500;

/** Writers (writeLoad) and two readers, through HAProxy. */
function mixedLoad(cluster: Cluster, tag: string, owned: string[], doomed: string[]) {
  const base = () => cluster.state.url;
  const writes: WriteLoad = writeLoad(base, {
    creators: 2,
    updaters: 2,
    owned,
    doomed,
    tag,
    timeoutMs: REQUEST_TIMEOUT_MS + 2_000,
  });
  const reads: Outcome[] = [];
  let running = true;
  const reader = async (r: number) => {
    for (let i = r; running; i += 2) {
      const id = owned[i % owned.length]!;
      await call(base(), 'get', `/api/1/user/get?_userId=${id}`, { timeoutMs: REQUEST_TIMEOUT_MS + 2_000 }, reads);
    }
  };
  const readers = [reader(0), reader(1)];
  return {
    writes,
    all: () => [...writes.log, ...reads],
    async stop() {
      running = false;
      await Promise.all([writes.stop(), ...readers]);
    },
  };
}

async function setCheck(cluster: Cluster, writes: WriteLoad): Promise<void> {
  const port = cluster.primary().port;
  const rows = rowsOf(
    await cluster.onNode(port, (sql) => sql<{ id: string; name: string }[]>`select id, name from users`),
  );
  expect(lostWrites(writes.acks, rows)).toEqual([]);
  expect(await cluster.onNode(port, (sql) => sql.unsafe(HALF_WRITTEN))).toHaveLength(0);
  console.log(
    `[cluster]   set check: ${acknowledged(writes.acks)} acknowledged writes (creates, deletes, last names) all in the database, none half-written`,
  );
}

function report(what: string, outcomes: Outcome[], extra = ''): void {
  const failures = outcomes.filter(failed);
  const statuses = [...new Set(failures.map((o) => o.status))].join(', ') || 'none';
  console.log(
    `[cluster] ${what}: ${outcomes.length} requests, ${failures.length} failed (statuses: ${statuses}), ` +
      `${acknowledgedOps(outcomes)} acknowledged${extra}`,
  );
}

withCluster('./pnpmw cluster up | status | down', () => {
  const MAIN = fileURLToPath(import.meta.resolve('@user-accounts/cluster/main'));
  const run = (args: string[], dir: string) =>
    new Promise<{ code: number | null; out: string }>((resolve) => {
      const child = spawn(process.execPath, [MAIN, ...args], { env: { ...process.env, CLUSTER_DIR: dir } });
      let out = '';
      child.stdout.on('data', (chunk: Buffer) => {
        out += chunk.toString();
      });
      child.stderr.on('data', (chunk: Buffer) => {
        out += chunk.toString();
      });
      child.on('close', (code) => resolve({ code, out }));
    });

  it('up prints where to send requests, a working token, and URLs with the passwords its PostgreSQL and Redis refuse any connection without; down leaves nothing running and no folder', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'ua-cluster-cli-'));
    const port = await freePort();
    const started = await run(['up', '--port', String(port)], dir);
    expect(started.code, started.out).toBe(0);
    const state = JSON.parse(readFileSync(join(dir, 'state.json'), 'utf8')) as ClusterState;
    expect(started.out).toContain(`Send requests to http://127.0.0.1:${port}`);
    const token = /TOKEN=(\S+)/.exec(started.out)![1]!;
    const answer = await fetch(`http://127.0.0.1:${port}/api/1/user/get?email=nobody@example.com`, {
      headers: { Authorization: token },
    });
    expect(answer.status).toBe(404);
    // The metrics addresses it prints answer, one replica each, with the token it prints (issue 64:
    // the one it advertised answered 404, for no replica had a METRICS_TOKEN).
    const metricsToken = /export METRICS_TOKEN=(\S+)/.exec(started.out)?.[1];
    const scrapes = [...started.out.matchAll(/(http:\/\/127\.0\.0\.1:\d+\/metrics) +# (app\d)/g)];
    expect(
      scrapes.map((m) => m[2]),
      started.out,
    ).toEqual(['app1', 'app2', 'app3']);
    for (const [, url, name] of scrapes) {
      const scraped = await fetch(url!, { headers: { Authorization: `Bearer ${metricsToken}` } });
      expect(scraped.status, url).toBe(200);
      expect(await scraped.text()).toMatch(new RegExp(`^\\w+\\{[^}]*replica="${name}"`, 'm'));
    }
    const status = await run(['status'], dir);
    expect(status.out).toMatch(/app1 +127\.0\.0\.1:\d+ +UP/);
    await expectPrivate(dir, started.out, state);
    const pids = [
      state.haproxy.pid,
      state.redis.pid,
      ...state.replicas.map((r) => r.pid),
      ...state.postgres.map((n) => n.pid),
    ];
    expect((await run(['down'], dir)).code).toBe(0);
    expect(pids.filter(alive)).toEqual([]);
    expect(existsSync(dir)).toBe(false);
    expect((await run(['status'], dir)).code).toBe(3);
  }, 120_000);
});

withCluster('three replicas behind HAProxy, PostgreSQL with a synchronous standby, Redis', () => {
  const procs = processes();
  let cluster: Cluster;
  let owned: string[];
  let doomed: string[];
  beforeAll(async () => {
    cluster = await up({
      dir: mkdtempSync(join(tmpdir(), 'ua-cluster-')),
      ...replicasRun(),
      serverEnv: SERVER_ENV,
      balancerEnv: LOAD_FROM_ONE_ADDRESS,
    });
    owned = await createAccounts(cluster.state.url, 12, 'owned');
  }, 120_000);
  afterAll(async () => {
    procs.cleanup();
    await cluster?.down();
  });

  it('a rolling restart of the three replicas (SIGTERM, wait ready, next) fails no request', async () => {
    doomed = await createAccounts(cluster.state.url, 10, 'doomed-rolling');
    const load = mixedLoad(cluster, 'rolling', owned, doomed);
    const started = Date.now();
    // Between restarts, the load flows: answers started since the last step (was a fixed 0.5 s).
    let since = started;
    const flowing = async () => {
      await waitUntil('15 answers since the last restart', () => ackedSince(load.all(), since) >= 15);
      since = Date.now();
    };
    for (const [i, replica] of cluster.state.replicas.entries()) {
      await flowing();
      await cluster.stopReplica(i);
      await cluster.startReplica(i);
      await cluster.waitBalancer(replica.name, 'UP');
      since = Date.now();
    }
    await flowing();
    await load.stop();
    report(`rolling restart in ${((Date.now() - started) / 1000).toFixed(1)} s`, load.all());
    expect(load.all().filter(failed)).toEqual([]);
    expect(acknowledgedOps(load.all())).toBeGreaterThan(50);
    await setCheck(cluster, load.writes);
  }, 120_000);

  it('a replica SIGKILLed: only requests in flight on it fail; none once HAProxy marks it down; it rejoins', async () => {
    doomed = await createAccounts(cluster.state.url, 10, 'doomed-kill');
    const load = mixedLoad(cluster, 'kill', owned, doomed);
    const loadAt = Date.now();
    // The load flows on all three before the kill (was a fixed 1 s).
    await waitUntil('20 answers before the kill', () => ackedSince(load.all(), loadAt) >= 20);
    const killedAt = Date.now();
    await cluster.killReplica(1);
    await cluster.waitBalancer('app2', 'DOWN');
    const downAt = Date.now();
    await sleep(2_000); // down for 2 s: the requests meanwhile must all succeed
    await cluster.startReplica(1);
    await cluster.waitBalancer('app2', 'UP');
    const upAt = Date.now();
    // The load goes on after it rejoined (was a fixed 1 s).
    await waitUntil('20 answers after it rejoined', () => ackedSince(load.all(), upAt) >= 20);
    await load.stop();
    const all = load.all();
    report(`replica killed, marked down after ${downAt - killedAt} ms`, all);
    // In flight on it: at most one request per load worker (4 writers, a deleter, 2 readers).
    const failures = all.filter(failed);
    expect(failures.length).toBeLessThanOrEqual(7);
    expect(failures.filter((o) => o.startedAt >= downAt)).toEqual([]);
    // HAProxy's own answer is problem+json (deploy/haproxy-errors/).
    for (const o of failures.filter((o) => o.status === 502)) expect(o.code).toBe('bad_gateway');
    expect(failures.filter((o) => o.startedAt < killedAt - REQUEST_TIMEOUT_MS)).toEqual([]);
    await setCheck(cluster, load.writes);
  }, 120_000);

  it('Redis stopped under load: rate limits fall back to the database, nothing fails', async () => {
    doomed = await createAccounts(cluster.state.url, 5, 'doomed-redis');
    const load = mixedLoad(cluster, 'redis', owned, doomed);
    const loadAt = Date.now();
    // The load flows (with Redis) before it stops (was a fixed 1 s).
    await waitUntil('20 answers before Redis stops', () => ackedSince(load.all(), loadAt) >= 20);
    await cluster.stopRedis();
    await sleep(3_000); // Redis away for 3 s: what the test is about
    await cluster.startRedis();
    const backAt = Date.now();
    // The load goes on after Redis is back (was a fixed 1 s).
    await waitUntil('20 answers after Redis is back', () => ackedSince(load.all(), backAt) >= 20);
    await load.stop();
    report('Redis stopped for 3 s', load.all());
    expect(load.all().filter(failed)).toEqual([]);
    await setCheck(cluster, load.writes);
  }, 180_000);

  // Last: it leaves the cluster without a standby.
  it('the primary SIGKILLed and the standby promoted: 503s (never 500) meanwhile, back within 10 s, no acknowledged write lost, no message of an acknowledged send lost', async () => {
    // Mail sent by us through the failover (issue 60, Done when): every user/ticket with `send`
    // answered 201 wrote its message in the ticket's transaction, which the synchronous standby
    // holds; the replicas' workers send it from whichever node leads.
    const relay = await mailRelay();
    const set = await procs.cli(
      [
        'site',
        'set',
        '--site',
        'default',
        '--mail-from',
        'Shop <no-reply@shop.example>',
        '--mail-transport',
        `smtp://127.0.0.1:${relay.port}`,
        '--link-origins',
        'https://shop.example',
      ],
      { DATABASE_URL: cluster.state.databaseUrl },
    );
    expect(set.code, set.stderr).toBe(0);
    const recipients = await createAccounts(cluster.state.url, 20, 'mail');
    const mail = mailLoad(cluster.state.url, recipients);
    const outcome = await failover(cluster, owned);
    const acknowledged = await mail.stop();
    expect(outcome.lost).toEqual([]);
    expect(outcome.recoveredMs).toBeLessThan(10_000);
    expect(outcome.statuses.filter((s) => s !== 503)).toEqual([]);
    expect(acknowledged.length).toBeGreaterThan(0);
    const arrived = () => acknowledged.filter((id) => relay.arrivals.has(id)).length;
    const deadline = Date.now() + 60_000;
    while (arrived() < acknowledged.length && Date.now() < deadline) await sleep(200);
    console.log(
      `[cluster]   mail through the failover: ${acknowledged.length} sends acknowledged, ${arrived()} of their messages at the relay, ` +
        `${mail.refused()} sends refused (503)`,
    );
    expect(
      acknowledged.filter((id) => !relay.arrivals.has(id)),
      'messages of acknowledged sends lost',
    ).toEqual([]);
  }, 180_000);
});

/** An SMTP server in the test's process that takes every message: the Message-IDs it received. */
async function mailRelay(): Promise<{ arrivals: Set<string>; port: number }> {
  const arrivals = new Set<string>();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, _session, callback) {
      const chunks: Buffer[] = [];
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        const id = /^Message-ID: <([^>]+)@user-accounts>/im.exec(Buffer.concat(chunks).toString('utf8'))?.[1];
        if (id !== undefined) arrivals.add(id);
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  mailCleanups.push(() => new Promise<void>((resolve) => server.close(() => resolve())));
  return { arrivals, port: (server.server.address() as AddressInfo).port };
}
const mailCleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(mailCleanups.map((c) => c()));
});

/** user/ticket with `send` through HAProxy, one after another over `recipients`: the messageIds answered 201. */
function mailLoad(url: string, recipients: string[]) {
  const acknowledged: string[] = [];
  const log: Outcome[] = [];
  let stopped = false;
  const loop = (async () => {
    for (let i = 0; !stopped; i++) {
      const { status, body } = await call(
        url,
        'ticket',
        '/api/1/user/ticket',
        {
          method: 'POST',
          body: JSON.stringify({
            _userId: recipients[i % recipients.length],
            purpose: 'reset_password',
            send: { channel: 'email', linkTemplate: 'https://shop.example/reset?ticket={ticket}' },
          }),
          timeoutMs: REQUEST_TIMEOUT_MS + 2_000,
        },
        log,
      );
      if (status === 201) acknowledged.push(body.result.messageId as string);
      else await sleep(50);
    }
  })();
  return {
    refused: () => log.filter((o) => o.status === 503).length,
    async stop() {
      stopped = true;
      await loop;
      for (const o of log) if (o.status !== 201) expect(o.status, JSON.stringify(o)).toBe(503);
      return acknowledged;
    },
  };
}

/** PostgreSQL's first error for this connection (undefined: it connected). */
async function refusal(target: string | postgres.Options<Record<string, never>>): Promise<string | undefined> {
  const options = { max: 1, connect_timeout: 5, onnotice: () => {} };
  const sql = typeof target === 'string' ? postgres(target, options) : postgres({ ...target, ...options });
  try {
    await sql`select 1`;
    return undefined;
  } catch (error) {
    return `${(error as { code?: string }).code}: ${(error as Error).message}`;
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

/** Redis's replies to `commands`, sent on one fresh connection. */
function redisSays(port: number, commands: string[]): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = connect(port, '127.0.0.1');
    let reply = '';
    socket.on('connect', () => socket.write(commands.map((c) => `${c}\r\n`).join('')));
    socket.on('data', (chunk: Buffer) => {
      reply += chunk.toString();
      const lines = reply.split('\r\n').slice(0, -1);
      if (lines.length < commands.length) return;
      socket.destroy();
      resolve(lines);
    });
    socket.on('error', reject);
  });
}

/** `cluster up`'s PostgreSQL and Redis answer the URLs it printed, and nobody without their passwords. */
async function expectPrivate(dir: string, printed: string, state: ClusterState): Promise<void> {
  const port = state.postgres[0]!.port;
  const as = { user: 'postgres', database: 'postgres' };
  // Over TCP and over its Unix socket (which any local user could open): no password, a wrong one.
  expect(await refusal({ ...as, host: '127.0.0.1', port })).toMatch(/^28P01: .*password authentication failed/);
  expect(await refusal({ ...as, host: '127.0.0.1', port, pass: 'guess' })).toMatch(/^28P01: /);
  expect(await refusal({ ...as, path: join(dir, `.s.PGSQL.${port}`) })).toMatch(/^28P01: /);
  expect(await refusal({ ...as, path: join(dir, `.s.PGSQL.${port}`), pass: state.postgresPassword })).toBeUndefined();
  // The standby refuses the same way (it is a copy of the primary, pg_hba.conf and all).
  expect(await refusal({ ...as, host: '127.0.0.1', port: state.postgres[1]!.port })).toMatch(/^28P01: /);

  expect((await redisSays(state.redis.port, ['PING', 'GET x']))[0]).toMatch(/^-NOAUTH /);
  expect(await redisSays(state.redis.port, ['AUTH guess', 'PING'])).toEqual([
    expect.stringMatching(/^-WRONGPASS /),
    expect.stringMatching(/^-NOAUTH /),
  ]);
  expect(await redisSays(state.redis.port, [`AUTH ${state.redisPassword}`, 'PING'])).toEqual(['+OK', '+PONG']);

  // The URLs it printed (and gave the replicas) carry them; they are kept for its user only.
  expect(state.databaseUrl).toContain(`postgres:${state.postgresPassword}@`);
  expect(await refusal(state.databaseUrl)).toBeUndefined();
  expect(state.redisUrl).toBe(`redis://:${state.redisPassword}@127.0.0.1:${state.redis.port}`);
  expect(printed).toContain(`Database: ${state.databaseUrl}`);
  expect(printed).toContain(`Redis:    ${state.redisUrl}`);
  expect(statSync(dir).mode & 0o777).toBe(0o700);
  expect(statSync(join(dir, 'state.json')).mode & 0o777).toBe(0o600);

  // Nor are they on a command line, which every local user can read in /proc.
  for (const pid of [state.redis.pid, ...state.postgres.map((n) => n.pid)]) {
    const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
    expect(cmdline).not.toContain(state.postgresPassword);
    expect(cmdline).not.toContain(state.redisPassword);
  }
}

interface Failover {
  lost: string[];
  recoveredMs: number;
  /** The statuses of the requests that failed. */
  statuses: number[];
}

/**
 * Under load, the standby stops receiving WAL (its primary's WAL sender is paused: a standby that
 * falls behind), then the primary is killed and the standby promoted. With a synchronous standby,
 * the commits that could not reach it were never acknowledged; with an asynchronous one, they were.
 */
async function failover(cluster: Cluster, owned: string[]): Promise<Failover> {
  const doomed = await createAccounts(cluster.state.url, 10, `doomed-failover-${cluster.state.synchronous}`);
  const load = mixedLoad(cluster, `failover-${cluster.state.synchronous}`, owned, doomed);
  const loadAt = Date.now();
  // The load flows, replicated, before the standby falls behind (was a fixed 1 s).
  await waitUntil('20 answers before the standby falls behind', () => ackedSince(load.all(), loadAt) >= 20);
  await cluster.pauseReplication();
  await sleep(1_500);
  await cluster.killPrimary();
  const promoting = Date.now();
  await cluster.promoteStandby();
  // Back when a write through HAProxy is acknowledged again.
  let recoveredMs = Number.POSITIVE_INFINITY;
  for (let i = 0; Date.now() - promoting < 20_000; i++) {
    const { status } = await call(
      cluster.state.url,
      'create',
      '/api/1/user/create',
      {
        method: 'POST',
        body: JSON.stringify({
          email: `probe.${cluster.state.synchronous}.${i}@example.com`,
          password: `Probe-pass-${i}`,
          name: 'Probe',
        }),
        timeoutMs: REQUEST_TIMEOUT_MS + 2_000,
      },
      [],
    );
    if (status === 201) {
      recoveredMs = Date.now() - promoting;
      break;
    }
    await sleep(100);
  }
  // The load goes on once the service is back (was a fixed 1 s).
  const backAt = Date.now();
  if (recoveredMs !== Number.POSITIVE_INFINITY) {
    await waitUntil('20 answers after the promotion', () => ackedSince(load.all(), backAt) >= 20);
  }
  await load.stop();
  const rows = rowsOf(
    await cluster.onNode(
      cluster.primary().port,
      (sql) => sql<{ id: string; name: string }[]>`select id, name from users`,
    ),
  );
  const lost = lostWrites(load.writes.acks, rows);
  console.log(
    `[cluster]   set check: ${acknowledged(load.writes.acks)} acknowledged writes checked, ${lost.length} missing`,
  );
  const all = load.all();
  report(
    `failover, ${cluster.state.synchronous ? 'synchronous' : 'asynchronous'} standby`,
    all,
    `, ${lost.length} acknowledged writes lost, service back ${recoveredMs} ms after the promotion began`,
  );
  expect(await cluster.onNode(cluster.primary().port, (sql) => sql.unsafe(HALF_WRITTEN))).toHaveLength(0);
  for (const o of all.filter(failed)) expect(o.code).toBe('service_unavailable');
  return { lost, recoveredMs, statuses: all.filter(failed).map((o) => o.status) };
}

withCluster('the same failover with an asynchronous standby', () => {
  let cluster: Cluster;
  beforeAll(async () => {
    cluster = await up({
      dir: mkdtempSync(join(tmpdir(), 'ua-cluster-')),
      ...replicasRun(),
      serverEnv: SERVER_ENV,
      balancerEnv: LOAD_FROM_ONE_ADDRESS,
      synchronous: false,
    });
  }, 120_000);
  afterAll(async () => {
    await cluster?.down();
  });

  it('loses the writes acknowledged while the standby was behind: what the synchronous standby is for', async () => {
    const owned = await createAccounts(cluster.state.url, 12, 'owned-async');
    const outcome = await failover(cluster, owned);
    expect(outcome.lost.length).toBeGreaterThan(0);
    expect(outcome.recoveredMs).toBeLessThan(10_000);
  }, 120_000);
});

withCluster('budgets, revocation and idempotency keys across three replicas', () => {
  const procs = processes();
  let cluster: Cluster;
  const RATE = 150;
  beforeAll(async () => {
    cluster = await up({
      dir: mkdtempSync(join(tmpdir(), 'ua-cluster-')),
      ...replicasRun(),
      serverEnv: { ...SERVER_ENV, RATE_LIMIT: `${RATE}/60s`, WEBHOOK_ALLOW_PRIVATE: 'true', METRICS_TOKEN },
      balancerEnv: LOAD_FROM_ONE_ADDRESS,
    });
  }, 120_000);
  afterAll(async () => {
    procs.cleanup();
    await cluster?.down();
  });

  const get = (token: string, headers: Record<string, string> = {}) =>
    fetch(`${cluster.state.url}/api/1/user/get?email=nobody@example.com`, {
      headers: { Authorization: token, ...headers },
    });

  it('a token revoked with the CLI is refused through HAProxy (whichever replica answers) within 1 s', async () => {
    const env = { DATABASE_URL: cluster.state.databaseUrl };
    const created = await procs.cli(['token', 'create', '--site', 'default', '--scopes', 'read', '--label', 'lb'], env);
    expect(created.code, created.stderr).toBe(0);
    const token = /^ {2}(ua_[A-Za-z0-9_-]{43})$/m.exec(created.stdout)![1]!;
    // leastconn with one request at a time: every replica has accepted (and cached) it.
    for (let i = 0; i < 9; i++) expect((await get(token)).status).toBe(404);
    const listed = JSON.parse((await procs.cli(['token', 'list', '--json'], env)).stdout) as {
      id: string;
      label: string;
    }[];
    expect((await procs.cli(['token', 'revoke', listed.find((t) => t.label === 'lb')!.id], env)).code).toBe(0);
    await sleep(1_000);
    const after = await Promise.all(Array.from({ length: 9 }, () => get(token)));
    expect(after.map((r) => r.status)).toEqual(Array(9).fill(401));
  }, 180_000);

  it('an Idempotency-Key retried through HAProxy on every replica creates one account and replays its answer', async () => {
    const body = JSON.stringify({ email: 'idem.lb@example.com', password: 'Idempotent-pass-1', name: 'Idem' });
    const answers = [];
    for (let i = 0; i < 6; i++) {
      const response = await fetch(`${cluster.state.url}/api/1/user/create`, {
        method: 'POST',
        headers: { Authorization: FAULT_TOKEN, 'Content-Type': 'application/json', 'Idempotency-Key': 'lb-key-1' },
        body,
      });
      answers.push({
        status: response.status,
        replayed: response.headers.get('idempotent-replayed'),
        body: await response.json(),
      });
    }
    expect(answers.map((a) => a.status)).toEqual(Array(6).fill(201));
    expect(answers.slice(1).map((a) => a.replayed)).toEqual(Array(5).fill('true'));
    expect(new Set(answers.map((a) => (a.body as { result: { _userId: string } }).result._userId)).size).toBe(1);
    const [row] = await cluster.onNode(
      cluster.primary().port,
      (sql) => sql`select count(*)::int as n from users where email = 'idem.lb@example.com'`,
    );
    expect(row!.n).toBe(1);
  }, 180_000);

  it('failed verifies are counted once across replicas: the lock holds on all three (Redis)', async () => {
    await createAccounts(cluster.state.url, 1, 'lockout');
    const verify = () =>
      fetch(`${cluster.state.url}/api/1/user/verify`, {
        method: 'POST',
        headers: { Authorization: FAULT_TOKEN, 'Content-Type': 'application/json' },
        body: JSON.stringify({ email: 'seed.lockout.0@example.com', password: 'not-the-password-1' }),
      });
    const statuses = [];
    for (let i = 0; i < 13; i++) statuses.push((await verify()).status);
    // VERIFY_LIMIT's default: 10 failures, then locked, on whichever replica answers.
    expect(statuses).toEqual([...Array(10).fill(422), 429, 429, 429]);
  }, 180_000);

  it('webhook deliveries are shared by the three replicas: every event delivered, none twice', async () => {
    const cleanups: (() => Promise<void>)[] = [];
    try {
      const receiver = await receiverOn(cleanups);
      const env = { DATABASE_URL: cluster.state.databaseUrl, WEBHOOK_ALLOW_PRIVATE: 'true' };
      const added = await procs.cli(['webhook', 'add', '--site', 'default', '--url', receiver.url], env);
      expect(added.code, added.stderr).toBe(0);
      receiver.setSecret(/(whsec_[A-Za-z0-9+/=]+)/.exec(added.stdout)![1]!);
      const ids = await createAccounts(cluster.state.url, 24, 'hooks');
      const distinct = () => new Set(receiver.received.map((r) => r.id));
      const deadline = Date.now() + 20_000;
      while (distinct().size < ids.length && Date.now() < deadline) await sleep(100);
      expect(new Set(receiver.received.map((r) => r.event.subject))).toEqual(new Set(ids));
      expect(receiver.received.length - distinct().size, 'events delivered twice').toBe(0);
      expect(receiver.counts().refused).toBe(0);
      const delivered = () =>
        Promise.all(
          cluster.state.replicas.map(async (r) => {
            const text = await (
              await fetch(`http://127.0.0.1:${r.port}/metrics`, {
                headers: { Authorization: `Bearer ${METRICS_TOKEN}` },
              })
            ).text();
            return Number(/^webhook_attempts_total\{[^}]*outcome="delivered"[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0);
          }),
        );
      // A replica counts a delivery once it has read the receiver's answer, which may be just
      // after the receiver has the event: read until the count is there (it read 23 of 24 once).
      let sent: number[] = [];
      await expect
        .poll(
          async () => {
            sent = await delivered();
            return sent.reduce((a, b) => a + b, 0);
          },
          { timeout: 5_000 },
        )
        .toBe(ids.length);
      console.log(`[cluster] webhooks: ${ids.length} events delivered once each, by the replicas ${sent.join(' / ')}`);
    } finally {
      await Promise.all(cleanups.map((c) => c()));
    }
  }, 180_000);

  it(`one rate-limit budget (${RATE}/60s) shared by the three replicas`, async () => {
    const statuses: number[] = [];
    for (let i = 0; i < RATE + 30; i += 6) {
      const batch = await Promise.all(Array.from({ length: 6 }, () => get(FAULT_TOKEN)));
      statuses.push(...batch.map((r) => r.status));
    }
    const served = statuses.filter((s) => s !== 429).length;
    console.log(
      `[cluster] ${statuses.length} requests against a budget of ${RATE} (less what the earlier tests spent): ${served} served`,
    );
    // What earlier tests in this block spent counts too; leases leave at most (n − 1) × ⌊q/16⌋ unspent.
    expect(served).toBeLessThanOrEqual(RATE);
    expect(statuses.slice(-6)).toEqual(Array(6).fill(429));
  }, 180_000);
});

const summary = (answers: Answer[]) =>
  Object.entries(
    answers.reduce<Record<string, number>>((counts, a) => {
      const key = a.status === 0 ? `none (${a.error})` : String(a.status);
      counts[key] = (counts[key] ?? 0) + 1;
      return counts;
    }, {}),
  )
    .map(([k, n]) => `${n} × ${k}`)
    .join(', ');

// Issue 26, findings 2 to 4: an attacker (site `default`, or no token at all) and a victim (site
// `shop`) side by side through HAProxy, each from a loopback address of its own so that the
// balancer and the replicas tell them apart, as they would two machines.
withCluster('one site cannot hurt another through the balancer (deploy/haproxy.cfg)', () => {
  const procs = processes();
  let cluster: Cluster;
  let shop: string;
  let fresh: string;
  const VICTIM = '127.0.0.3';
  const nobody = '/api/1/user/get?email=nobody@example.com';
  beforeAll(async () => {
    cluster = await up({
      dir: mkdtempSync(join(tmpdir(), 'ua-cluster-')),
      ...replicasRun(),
      serverEnv: {
        ...SERVER_ENV,
        // The servers' own bound on waiting long-polls is another wall; lifted here, so that
        // the balancer's is the one tested.
        LONG_POLLS_PER_TOKEN: '1000',
        LONG_POLLS_PER_SITE: '1000',
        // Default 100/10s, per replica: a longer window, so that a busy machine's slowness cannot
        // let the attacker's count lapse while the test looks.
        AUTH_FAILURE_LIMIT: '50/120s',
      },
    });
    const env = { DATABASE_URL: cluster.state.databaseUrl };
    const mint = async (label: string) => {
      const created = await procs.cli(
        ['token', 'create', '--site', 'shop', '--scopes', 'read,write,verify', '--label', label],
        env,
      );
      expect(created.code, created.stderr).toBe(0);
      return /^ {2}(ua_[A-Za-z0-9_-]{43})$/m.exec(created.stdout)![1]!;
    };
    [shop, fresh] = await Promise.all([mint('shop'), mint('shop, never used before test (c)')]);
  }, 120_000);
  afterAll(async () => {
    procs.cleanup();
    await cluster?.down();
  });

  /** The victim's requests, one every `everyMs`, each given 5 s: what shop's backend sees. */
  async function victim(count: number, everyMs: number, token = shop): Promise<Answer[]> {
    const answers: Promise<Answer>[] = [];
    for (let i = 0; i < count; i++) {
      answers.push(
        i % 2 === 0
          ? send(cluster.state.url, nobody, { from: VICTIM, token, timeoutMs: 5_000 })
          : send(cluster.state.url, '/api/1/user/create', {
              from: VICTIM,
              token,
              method: 'POST',
              body: JSON.stringify({
                email: `victim.${Date.now()}.${i}@example.com`,
                password: `Victim-pass-${i}`,
                name: 'Victim',
              }),
              timeoutMs: 5_000,
            }),
      );
      await sleep(everyMs);
    }
    return Promise.all(answers);
  }
  const served = (answers: Answer[]) => answers.filter((a) => a.status === 404 || a.status === 201);

  it('(a) 200 long-polls of one events token take no slot of another site’s ordinary requests', async () => {
    const stop = new AbortController();
    // From four addresses, 50 each: the balancer's per-address bound is not what is tested here.
    const polls = Array.from({ length: 200 }, (_, i) =>
      send(cluster.state.url, '/api/1/events?wait=30', {
        from: `127.0.0.${10 + (i % 4)}`,
        token: FAULT_TOKEN,
        timeoutMs: 60_000,
        signal: stop.signal,
      }),
    );
    let answered = 0;
    for (const poll of polls) void poll.then(() => (answered += 1));
    try {
      // Once HAProxy holds all 200 connections (and a moment for them to reach the replicas).
      const deadline = Date.now() + 15_000;
      while (Number((await cluster.balancerStats()).get('api/FRONTEND')?.scur) < 200 && Date.now() < deadline)
        await sleep(100);
      // ... and all 200 have reached the replicas (was a fixed 1 s).
      await waitUntil(
        '200 long-polls on the replicas',
        async () => Number((await cluster.balancerStats()).get('long_polls/BACKEND')?.scur) >= 200,
      );
      const answers = await victim(12, 250);
      const stats = await cluster.balancerStats();
      console.log(
        `[cluster] 200 long-polls waiting (long_polls backend: ${stats.get('long_polls/BACKEND')?.scur ?? 'none'}, ` +
          `replicas backend: ${stats.get('replicas/BACKEND')?.scur}); shop: ${summary(answers)}, ` +
          `slowest ${Math.max(...answers.map((a) => a.ms))} ms`,
      );
      expect(served(answers)).toHaveLength(answers.length);
      // The attack was there all along: every poll was still waiting.
      expect(answered).toBe(0);
      expect(Number(stats.get('long_polls/BACKEND')?.scur)).toBe(200);
    } finally {
      stop.abort();
      await Promise.all(polls);
    }
  }, 180_000);

  it('(b) slow senders (bodies and headers a byte at a time, no token) neither fail nor slow another site’s requests', async () => {
    const { url } = cluster.state;
    const host = new URL(url).host;
    // 400 bodies announced as 60,000 bytes, sent a byte every 2 s, from four addresses.
    const bodies = Array.from({ length: 4 }, (_, i) =>
      slowClients(url, {
        from: `127.0.0.${20 + i}`,
        count: 100,
        head: `POST /api/1/user/create HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 60000\r\n\r\n`,
        body: '{'.padEnd(60_000, ' '),
        everyMs: 2_000,
        reopenMs: 100,
      }),
    );
    // 300 connections from one address sending their headers a byte every 2 s.
    const heads = slowClients(url, {
      from: '127.0.0.30',
      count: 300,
      head: `GET ${nobody} HTTP/1.1\r\nHost: ${host}\r\nX-Padding: ${'x'.repeat(1_000)}\r\n\r\n`,
      everyMs: 2_000,
      reopenMs: 1_000,
    });
    const cut = (clients: SlowClients[]) => clients.reduce((n, c) => n + (c.answered.get(408) ?? 0), 0);
    try {
      await sleep(1_000);
      // Over 8 s: longer than a slow client is let to take (5 s), so they come back meanwhile.
      const answers = await victim(16, 500);
      console.log(
        `[cluster] slow senders: ${bodies.reduce((n, b) => n + b.opened, 0)} body connections, ` +
          `${heads.opened} header connections (${heads.refused} refused at once); ` +
          `408 after 5 s: ${cut(bodies)} slow bodies, ${cut([heads])} slow heads; ` +
          `shop: ${summary(answers)}, slowest ${Math.max(...answers.map((a) => a.ms))} ms`,
      );
      expect(served(answers)).toHaveLength(answers.length);
      expect(Math.max(...answers.map((a) => a.ms))).toBeLessThan(3_000);
      // They were cut by the balancer (408), and one address could not open 300.
      expect(cut(bodies)).toBeGreaterThan(0);
      expect(cut([heads])).toBeGreaterThan(0);
      expect(heads.refused).toBeGreaterThan(0);
    } finally {
      for (const clients of [...bodies, heads]) clients.stop();
    }
  }, 180_000);

  it('(c) 450 bogus tokens from one address lock out that address only: a fresh token from another is accepted', async () => {
    const ATTACKER = '127.0.0.40';
    const bogus = (i: number) =>
      send(cluster.state.url, nobody, { from: ATTACKER, token: `ua_bogus_${i}_${'x'.repeat(40)}`, timeoutMs: 5_000 });
    const attack: Answer[] = [];
    for (let i = 0; i < 450; i += 10)
      attack.push(...(await Promise.all(Array.from({ length: 10 }, (_, j) => bogus(i + j)))));
    // The fresh token, never used on any replica (none remembers it as accepted), from another address.
    const fromVictim = [];
    for (let i = 0; i < 6; i++)
      fromVictim.push(await send(cluster.state.url, nobody, { from: VICTIM, token: fresh, timeoutMs: 5_000 }));
    const still = [];
    for (let i = 0; i < 6; i++) still.push(await bogus(1000 + i));
    console.log(
      `[cluster] 450 bogus tokens: ${summary(attack)}; ` +
        `then a fresh token from another address: ${summary(fromVictim)}; the attacker again: ${summary(still)}`,
    );
    expect(fromVictim.map((a) => a.status)).toEqual(Array(6).fill(404));
    expect(still.map((a) => a.status)).toEqual(Array(6).fill(429));
  }, 180_000);

  it('(d) only a feed read that waits takes a long-poll slot: without wait, or with wait=0, it is an ordinary request', async () => {
    const sessions = async () => {
      const stats = await cluster.balancerStats();
      return {
        polls: Number(stats.get('long_polls/BACKEND')?.stot),
        ordinary: Number(stats.get('replicas/BACKEND')?.stot),
      };
    };
    const feed = (query: string) =>
      send(cluster.state.url, `/api/1/events${query}`, { from: VICTIM, token: FAULT_TOKEN, timeoutMs: 5_000 });
    const before = await sessions();
    for (const query of ['', '?wait=0', '?limit=1']) expect((await feed(query)).status).toBe(200);
    const reads = await sessions();
    expect(reads).toEqual({ polls: before.polls, ordinary: before.ordinary + 3 });
    expect((await feed('?wait=1')).status).toBe(200);
    expect(await sessions()).toEqual({ polls: reads.polls + 1, ordinary: reads.ordinary });
  });

  it('(e) the balancer logs each request without its query string (emails)', async () => {
    const path = '/api/1/user/get?email=log.probe%40example.com';
    expect((await send(cluster.state.url, path, { from: VICTIM, token: shop, timeoutMs: 5_000 })).status).toBe(404);
    const log = () => readFileSync(join(cluster.state.dir, 'logs', 'haproxy.log'), 'utf8');
    // HAProxy writes the line once the answer is sent; give it a moment on a busy machine.
    const deadline = Date.now() + 5_000;
    while (!log().includes('"GET /api/1/user/get HTTP/1.1"') && Date.now() < deadline) await sleep(100);
    expect(log()).toContain('"GET /api/1/user/get HTTP/1.1"');
    expect(log()).not.toContain('log.probe');
    expect(log()).not.toContain('email=');
  });
});
