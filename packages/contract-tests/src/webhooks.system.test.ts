// Webhooks as an operator runs them: server processes, `cli webhook add`, and a real receiver on
// 127.0.0.1 that checks every signature with the Standard Webhooks library (`standardwebhooks`),
// not with our code. Each test compares what the receiver got with what the writers were told
// (acknowledged writes) and with the feed (what committed): every committed write's event
// arrives at least once, in order per account, and no event comes of a write that failed.
import { spawn } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { type AddressInfo, connect } from 'node:net';
import { fileURLToPath } from 'node:url';
import { type ChangeEvent, createClient, type UserAccountsClient } from '@user-accounts/client';
import { freePort } from '@user-accounts/cluster';
import { processes, type Running } from '@user-accounts/server/testing/processes';
import { mintToken } from '@user-accounts/server/tokens';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { waitUntil } from './faults/load.ts';
import { receiverOn } from './receiver.ts';
import { migratedPostgresDatabase, postgresUnavailable, TEST_HASHES } from './targets.ts';

const procs = processes();
const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
  // Each test's servers end with it: left running, they went on delivering and logging into this
  // process, and a later test on PostgreSQL ran out of time behind them (clean-clone CI, 2 cores).
  procs.cleanup();
});
afterAll(() => procs.cleanup());

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

type Receiver = Awaited<ReturnType<typeof startReceiver>>;
const startReceiver = () => receiverOn(cleanups);

/**
 * An endpoint that takes every request and never answers, as a broken receiver does: each
 * attempt holds a sending slot until its time limit. Counts the requests it holds at once.
 */
async function startHangingEndpoint() {
  const held = new Set<ServerResponse>();
  let most = 0;
  let seen = 0;
  const server = createServer((req: IncomingMessage, res: ServerResponse) => {
    req.resume();
    seen++;
    held.add(res);
    most = Math.max(most, held.size);
    res.on('close', () => held.delete(res));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(async () => {
    server.closeAllConnections();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });
  return {
    url: `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`,
    counts: () => ({ held: held.size, most, seen }),
  };
}

/** An argon2id hash made by the reference tool: an import of it costs no hashing. */
const IMPORTED_HASH = (
  JSON.parse(
    readFileSync(new URL('../../server/src/passwords/fixtures/foreign-hashes.json', import.meta.url), 'utf8'),
  ) as { format: string; hash: string }[]
).find((f) => f.format === 'argon2id')!.hash;

const tokenIn = (stdout: string) => /^ {2}(ua_[A-Za-z0-9_-]{43})$/m.exec(stdout)?.[1];

interface Ack {
  type: ChangeEvent['type'];
  subject: string;
}

/** A seeded mix of writes over a few accounts, some of them failing on purpose; returns what was acknowledged. */
async function writeMix(api: () => UserAccountsClient, count: number, seed: number, acks: Ack[], tag: string) {
  let state = seed;
  const random = () => {
    state = (state * 1_103_515_245 + 12_345) % 2 ** 31;
    return state / 2 ** 31;
  };
  const live: { id: string; email: string; disabled: boolean }[] = [];
  for (let i = 0; i < count; i++) {
    const pick = live[Math.floor(random() * live.length)];
    const roll = random();
    try {
      await writeOne(i, pick, roll);
    } catch (error) {
      if ((error as Error).name === 'AssertionError') throw error;
      // The server is down (killed): this write's outcome is unknown, it is not acknowledged, and
      // the account's state is unknown too (a disable that may have committed): leave it alone.
      if (pick !== undefined && live.includes(pick)) live.splice(live.indexOf(pick), 1);
      await sleep(100);
    }
  }
  async function writeOne(i: number, pick: (typeof live)[number] | undefined, roll: number) {
    if (pick === undefined || roll < 0.3) {
      const email = `${tag}-${seed}-${i}@example.com`;
      const { data } = await api().POST('/api/1/user/create', {
        body: { email, password: `a long passphrase ${seed} ${i}`, name: `Writer ${seed}` },
      });
      if (data === undefined) return;
      live.push({ id: data.result._userId, email, disabled: false });
      acks.push({ type: 'user.created', subject: data.result._userId });
    } else if (roll < 0.55) {
      const { response } = await api().POST('/api/1/user/update', { body: { _userId: pick.id, name: `Renamed ${i}` } });
      if (response.status === 200) acks.push({ type: 'user.updated', subject: pick.id });
    } else if (roll < 0.7) {
      const op = pick.disabled ? '/api/1/user/enable' : '/api/1/user/disable';
      const { response } = await api().POST(op, { body: { _userId: pick.id } });
      if (response.status === 200) {
        pick.disabled = !pick.disabled;
        acks.push({ type: pick.disabled ? 'user.disabled' : 'user.enabled', subject: pick.id });
      }
    } else if (roll < 0.8) {
      const { response } = await api().DELETE('/api/1/user/delete', { body: { _userId: pick.id } });
      if (response.status === 200) {
        live.splice(live.indexOf(pick), 1);
        acks.push({ type: 'user.deleted', subject: pick.id });
      }
    } else if (roll < 0.9) {
      // Failures: no event may come of them.
      const { response } = await api().POST('/api/1/user/create', {
        body: { email: pick.email, password: 'another long passphrase', name: 'Twin' },
      });
      if (response.status !== 409 && response.status < 500) expect(response.status).toBe(409);
    } else {
      const { response } = await api().POST('/api/1/user/update', {
        body: { _userId: pick.id, name: 'Stale' },
        headers: { 'If-Match': '"999999"' },
      });
      if (response.status < 500) expect(response.status).toBe(412);
    }
  }
}

/** Every event of the feed (what committed), read through the client. */
async function feedOf(api: UserAccountsClient): Promise<ChangeEvent[]> {
  const events: ChangeEvent[] = [];
  let after = '0';
  for (;;) {
    const { data, error } = await api.GET('/api/1/events', { params: { query: { after, limit: 1000 } } });
    expect(error).toBeUndefined();
    events.push(...data!.result.events);
    if (data!.result.events.length === 0) return events;
    after = data!.result.next;
  }
}

/**
 * The checks every test shares: the feed holds exactly the acknowledged writes (and, after a kill,
 * perhaps writes whose answer was lost); the receiver got every feed event at least once, each
 * verified, and each account's events first arrived in sequence order. Returns the duplicates.
 */
async function expectDelivered(
  api: UserAccountsClient,
  receiver: Receiver,
  acks: Ack[],
  options: { unacknowledgedAllowed: boolean; within: number },
) {
  const feed = await feedOf(api);
  const key = (a: Ack) => `${a.type} ${a.subject}`;
  const fed = feed.map((e) => key(e));
  const acknowledged = acks.map(key);
  if (options.unacknowledgedAllowed) {
    // Every acknowledged write committed its event (each write acknowledged once).
    const remaining = [...fed];
    for (const a of acknowledged) {
      const at = remaining.indexOf(a);
      expect(at, `an event for the acknowledged ${a}`).toBeGreaterThanOrEqual(0);
      remaining.splice(at, 1);
    }
  } else {
    expect([...fed].sort()).toEqual([...acknowledged].sort());
  }
  const deadline = Date.now() + options.within;
  const wanted = new Set(feed.map((e) => e.id));
  const got = () => new Set(receiver.received.map((r) => r.id));
  while ([...wanted].some((id) => !got().has(id)) && Date.now() < deadline) await sleep(100);
  const missing = feed.filter((e) => !got().has(e.id));
  expect(
    missing.map((e) => `${e.sequence} ${e.type}`),
    'events never delivered',
  ).toEqual([]);
  // Nothing delivered that did not commit; webhook-id is the event's id.
  for (const r of receiver.received) {
    expect(wanted.has(r.id)).toBe(true);
    expect(r.event.id).toBe(r.id);
  }
  // In order per account: each account's first receipts come in sequence order.
  const firstSeen = new Map<string, number[]>();
  const seen = new Set<string>();
  for (const r of receiver.received) {
    if (seen.has(r.id)) continue;
    seen.add(r.id);
    firstSeen.set(r.event.subject, [...(firstSeen.get(r.event.subject) ?? []), Number(r.event.sequence)]);
  }
  for (const [subject, sequences] of firstSeen) {
    expect(sequences, `events of ${subject} in order`).toEqual([...sequences].sort((a, b) => a - b));
  }
  expect(receiver.counts().refused, 'deliveries whose signature did not verify').toBe(0);
  return { events: feed.length, duplicates: receiver.received.length - seen.size };
}

interface Backend {
  name: string;
  skip: string | undefined;
  env(): Promise<Record<string, string>>;
}

const pgSkip = await postgresUnavailable();
if (pgSkip) console.warn(`\n[contract-tests] webhooks on PostgreSQL: SKIPPED, ${pgSkip}\n`);
const backends: Backend[] = [
  {
    name: 'embedded database',
    skip: undefined,
    // A copy of this run's migrated template (a server migrating its own takes seconds more).
    env: async () => {
      const dir = await procs.migratedDataDir();
      return { DATA_DIR: dir };
    },
  },
  {
    name: 'PostgreSQL',
    skip: pgSkip,
    env: async () => {
      const database = await migratedPostgresDatabase();
      cleanups.push(() => database.drop());
      return { DATABASE_URL: database.url };
    },
  },
];

/** A server process allowed to send to 127.0.0.1, a token, and an endpoint at the receiver. */
const METRICS_TOKEN = 'metrics_token_for_the_webhook_tests_0123';

async function setUp(backend: Backend, receiver: Receiver, servers = 1, more: Record<string, string> = {}) {
  const token = mintToken();
  const env = {
    ...(await backend.env()),
    ...TEST_HASHES,
    API_TOKENS: token,
    WEBHOOK_ALLOW_PRIVATE: 'true',
    METRICS_TOKEN,
    ...more,
  };
  const running: Running[] = [];
  for (let i = 0; i < servers; i++) {
    const server = procs.server(env);
    await server.ready; // one at a time: the first migrates
    running.push(server);
  }
  const added = await procs.cli(['webhook', 'add', '--site', 'default', '--url', receiver.url], env);
  expect(added.code, added.stderr).toBe(0);
  const secret = /(whsec_[A-Za-z0-9+/=]+)/.exec(added.stdout)?.[1];
  const id = /Added webhook ([0-9a-f-]{36})/.exec(added.stdout)?.[1];
  expect(secret).toBeDefined();
  receiver.setSecret(secret!);
  const client = (server: Running) => createClient({ baseUrl: server.baseUrl, token });
  return { env, token, running, client, endpointId: id! };
}

describe.each(backends)('webhooks on the $name', (backend) => {
  if (backend.skip) return void it.skip(`(skipped: ${backend.skip})`, () => {});

  it('delivers every committed write at least once, signed, in order per account, and nothing of a failed write', async () => {
    const receiver = await startReceiver();
    const { running, client } = await setUp(backend, receiver);
    const acks: Ack[] = [];
    await Promise.all([1, 2, 3].map((seed) => writeMix(() => client(running[0]!), 25, seed, acks, 'mix')));
    const { events, duplicates } = await expectDelivered(client(running[0]!), receiver, acks, {
      unacknowledgedAllowed: false,
      within: 20_000,
    });
    expect(duplicates).toBe(0);
    console.log(`[webhooks] ${backend.name}: ${acks.length} acknowledged writes, ${events} events, all delivered once`);
  }, 180_000);

  it('retries while the receiver answers 500, then delivers everything, in order per account', async () => {
    const receiver = await startReceiver();
    const { running, client, env, endpointId } = await setUp(backend, receiver);
    receiver.fail(true);
    const acks: Ack[] = [];
    await Promise.all([4, 5].map((seed) => writeMix(() => client(running[0]!), 15, seed, acks, 'retry')));
    // Until attempts were answered 500 and a delivery waits with that status (was a fixed 2.5 s).
    await waitUntil('an attempt answered 500', () => receiver.counts().failed > 0);
    const failedAttempts = receiver.counts().failed;
    expect(failedAttempts).toBeGreaterThan(0);
    let pending: { state: string; lastStatus: number | null }[] = [];
    await waitUntil('a pending delivery whose last attempt was answered 500', async () => {
      const listed = await procs.cli(['webhook', 'deliveries', endpointId, '--json'], env);
      pending = (JSON.parse(listed.stdout) as { state: string; lastStatus: number | null }[]).filter(
        (d) => d.state === 'pending',
      );
      return pending.some((d) => d.lastStatus === 500);
    });
    expect(pending.length).toBeGreaterThan(0);
    expect(pending.some((d) => d.lastStatus === 500)).toBe(true);
    receiver.fail(false);
    const { events, duplicates } = await expectDelivered(client(running[0]!), receiver, acks, {
      unacknowledgedAllowed: false,
      within: 30_000,
    });
    expect(duplicates).toBe(0); // a 500 is not a delivery: nothing twice
    console.log(
      `[webhooks] ${backend.name}: ${failedAttempts} attempts answered 500, then all ${events} events delivered`,
    );
  }, 180_000);

  it('loses nothing when the server is SIGKILLed during writes and deliveries and started again', async () => {
    const receiver = await startReceiver();
    // The killed server's deliveries in flight are sent again once their leases run out: the
    // attempt's time limit plus 5 s (15 s by default, 8 s here).
    const setup = await setUp(backend, receiver, 1, { WEBHOOK_TIMEOUT: '3' });
    let server = setup.running[0]!;
    const acks: Ack[] = [];
    const writing = Promise.all([6, 7].map((seed) => writeMix(() => setup.client(server), 60, seed, acks, 'kill')));
    // Killed once writes are acknowledged and their events are on the way (was a fixed 0.7 s).
    await waitUntil(
      'writes acknowledged and an event delivered',
      () => acks.length >= 4 && receiver.received.length > 0,
    );
    server.child.kill('SIGKILL');
    await server.exited;
    const acknowledgedAtKill = acks.length;
    server = procs.server(setup.env);
    await server.ready;
    await writing;
    // And writes to the restarted server, whose events queue behind those sent before the kill.
    await Promise.all([12, 13].map((seed) => writeMix(() => setup.client(server), 15, seed, acks, 'after')));
    const { events, duplicates } = await expectDelivered(setup.client(server), receiver, acks, {
      unacknowledgedAllowed: true,
      within: 40_000,
    });
    console.log(
      `[webhooks] ${backend.name}: killed after ${acknowledgedAtKill} acknowledged writes; ${acks.length} in all, ` +
        `${events} events, every one delivered; ${duplicates} delivered twice (after the kill)`,
    );
  }, 120_000);

  it("sends one site's webhook within seconds while another site's endpoint hangs with a backlog", async () => {
    // Issue 26, finding 5: evil's endpoint never answered, evil imported 200 accounts, and shop's
    // next event arrived after 117 s: claims took every site's deliveries oldest first, 16 at once.
    const hanging = await startHangingEndpoint();
    const receiver = await startReceiver();
    const env = { ...(await backend.env()), ...TEST_HASHES, API_TOKENS: mintToken(), WEBHOOK_ALLOW_PRIVATE: 'true' };
    const server = procs.server(env);
    await server.ready;
    const tokens: Record<string, string> = {};
    for (const site of ['evil', 'shop']) {
      const created = await procs.cli(['token', 'create', '--site', site, '--scopes', 'write', '--label', site], env);
      expect(created.code, created.stderr).toBe(0);
      tokens[site] = tokenIn(created.stdout)!;
      const url = site === 'evil' ? hanging.url : receiver.url;
      const added = await procs.cli(['webhook', 'add', '--site', site, '--url', url], env);
      expect(added.code, added.stderr).toBe(0);
      if (site === 'shop') receiver.setSecret(/(whsec_[A-Za-z0-9+/=]+)/.exec(added.stdout)![1]!);
    }
    const evil = createClient({ baseUrl: server.baseUrl, token: tokens.evil! });
    const shop = createClient({ baseUrl: server.baseUrl, token: tokens.shop! });

    const backlog = 120;
    const imported = await evil.POST('/api/1/user/import', {
      body: {
        users: Array.from({ length: backlog }, (_, i) => ({
          email: `evil-${i}@example.com`,
          name: `Evil ${i}`,
          passwordHash: IMPORTED_HASH,
        })),
      },
    });
    expect(imported.data?.result).toMatchObject({ created: backlog, failed: 0 });
    // The sender is busy with evil's deliveries, each held until its time limit (10 s).
    const busy = Date.now() + 10_000;
    while (hanging.counts().held < 4 && Date.now() < busy) await sleep(50);
    expect(hanging.counts().held).toBeGreaterThanOrEqual(4);
    await sleep(300);

    const created = await shop.POST('/api/1/user/create', {
      body: { email: 'shopper@example.com', password: 'a long passphrase for shop', name: 'Shopper' },
    });
    expect(created.response.status).toBe(201);
    const written = Date.now();
    const id = created.data!.result._userId;
    const deadline = written + 5_000;
    while (!receiver.received.some((r) => r.event.subject === id) && Date.now() < deadline) await sleep(20);
    const tookMs = Date.now() - written;
    const counts = hanging.counts();
    console.log(
      `[webhooks] ${backend.name}: shop's webhook ${tookMs} ms after its write, evil's endpoint hanging with ` +
        `${backlog} queued (${counts.seen} attempts so far, at most ${counts.most} at once)`,
    );
    expect(receiver.received.map((r) => r.event.subject)).toContain(id);
    // The bound per endpoint (WEBHOOK_ENDPOINT_CONCURRENCY, 4 by default): not the sender's 16.
    expect(counts.most).toBeLessThanOrEqual(4);
  }, 180_000);
});

describe('webhooks with two servers on one PostgreSQL database', () => {
  it.skipIf(pgSkip !== undefined)(
    'share the deliveries: every event arrives, in order per account, none twice without a failure',
    async () => {
      const receiver = await startReceiver();
      const { running, client } = await setUp(backends[1]!, receiver, 2);
      const acks: Ack[] = [];
      await Promise.all(
        [8, 9, 10, 11].map((seed, i) => writeMix(() => client(running[i % 2]!), 20, seed, acks, 'two')),
      );
      const { events, duplicates } = await expectDelivered(client(running[0]!), receiver, acks, {
        unacknowledgedAllowed: false,
        within: 20_000,
      });
      expect(duplicates).toBe(0);
      // Who sent what, from each server's own count. A server counts a delivery once the receiver's
      // answer reaches it, which can be after the receiver has counted it (a busy machine: 67 of
      // 69 at the first look, 2026-11-29): read until the counts add up, or fail.
      const sentBy = () =>
        Promise.all(
          running.map(async (server) => {
            const text = await (
              await fetch(`${server.baseUrl}/metrics`, { headers: { Authorization: `Bearer ${METRICS_TOKEN}` } })
            ).text();
            return Number(/^webhook_attempts_total\{[^}]*outcome="delivered"[^}]*\} (\d+)/m.exec(text)?.[1] ?? 0);
          }),
        );
      const total = (counts: number[]) => counts.reduce((a, b) => a + b, 0);
      await expect.poll(async () => total(await sentBy()), { timeout: 10_000 }).toBe(events);
      // Settled: read once more a moment later, so that a delivery counted twice, landing just
      // before the last one counted once, cannot pass as the right sum.
      await sleep(250);
      const sent = await sentBy();
      expect(total(sent)).toBe(events);
      console.log(
        `[webhooks] two servers: ${events} events delivered (${sent.join(' and ')} by each), ${duplicates} twice`,
      );
    },
    180_000,
  );
});

describe('the receiver in docs/events.md', () => {
  it('verifies and prints the events a server sends it, as pasted from docs/events.md', async () => {
    const readme = readFileSync(new URL('../../../docs/events.md', import.meta.url), 'utf8');
    const code = /^```js\n(\/\/ receiver\.mjs[\s\S]*?)^```$/m.exec(readme)?.[1];
    expect(code, 'a js block starting // receiver.mjs').toBeDefined();
    // Beside this package's node_modules, where standardwebhooks is installed, as it would be in the reader's project.
    const file = fileURLToPath(new URL(`../.receiver-${process.pid}.mjs`, import.meta.url));
    writeFileSync(file, code!);
    cleanups.push(async () => rmSync(file, { force: true }));
    const port = await freePort();
    const token = mintToken();
    const env = {
      DATA_DIR: await procs.migratedDataDir(),
      ...TEST_HASHES,
      API_TOKENS: token,
      WEBHOOK_ALLOW_PRIVATE: 'true',
    };
    const server = procs.server(env);
    await server.ready;
    const added = await procs.cli(['webhook', 'add', '--site', 'default', '--url', `http://127.0.0.1:${port}/`], env);
    const secret = /(whsec_[A-Za-z0-9+/=]+)/.exec(added.stdout)![1]!;
    const child = spawn(process.execPath, [file], {
      env: { PATH: process.env.PATH ?? '', WEBHOOK_SECRET: secret, PORT: String(port) },
    });
    let printed = '';
    let complained = '';
    child.stdout.on('data', (chunk: Buffer) => {
      printed += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      complained += chunk.toString();
    });
    cleanups.push(async () => void child.kill());
    // Until the receiver listens (was a fixed 500 ms: in a clean-clone run on a slow machine it was
    // not yet listening, the first deliveries failed, and their retries came after the wait below).
    const listening = Date.now() + 60_000;
    while (!(await accepts(port))) {
      expect(Date.now(), `the receiver's port accepting connections; it said: ${complained}`).toBeLessThan(listening);
      await sleep(50);
    }
    const api = createClient({ baseUrl: server.baseUrl, token });
    const ids: string[] = [];
    for (const name of ['Ada', 'Grace']) {
      const { data } = await api.POST('/api/1/user/create', {
        body: { email: `${name.toLowerCase()}.${Date.now()}@example.com`, password: 'a long passphrase here', name },
      });
      ids.push(data!.result._userId);
    }
    const deadline = Date.now() + 30_000;
    while (printed.trim().split('\n').length < 2 && Date.now() < deadline) await sleep(50);
    expect(complained).toBe('');
    // The receiver prints sequence as it arrives: 20 digits, zero-padded (the CloudEvents Sequence extension).
    expect(printed.trim().split('\n')).toEqual([
      `${'1'.padStart(20, '0')} user.created ${ids[0]}`,
      `${'2'.padStart(20, '0')} user.created ${ids[1]}`,
    ]);
    // Three processes of ours start here (the server, the CLI, the receiver): on a busy 2-core
    // machine that alone took over a minute once.
  }, 150_000);
});

/** Whether something accepts a TCP connection on 127.0.0.1:`port`. */
function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ port, host: '127.0.0.1' });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}
