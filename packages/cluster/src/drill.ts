// `./pnpmw cluster drill` (issue 62): the HA cluster under a mixed load through HAProxy, its
// leader SIGKILLed, then its next leader cut off from etcd (its Patroni SIGSTOPped), then a
// backup under load and a point-in-time restore into a fresh node. Nothing here promotes
// anything: Patroni does. Every figure is printed on a line of its own, and the drill fails
// (exit 1) when one is out of bounds (BOUNDS). Every wait polls against a deadline.
import { spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { freePort, sleep, until } from './pieces.ts';
import { type Cluster, type ClusterOptions, healthy, type Member, up } from './topology.ts';

export const BOUNDS = {
  /** Writes accepted again after the leader is lost (the issue's 30 s). */
  writesBackMs: 30_000,
  /** The old leader, started again (or woken), is a standby of the new one. */
  rejoinMs: 90_000,
};

const TOKEN = `ua_drill_${randomBytes(16).toString('hex')}`;
const REQUEST_TIMEOUT_MS = 5_000;

type Op = 'create' | 'update' | 'verify' | 'refresh' | 'get' | 'session';
interface Outcome {
  op: Op;
  startedAt: number;
  endedAt: number;
  /** 0: no answer (refused, reset, timed out). */
  status: number;
  retryAfter: boolean;
}

async function call(
  base: string,
  op: Op,
  path: string,
  body: unknown,
  log?: Outcome[],
  token = TOKEN,
  // biome-ignore lint/suspicious/noExplicitAny: the API's answers, read by the few fields the drill needs.
): Promise<{ status: number; body: any }> {
  const startedAt = Date.now();
  try {
    const answer = await fetch(`${base}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { Authorization: token, ...(body === undefined ? {} : { 'Content-Type': 'application/json' }) },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS + 3_000),
    });
    const text = await answer.text();
    let parsed: unknown;
    try {
      parsed = JSON.parse(text);
    } catch {}
    log?.push({
      op,
      startedAt,
      endedAt: Date.now(),
      status: answer.status,
      retryAfter: answer.headers.has('retry-after'),
    });
    return { status: answer.status, body: parsed };
  } catch {
    log?.push({ op, startedAt, endedAt: Date.now(), status: 0, retryAfter: false });
    return { status: 0, body: undefined };
  }
}

interface Seed {
  id: string;
  email: string;
  password: string;
}

/** What the writers were told, by account id: the basis of the check by id. */
interface Acks {
  /** Created and acknowledged (201): id → email. */
  created: Map<string, { email: string; at: number }>;
  /** Per account: the name of its last acknowledged update, and names sent since without an answer. */
  names: Map<string, { acked: string | undefined; inDoubt: string[] }>;
}

/** The load: 2 creators, 2 updaters, a verifier, a session refresher and a reader, until stopped. */
function mixedLoad(base: string, tag: string, owned: Seed[]) {
  const acks: Acks = { created: new Map(), names: new Map() };
  const log: Outcome[] = [];
  let running = true;
  let seq = 0;
  const pause = (status: number) => sleep(status === 0 || status >= 500 ? 100 : 0);
  const creator = async (w: number) => {
    while (running) {
      const email = `drill.${tag}.${w}.${seq++}@example.com`;
      const { status, body } = await call(
        base,
        'create',
        '/api/1/user/create',
        { email, password: `Drill-pass-${seq}-${w}`, name: 'Drill' },
        log,
      );
      if (status === 201) acks.created.set(body.result._userId, { email, at: Date.now() });
      await pause(status);
    }
  };
  const updater = async (w: number) => {
    const mine = owned.filter((_, i) => i % 2 === w);
    for (let i = 0; running; i++) {
      const { id } = mine[i % mine.length]!;
      const name = `${tag}.n${w}.${i}`;
      const state = acks.names.get(id) ?? { acked: undefined, inDoubt: [] };
      acks.names.set(id, state);
      const { status } = await call(base, 'update', '/api/1/user/update', { _userId: id, name }, log);
      if (status === 200) {
        state.acked = name;
        state.inDoubt = [];
      } else if (status === 0 || status >= 500) state.inDoubt.push(name);
      await pause(status);
    }
  };
  const verifier = async () => {
    for (let i = 0; running; i++) {
      const seed = owned[i % owned.length]!;
      const { status } = await call(
        base,
        'verify',
        '/api/1/user/verify',
        { email: seed.email, password: seed.password },
        log,
      );
      await pause(status);
    }
  };
  const refresher = async () => {
    let token: string | undefined;
    for (let i = 0; running; i++) {
      if (token === undefined) {
        const seed = owned[i % owned.length]!;
        const { status, body } = await call(
          base,
          'session',
          '/api/1/user/verify',
          { email: seed.email, password: seed.password, session: {} },
          log,
        );
        if (status === 200) token = body.result.session.token;
        await pause(status);
        continue;
      }
      const { status, body } = await call(base, 'refresh', '/api/1/session/refresh', { token }, log);
      if (status === 200) token = body.result.session.token;
      // A refresh whose answer was lost replaced the token: a new session then.
      else if (status === 422) token = undefined;
      await pause(status);
    }
  };
  const reader = async () => {
    for (let i = 0; running; i++) {
      const { status } = await call(
        base,
        'get',
        `/api/1/user/get?_userId=${owned[i % owned.length]!.id}`,
        undefined,
        log,
      );
      await pause(status);
    }
  };
  const workers = [creator(0), creator(1), updater(0), updater(1), verifier(), refresher(), reader()];
  return {
    acks,
    log,
    async stop() {
      running = false;
      await Promise.all(workers);
    },
  };
}

/** The acknowledged writes missing from `rows` (id → name, the node's users). */
function lostWrites(acks: Acks, rows: Map<string, string>): string[] {
  const lost: string[] = [];
  for (const [id, { email }] of acks.created) if (!rows.has(id)) lost.push(`create of ${email} (${id})`);
  for (const [id, { acked, inDoubt }] of acks.names) {
    if (acked === undefined) continue;
    const name = rows.get(id);
    if (name !== acked && !inDoubt.includes(name ?? '')) lost.push(`update of ${id} to "${acked}" (found "${name}")`);
  }
  return lost;
}

const acknowledged = (acks: Acks) =>
  acks.created.size + [...acks.names.values()].filter((s) => s.acked !== undefined).length;
const isWrite = (o: Outcome) => o.op === 'create' || o.op === 'update';
const ok = (o: Outcome) => o.status >= 200 && o.status < 300;
const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

export interface DrillOptions {
  dir: string;
  /** Where each line goes (stdout for the command). */
  print?: (line: string) => void;
  serverMain?: string;
  /** The CLI run on the restored node (`cli migrate`); absent: the one beside serverMain. */
  serverCli?: string;
  port?: number;
  /** Leave the cluster running afterwards (to read its logs; `cluster down` stops it). */
  keep?: boolean;
}

export interface DrillResult {
  /** Each figure out of bounds, said; empty: the drill passed. */
  failures: string[];
  lines: string[];
  figures: Record<string, number>;
}

export async function drill(options: DrillOptions): Promise<DrillResult> {
  const lines: string[] = [];
  const failures: string[] = [];
  const figures: Record<string, number> = {};
  const print = (line: string) => {
    lines.push(line);
    (options.print ?? console.log)(line);
  };
  const expect = (what: string, good: boolean) => {
    if (!good) failures.push(what);
  };
  const clusterOptions: ClusterOptions = {
    dir: options.dir,
    ha: true,
    ...(options.port === undefined ? {} : { port: options.port }),
    ...(options.serverMain === undefined ? {} : { serverMain: options.serverMain }),
    serverEnv: {
      API_TOKENS: TOKEN,
      RATE_LIMIT: '10000000/60s',
      RATE_LIMIT_HASH: 'off',
      REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
      HASH_CONCURRENCY: '1',
      // Sessions' signing keys are sealed with it: the same on every replica (and the restore).
      FACTOR_ENCRYPTION_KEY: `k1:${randomBytes(32).toString('base64')}`,
    },
    // The load comes from one address, as fast as it is answered (failover's 503s are fast).
    balancerEnv: { UA_SOURCE_NEW_CONNS: '10000000', UA_SOURCE_REQUESTS: '10000000' },
  };
  const startedAt = Date.now();
  const cluster = await up(clusterOptions);
  try {
    const ha = cluster.ha!;
    const base = cluster.state.url;
    print(
      `cluster up --ha in ${seconds(Date.now() - startedAt)}: etcd, pg1..pg3 under Patroni (ttl ${ha.state.timings.ttl} s, loop_wait ${ha.state.timings.loop_wait} s, retry_timeout ${ha.state.timings.retry_timeout} s), 3 replicas behind HAProxy at ${base}`,
    );
    const owned = await seed(base, 12);
    await cluster.onNode(
      (await ha.leader())!.port,
      (sql) => sql`create table ${sql(PROBE)} (node text not null, at timestamptz not null default now())`,
    );
    // Sessions issued before any failover, never refreshed: they must verify after each.
    const sessions: string[] = [];
    for (const s of owned.slice(0, 4)) {
      const { status, body } = await call(base, 'session', '/api/1/user/verify', {
        email: s.email,
        password: s.password,
        session: {},
      });
      if (status !== 200) throw new Error(`a session for ${s.email} answered ${status}`);
      sessions.push(body.result.session.token);
    }

    // 1. The leader SIGKILLed, Patroni and PostgreSQL: a machine lost.
    await failover(
      cluster,
      'kill',
      owned,
      sessions,
      print,
      expect,
      figures,
      async (name) => {
        await ha.crash(name);
        return `leader ${name} SIGKILLed (its Patroni and PostgreSQL)`;
      },
      async (name) => {
        ha.start(name);
      },
    );

    // 2. The new leader cut off from etcd: its Patroni SIGSTOPped (PostgreSQL runs on), woken later.
    await failover(
      cluster,
      'etcd-cut',
      owned,
      sessions,
      print,
      expect,
      figures,
      async (name) => {
        ha.freeze(name);
        return `leader ${name} cut off from etcd (its Patroni SIGSTOPped; its PostgreSQL runs on)`;
      },
      async (name, newLeader) => {
        // Before it wakes: a primary no one reaches, which must acknowledge no commit (synchronous mode).
        const acked = await commitsAlone(cluster, name);
        print(
          `[etcd-cut] commits acknowledged by the cut-off ${name} while ${newLeader} leads: ${acked ? 'YES' : 'none'} (a commit there waits for a synchronous standby it no longer has)`,
        );
        expect(`the cut-off leader ${name} acknowledged a commit while ${newLeader} led`, !acked);
        ha.thaw(name);
      },
    );

    // 3. A backup under load, then a point-in-time restore between two writes into a fresh node.
    await restoreDrill(cluster, owned, sessions, print, expect, figures, options.serverCli);
  } catch (error) {
    failures.push(`the drill stopped: ${(error as Error).message}`);
  } finally {
    if (options.keep)
      print(`drill: the cluster is left running in ${options.dir} (logs/); ./pnpmw cluster down stops it`);
    else await cluster.down();
  }
  print(failures.length === 0 ? 'drill: passed' : `drill: FAILED: ${failures.join('; ')}`);
  return { failures, lines, figures };
}

async function seed(base: string, n: number): Promise<Seed[]> {
  const seeds: Seed[] = [];
  for (let i = 0; i < n; i++) {
    const email = `seed.${i}.${Date.now()}@example.com`;
    const password = `Seed-password-${i}-drill`;
    const { status, body } = await call(base, 'create', '/api/1/user/create', { email, password, name: 'Seed' });
    if (status !== 201) throw new Error(`seeding account ${i} answered ${status}`);
    seeds.push({ id: body.result._userId, email, password });
  }
  return seeds;
}

async function usersOn(cluster: Cluster, port: number): Promise<Map<string, string>> {
  const rows = await cluster.onNode(port, (sql) => sql<{ id: string; name: string }[]>`select id, name from users`);
  return new Map(rows.map((r) => [String(r.id), String(r.name)]));
}

async function failover(
  cluster: Cluster,
  tag: string,
  owned: Seed[],
  sessions: string[],
  print: (line: string) => void,
  expect: (what: string, good: boolean) => void,
  figures: Record<string, number>,
  breakLeader: (name: string) => Promise<string>,
  recover: (name: string, newLeader: string) => Promise<void>,
): Promise<void> {
  const ha = cluster.ha!;
  const base = cluster.state.url;
  const old = await ha.leader();
  if (old === undefined) throw new Error('no leader before the failover');
  const load = mixedLoad(base, tag, owned);
  const loadAt = Date.now();
  await until(
    'the load to flow',
    20_000,
    async () => load.log.filter((o) => ok(o) && o.startedAt >= loadAt).length >= 30,
  );
  const what = await breakLeader(old.name);
  const brokenAt = Date.now();
  print(`[${tag}] ${what}`);
  // A new leader, elected by Patroni: its /primary answers 200.
  let next: Awaited<ReturnType<typeof ha.leader>>;
  await until('a new leader', 60_000, async () => {
    next = await ha.leader([old.name]);
    return next !== undefined;
  });
  const electedAt = Date.now();
  // Writes go to the new leader: acknowledged writes started after its election.
  await until('writes acknowledged through HAProxy again', 60_000, async () =>
    load.log.some((o) => isWrite(o) && ok(o) && o.startedAt >= electedAt),
  );
  await until(
    'the load to flow after the failover',
    20_000,
    async () => load.log.filter((o) => ok(o) && o.startedAt >= electedAt).length >= 30,
  );
  await load.stop();
  // Writes accepted again: the first acknowledged write after the last one refused before the new
  // leader took them (a leader cut off may take writes for a moment, until HAProxy drops it).
  const firstOnNew = Math.min(
    ...load.log.filter((o) => isWrite(o) && ok(o) && o.startedAt >= electedAt).map((o) => o.startedAt),
  );
  const refused = load.log.filter((o) => isWrite(o) && !ok(o) && o.startedAt >= brokenAt && o.startedAt < firstOnNew);
  const lastRefused = Math.max(brokenAt, ...refused.map((o) => o.startedAt));
  const backAt = Math.min(
    ...load.log.filter((o) => isWrite(o) && ok(o) && o.startedAt >= lastRefused).map((o) => o.endedAt),
  );

  const during = load.log.filter((o) => o.startedAt >= brokenAt && o.startedAt <= backAt);
  const s503 = during.filter((o) => o.status === 503);
  const s500 = load.log.filter((o) => o.status === 500).length;
  const others = load.log.filter((o) => !ok(o) && o.status !== 503 && o.status !== 422 && o.status !== 500);
  const rows = await usersOn(cluster, next!.port);
  const lost = lostWrites(load.acks, rows);
  const verified = await Promise.all(
    sessions.map(async (token) => (await call(base, 'session', '/api/1/session/verify', { token })).status === 200),
  );
  figures[`${tag}.newLeaderMs`] = electedAt - brokenAt;
  figures[`${tag}.writesBackMs`] = backAt - brokenAt;
  figures[`${tag}.503`] = s503.length;
  figures[`${tag}.500`] = s500;
  figures[`${tag}.lost`] = lost.length;
  print(`[${tag}] time to a new leader: ${seconds(electedAt - brokenAt)} (${next!.name}, elected by Patroni)`);
  print(`[${tag}] time to writes accepted again: ${seconds(backAt - brokenAt)}`);
  print(
    `[${tag}] 503s meanwhile: ${s503.length} of ${during.length} requests, ${s503.filter((o) => o.retryAfter).length} with Retry-After`,
  );
  print(
    `[${tag}] 500s: ${s500}; other failures: ${others.length}${others.length ? ` (${[...new Set(others.map((o) => `${o.op} ${o.status}`))].join(', ')})` : ''}`,
  );
  print(
    `[${tag}] acknowledged writes lost: ${lost.length} (of ${acknowledged(load.acks)} checked by id on ${next!.name})${lost.length ? `: ${lost.slice(0, 3).join('; ')}` : ''}`,
  );
  print(`[${tag}] sessions issued before, verifying after: ${verified.filter(Boolean).length} of ${sessions.length}`);
  expect(
    `[${tag}] writes back after ${backAt - brokenAt} ms (bound ${BOUNDS.writesBackMs})`,
    backAt - brokenAt <= BOUNDS.writesBackMs,
  );
  expect(`[${tag}] ${s500} answers were 500`, s500 === 0);
  expect(
    `[${tag}] 503s without Retry-After`,
    s503.every((o) => o.retryAfter),
  );
  expect(`[${tag}] ${lost.length} acknowledged writes lost`, lost.length === 0);
  expect(`[${tag}] sessions no longer verify`, verified.every(Boolean));

  // The old leader back: started again (or woken), it rejoins as a standby by itself.
  const recoverAt = Date.now();
  await recover(old.name, next!.name);
  let last: Member[] = [];
  try {
    last = await ha.waitMembers(
      `${old.name} to rejoin as a standby`,
      BOUNDS.rejoinMs,
      (list) => healthy(list) && list.find((m) => m.name === old.name)?.role !== 'leader',
    );
    const rejoinedMs = Date.now() - recoverAt;
    figures[`${tag}.rejoinMs`] = rejoinedMs;
    const role = last.find((m) => m.name === old.name)?.role;
    print(
      `[${tag}] old leader ${old.name} rejoined as a standby (${role}) ${seconds(rejoinedMs)} after it was ${tag === 'kill' ? 'started again' : 'woken'}`,
    );
    // It holds what the leader holds, nothing of its own.
    const leaderNow = await ha.leader();
    let same = false;
    await until(`${old.name} to hold the leader's rows`, 20_000, async () => {
      const [mine, theirs] = await Promise.all([usersOn(cluster, old.port), usersOn(cluster, leaderNow!.port)]);
      same = mine.size === theirs.size && [...theirs].every(([id, name]) => mine.get(id) === name);
      return same;
    }).catch(() => {});
    print(`[${tag}] ${old.name} holds exactly the leader's accounts: ${same ? 'yes' : 'NO'}`);
    expect(`[${tag}] ${old.name} differs from the leader after rejoining`, same);
  } catch (error) {
    print(`[${tag}] old leader ${old.name} did not rejoin: ${(error as Error).message}`);
    expect(`[${tag}] the old leader did not rejoin`, false);
  }
}

/** A table of the drill's own, for a write straight to a node (not through the service). */
const PROBE = 'drill_probe';

/** Whether `name`'s PostgreSQL, cut off, acknowledges a commit within 3 s (it must not). */
async function commitsAlone(cluster: Cluster, name: string): Promise<boolean> {
  const node = cluster.ha!.node(name);
  const postgres = (await import('postgres')).default;
  const sql = postgres(`postgres://postgres:${cluster.state.postgresPassword}@127.0.0.1:${node.port}/postgres`, {
    max: 1,
    connect_timeout: 2,
    onnotice: () => {},
  });
  try {
    // A commit that wrote WAL waits for the synchronous standby (one without WAL, such as
    // txid_current() alone, does not wait: it is no write).
    const committed = sql`insert into ${sql(PROBE)} (node) values (${name})`.then(
      () => true,
      () => false,
    );
    return await Promise.race([committed, sleep(3_000).then(() => false)]);
  } finally {
    void sql.end({ timeout: 0 }).catch(() => {});
  }
}

async function restoreDrill(
  cluster: Cluster,
  owned: Seed[],
  sessions: string[],
  print: (line: string) => void,
  expect: (what: string, good: boolean) => void,
  figures: Record<string, number>,
  serverCli: string | undefined,
): Promise<void> {
  const ha = cluster.ha!;
  const base = cluster.state.url;
  const load = mixedLoad(base, 'backup', owned);
  const backupAt = Date.now();
  const backup = ha.backup('full');
  // Under load while it starts (its checkpoint and first files); then the load stops, so that
  // the copy and its WAL's archiving do not share two cores with it for the rest.
  await Promise.race([sleep(3_000), backup.catch(() => {})]);
  await load.stop();
  const label = await backup;
  const backupMs = Date.now() - backupAt;
  figures['backup.ms'] = backupMs;
  print(
    `[restore] full backup under load: ${label} in ${seconds(backupMs)} (${load.log.filter(ok).length} requests answered during its first seconds)`,
  );
  // pgBackRest keeps a backup's stop time in whole seconds: a target in the second it stopped can
  // find no backup set (CI, 2026-12-03). The writes start in the second after the next.
  await sleep(2_000 - (Date.now() % 1_000));
  // Two writes with a moment between them, both acknowledged.
  const first = await call(base, 'create', '/api/1/user/create', {
    email: `pitr.first.${Date.now()}@example.com`,
    password: 'Pitr-first-pass-1',
    name: 'First',
  });
  await sleep(50);
  const target = new Date();
  await sleep(50);
  const second = await call(base, 'create', '/api/1/user/create', {
    email: `pitr.second.${Date.now()}@example.com`,
    password: 'Pitr-second-pass-1',
    name: 'Second',
  });
  if (first.status !== 201 || second.status !== 201)
    throw new Error(`the two writes answered ${first.status}, ${second.status}`);
  // restore() has their WAL archived first.
  const restoreAt = Date.now();
  const restored = await ha.restore({ name: 'restored', to: target });
  figures['restore.ms'] = Date.now() - restoreAt;
  const rows = await usersOn(cluster, restored.port);
  const hasFirst = rows.has(first.body.result._userId);
  const hasSecond = rows.has(second.body.result._userId);
  print(
    `[restore] point-in-time restore to ${target.toISOString()} (between two writes) into a fresh node in ${seconds(Date.now() - restoreAt)}`,
  );
  print(
    `[restore] the write before that time: ${hasFirst ? 'present' : 'MISSING'}; the write after it: ${hasSecond ? 'PRESENT' : 'absent'}`,
  );
  expect('[restore] the first write is missing', hasFirst);
  expect('[restore] the second write is there', !hasSecond);

  // The restored database as a deployment would use it: migrate (nothing to do), then logins.
  const url = `postgres://postgres:${cluster.state.postgresPassword}@127.0.0.1:${restored.port}/postgres`;
  // The CLI beside the server the replicas run (the server package's cli.ts, or a build's cli.js).
  const cli = serverCli ?? (cluster.state.serverMain ?? SERVER_MAIN).replace(/main\.(ts|js)$/, 'cli.$1');
  const env = {
    ...process.env,
    ...cluster.state.serverEnv,
    DEPLOYMENT: 'production',
    DATABASE_URL: url,
    LOG_LEVEL: 'warn',
  };
  const migrate = await run(process.execPath, [cli, 'migrate'], env);
  const noOp = migrate.code === 0 && /none new/.test(migrate.out);
  print(
    `[restore] cli migrate on it: ${noOp ? 'nothing to do' : `NOT a no-op (${migrate.code}): ${migrate.out.trim()}`}`,
  );
  expect('[restore] cli migrate was not a no-op', noOp);
  const port = await freePort();
  const server = spawn(process.execPath, [cluster.state.serverMain ?? SERVER_MAIN], {
    env: { ...env, PORT: String(port), HOST: '127.0.0.1' },
    stdio: 'ignore',
  });
  try {
    const at = `http://127.0.0.1:${port}`;
    await until('a server on the restored node', 60_000, async () => (await fetch(`${at}/readyz`)).status === 200);
    const seedAccount = owned[0]!;
    const login = await call(at, 'session', '/api/1/user/verify', {
      email: seedAccount.email,
      password: seedAccount.password,
      session: {},
    });
    const still = await Promise.all(
      sessions.map(async (token) => (await call(at, 'session', '/api/1/session/verify', { token })).status === 200),
    );
    print(
      `[restore] a login on it: ${login.status}${login.body?.result?.session ? ' with a session' : ''}; sessions issued before the backup verifying: ${still.filter(Boolean).length} of ${sessions.length}`,
    );
    expect(
      `[restore] login answered ${login.status}`,
      login.status === 200 && login.body?.result?.session !== undefined,
    );
    expect('[restore] sessions from before the backup do not verify', still.every(Boolean));
  } finally {
    server.kill('SIGTERM');
    await new Promise((r) => server.once('exit', r));
  }
}

const SERVER_MAIN = new URL('../../server/src/main.ts', import.meta.url).pathname;

function run(exe: string, args: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(exe, args, { env });
    let out = '';
    child.stdout.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.stderr.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.on('close', (code) => resolve({ code, out }));
  });
}
