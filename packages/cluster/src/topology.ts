// A deployment on one machine, from the files in deploy/: a PostgreSQL primary and a synchronous
// standby (initdb, pg_basebackup), Redis, three server replicas and HAProxy in front. The same
// code serves `./pnpmw cluster up|down|status` and the cluster tests, which also kill, restart
// and promote its parts. It is private to the user who started it: PostgreSQL asks every
// connection, TCP or its Unix socket, for a password (scram-sha-256), Redis too (requirepass);
// both are random, made at `up` and kept in the cluster's folder (0700) in state.json (0600).

import { spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import {
  appendFileSync,
  chmodSync,
  chownSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { connect } from 'node:net';
import { join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import postgres from 'postgres';
import {
  backrest,
  crashNode,
  DRILL_TIMINGS,
  etcdHealthy,
  type HaNode,
  type HaState,
  haUnavailable,
  leader,
  type Member,
  members,
  postmasterPid,
  restoreNode,
  startEtcd,
  startPatroni,
  stopHa,
  type Timings,
  writeBackrestConfig,
} from './patroni.ts';
import {
  alive,
  crashPostgres,
  freePort,
  gone,
  launch,
  type Owner,
  postgresBin,
  postgresOwner,
  signalGroup,
  sleep,
  until,
  which,
} from './pieces.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
export const DEPLOY = join(ROOT, 'deploy');
const SERVER_MAIN = join(ROOT, 'packages/server/src/main.ts');
/** haproxy.cfg names three servers: app1..app3. */
const REPLICAS = 3;
const STANDBY_NAME = 'standby1';

export interface PostgresNode {
  name: string;
  data: string;
  port: number;
  pid: number;
  role: 'primary' | 'standby' | 'down';
}

export interface ClusterState {
  dir: string;
  /** Where clients send requests: HAProxy. */
  url: string;
  token: string;
  /**
   * The replicas' METRICS_TOKEN (`GET /metrics` is 404 without one): what `up` prints with each
   * replica's address (issue 64: the address it advertised answered 404). Absent in a state.json
   * written before it.
   */
  metricsToken?: string;
  synchronous: boolean;
  /** With the password of PostgreSQL's `postgres` role, and Redis's: what the replicas are given. */
  databaseUrl: string;
  redisUrl: string;
  postgresPassword: string;
  redisPassword: string;
  postgres: PostgresNode[];
  redis: { port: number; pid: number };
  /** internalPort: haproxy.cfg's UA_INTERNAL_BIND (/metrics, /console, /docs). */
  haproxy: { port: number; internalPort: number; pid: number; admin: string };
  replicas: { name: string; port: number; pid: number }[];
  /** Variables given to every replica on top of deploy/user-accounts.env. */
  serverEnv: Record<string, string>;
  /** Variables haproxy.cfg reads (UA_SOURCE_*), over its defaults. */
  balancerEnv?: Record<string, string>;
  /** What the replicas run (ClusterOptions.serverMain); absent: src/main.ts. */
  serverMain?: string;
  /** `--ha`: Patroni, etcd and pgBackRest (patroni.ts); `postgres` is then empty. */
  ha?: HaState;
}

export interface ClusterOptions {
  /** Everything lives here: data folders, logs, state.json. Removed by down(). */
  dir: string;
  /** HAProxy's port; 0: a free one. */
  port?: number;
  /** false: asynchronous replication (to show what a synchronous standby is for). */
  synchronous?: boolean;
  serverEnv?: Record<string, string>;
  /**
   * haproxy.cfg's per-address limits (UA_SOURCE_CONNECTIONS, UA_SOURCE_NEW_CONNS,
   * UA_SOURCE_REQUESTS) for this cluster: a load generator on one address is no attacker.
   */
  balancerEnv?: Record<string, string>;
  /** The server's entry point the replicas run: src/main.ts by default, or a build's main.js. */
  serverMain?: string;
  /**
   * Three PostgreSQL nodes under Patroni (etcd, synchronous_mode, HAProxy by Patroni's REST API,
   * pgBackRest) instead of a primary and a standby; the timings over DRILL_TIMINGS.
   */
  ha?: boolean | Partial<Timings>;
}

/** Why the topology cannot be started on this machine, or undefined when it can. */
export function clusterUnavailable(): string | undefined {
  if (postgresBin() === undefined) return 'no PostgreSQL server binaries (initdb, pg_basebackup); set PG_BIN';
  const owner = postgresOwner();
  if (typeof owner === 'string') return owner;
  if (which('redis-server') === undefined) return 'no redis-server';
  if (which('haproxy') === undefined) return "no haproxy (Debian's package: apt-get install haproxy)";
  return undefined;
}

/** Why `up({ ha: true })` cannot run here (Patroni, etcd, pgBackRest), or undefined. */
export function haClusterUnavailable(): string | undefined {
  return clusterUnavailable() ?? haUnavailable();
}

/** deploy/user-accounts.env: the settings a replica runs with. */
export function deployEnv(): Record<string, string> {
  const env: Record<string, string> = {};
  for (const line of readFileSync(join(DEPLOY, 'user-accounts.env'), 'utf8').split('\n')) {
    const match = /^([A-Z_][A-Z0-9_]*)=(.*)$/.exec(line.trim());
    if (match) env[match[1]!] = match[2]!;
  }
  return env;
}

function owner(): Owner {
  const found = postgresOwner();
  if (typeof found === 'string') throw new Error(found);
  return found;
}

function pgRun(tool: string, args: string[], env: NodeJS.ProcessEnv = process.env): void {
  const [exe, ...rest] = [...owner().prefix, join(postgresBin()!, tool), ...args];
  const done = spawnSync(exe!, rest, { encoding: 'utf8', env });
  if (done.status === 0) return;
  const output = done.stderr || done.stdout;
  const hint = /Permission denied/.test(output)
    ? ' (PostgreSQL runs as the postgres user: put CLUSTER_DIR in a folder it can enter, such as /tmp/ua-cluster)'
    : '';
  throw new Error(`${tool} failed: ${output}${hint}`);
}

/** A password for a URL as it is (base64url: nothing to encode), and never on a command line. */
const secret = () => randomBytes(24).toString('base64url');

/** Runs one query on one node, on a connection of its own. */
async function onNode<T>(state: ClusterState, port: number, query: (sql: postgres.Sql) => Promise<T>): Promise<T> {
  const url = `postgres://postgres:${state.postgresPassword}@127.0.0.1:${port}/postgres`;
  const sql = postgres(url, { max: 1, connect_timeout: 2, onnotice: () => {} });
  try {
    return await query(sql);
  } finally {
    await sql.end({ timeout: 1 }).catch(() => {});
  }
}

export interface Cluster {
  state: ClusterState;
  /** HAProxy's `show stat`: a row per frontend, backend and server, by proxy/name (api/FRONTEND, replicas/app1). */
  balancerStats(): Promise<Map<string, Record<string, string>>>;
  /** HAProxy's view of each replica: app1 → UP, DOWN, MAINT, … */
  balancerStatus(): Promise<Record<string, string>>;
  waitBalancer(name: string, status: 'UP' | 'DOWN', ms?: number): Promise<void>;
  /** SIGTERM, and resolves once it has exited. */
  stopReplica(i: number): Promise<void>;
  killReplica(i: number): Promise<void>;
  /** Starts it again on its port; resolves when it is ready. */
  startReplica(i: number): Promise<void>;
  /** Runs one query on the node listening on `port`, on a connection of its own. */
  onNode<T>(port: number, query: (sql: postgres.Sql) => Promise<T>): Promise<T>;
  primary(): PostgresNode;
  standby(): PostgresNode | undefined;
  killPrimary(): Promise<void>;
  /** `pg_ctl promote` on the standby, standing in for the orchestrator; resolves once it accepts writes. */
  promoteStandby(): Promise<void>;
  /**
   * SIGSTOP to the primary's WAL sender: the standby falls behind (a slow link, standing in). On
   * the primary's side, so that no WAL already sent waits in a socket buffer to be applied later.
   */
  pauseReplication(): Promise<void>;
  stopRedis(): Promise<void>;
  startRedis(): Promise<void>;
  /** Stops everything and removes the folder. */
  down(): Promise<void>;
  /** `--ha`'s Patroni cluster; undefined without --ha. */
  ha?: HaControl;
}

export interface HaControl {
  state: HaState;
  /** Patroni's view (GET /cluster of the first node that answers), without the nodes in `skip`. */
  members(skip?: string[]): Promise<Member[] | undefined>;
  /** The node whose /primary answers 200 (holds the leader key and runs as a primary). */
  leader(skip?: string[]): Promise<HaNode | undefined>;
  node(name: string): HaNode;
  /** SIGKILL to the node's Patroni and its PostgreSQL: a machine lost. */
  crash(name: string): Promise<void>;
  /** SIGSTOP to its Patroni: it neither renews the leader key nor answers HAProxy (PostgreSQL runs on). */
  freeze(name: string): void;
  thaw(name: string): void;
  /** Its Patroni again (after crash): it finds its data and rejoins as Patroni decides. */
  start(name: string): void;
  /** Polls members() until `check` holds. */
  waitMembers(what: string, ms: number, check: (members: Member[]) => boolean): Promise<Member[]>;
  /** A pgBackRest backup of the leader; resolves with its label. */
  backup(type?: 'full' | 'incr'): Promise<string>;
  /** A fresh node from the repository, recovered to `to` (or the end of the archive), promoted. */
  restore(options: { name: string; to?: Date }): Promise<{ name: string; data: string; port: number; pid: number }>;
}

const stateFile = (dir: string) => join(dir, 'state.json');

/** The cluster whose state is kept in `dir`, started earlier (by this process or another). */
export function attach(dir: string): Cluster | undefined {
  const file = stateFile(resolve(dir));
  if (!existsSync(file)) return undefined;
  return control(JSON.parse(readFileSync(file, 'utf8')) as ClusterState);
}

export async function up(options: ClusterOptions): Promise<Cluster> {
  const dir = resolve(options.dir);
  if (attach(dir) !== undefined) throw new Error(`a cluster is already kept in ${dir}: run down first`);
  const why = options.ha ? haClusterUnavailable() : clusterUnavailable();
  if (why !== undefined) throw new Error(why);
  mkdirSync(join(dir, 'logs'), { recursive: true });
  // Its passwords, logs and PostgreSQL's socket: no other user enters.
  chmodSync(dir, 0o700);
  const own = owner();
  if (own.uid !== undefined) chownSync(dir, own.uid, own.gid!);
  const [pg1, pg2, redisPort, internalPort, haproxyPort, ...appPorts] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    freePort(),
    options.port ? Promise.resolve(options.port) : freePort(),
    ...Array.from({ length: REPLICAS }, () => freePort()),
  ]);
  const synchronous = options.synchronous ?? true;
  const [postgresPassword, redisPassword] = [secret(), secret()];
  const ha = options.ha ? await haState(dir, options.ha) : undefined;
  const state: ClusterState = {
    dir,
    url: `http://127.0.0.1:${haproxyPort}`,
    token: `ua_cluster_${randomBytes(16).toString('hex')}`,
    metricsToken: `ua_metrics_${randomBytes(16).toString('hex')}`,
    synchronous,
    // HA: HAProxy's postgres_primary, which follows Patroni's leader. Else both hosts: the server
    // finds whichever accepts writes (postgres.js tries them in turn).
    databaseUrl:
      ha === undefined
        ? `postgres://postgres:${postgresPassword}@127.0.0.1:${pg1},127.0.0.1:${pg2}/postgres?target_session_attrs=read-write`
        : `postgres://postgres:${postgresPassword}@127.0.0.1:${ha.writePort}/postgres`,
    redisUrl: `redis://:${redisPassword}@127.0.0.1:${redisPort}`,
    postgresPassword,
    redisPassword,
    postgres:
      ha === undefined
        ? [
            { name: 'pg1', data: join(dir, 'pg1'), port: pg1!, pid: 0, role: 'primary' },
            { name: 'pg2', data: join(dir, 'pg2'), port: pg2!, pid: 0, role: 'standby' },
          ]
        : [],
    redis: { port: redisPort!, pid: 0 },
    haproxy: { port: haproxyPort!, internalPort: internalPort!, pid: 0, admin: join(dir, 'haproxy.sock') },
    replicas: appPorts.map((port, i) => ({ name: `app${i + 1}`, port, pid: 0 })),
    serverEnv: options.serverEnv ?? {},
    balancerEnv: options.balancerEnv ?? {},
    ...(options.serverMain === undefined ? {} : { serverMain: options.serverMain }),
    ...(ha === undefined ? {} : { ha }),
  };
  const cluster = control(state);
  try {
    if (state.ha === undefined) {
      await startDatabases(state);
      await cluster.startRedis();
      await Promise.all(state.replicas.map((_, i) => cluster.startReplica(i)));
      startBalancer(state);
    } else {
      // The replicas reach the database through HAProxy: it starts first.
      await Promise.all([startHa(state, postgresPassword), cluster.startRedis()]);
      startBalancer(state);
      save(state);
      await until('HAProxy to route to the leader', 30_000, accepts(state, state.ha.writePort));
      await Promise.all(state.replicas.map((_, i) => cluster.startReplica(i)));
    }
    save(state);
    // 30 s, not 10: beside a busy test run HAProxy's checks (every 500 ms, rise 2) come late, and
    // this was the shortest wait of `up` when it exited 1 in a clean-clone run (stop 68's CI; the
    // run kept no more of its output).
    await Promise.all(state.replicas.map((r) => cluster.waitBalancer(r.name, 'UP', 30_000)));
  } catch (error) {
    // The folder goes with down(): what its logs ended with is the explanation.
    const tails = readdirSync(join(dir, 'logs')).map(
      (f) =>
        `--- logs/${f}\n${readFileSync(join(dir, 'logs', f), 'utf8')
          .split('\n')
          .slice(-15)
          .join('\n')}`,
    );
    await cluster.down();
    throw new Error(`${(error as Error).message}\n${tails.join('\n')}`);
  }
  return cluster;
}

/** The HA state: ports and folders, before anything starts. */
async function haState(dir: string, ha: true | Partial<Timings>): Promise<HaState> {
  const ports = await Promise.all(Array.from({ length: 10 }, () => freePort()));
  const [etcdPort, peerPort, writePort, readPort, ...nodePorts] = ports as number[];
  return {
    timings: { ...DRILL_TIMINGS, ...(ha === true ? {} : ha) },
    etcd: { port: etcdPort!, peerPort: peerPort!, pid: 0, data: join(dir, 'etcd') },
    nodes: [1, 2, 3].map((n, i) => ({
      name: `pg${n}`,
      data: join(dir, `pg${n}`),
      port: nodePorts[2 * i]!,
      apiPort: nodePorts[2 * i + 1]!,
      pid: 0,
      config: join(dir, `patroni-pg${n}.yml`),
    })),
    writePort: writePort!,
    readPort: readPort!,
    replicationPassword: secret(),
    rewindPassword: secret(),
    apiPassword: secret(),
    backrest: { config: join(dir, 'pgbackrest.conf'), repo: join(dir, 'backups') },
    restored: [],
  };
}

/** The three nodes are up: a leader, a synchronous standby and a replica, all running. */
export const healthy = (list: Member[]) =>
  list.length === 3 &&
  list.every((m) => m.state === 'running' || m.state === 'streaming') &&
  list.filter((m) => m.role === 'leader').length === 1 &&
  list.some((m) => m.role === 'sync_standby');

async function startHa(state: ClusterState, postgresPassword: string): Promise<void> {
  const ha = state.ha!;
  writeBackrestConfig(state.dir, ha);
  startEtcd(state.dir, ha);
  save(state);
  await until('etcd to answer', 20_000, () => etcdHealthy(ha));
  // All three at once: one wins the initialize key and bootstraps, the others copy it.
  for (const node of ha.nodes) startPatroni(state.dir, DEPLOY, ha, node, postgresPassword);
  save(state);
  await until('Patroni to run a leader, a synchronous standby and a replica', 120_000, async () => {
    for (const node of ha.nodes) {
      if (!alive(node.pid)) throw new Error(`Patroni ${node.name} exited; see logs/${node.name}.log`);
    }
    const list = await members(ha);
    return list !== undefined && healthy(list);
  });
  const first = await leader(ha);
  if (first === undefined) throw new Error('no leader');
  await backrest(ha, first, ['stanza-create'], postgresPassword);
}

function save(state: ClusterState): void {
  writeFileSync(stateFile(state.dir), `${JSON.stringify(state, null, 2)}\n`, { mode: 0o600 });
}

function startPostgres(state: ClusterState, node: PostgresNode, extra: string[] = []): void {
  node.pid = launch(
    [
      ...owner().prefix,
      join(postgresBin()!, 'postgres'),
      '-D',
      node.data,
      '-p',
      String(node.port),
      '-k',
      state.dir,
      '-c',
      'listen_addresses=127.0.0.1',
      ...extra,
    ],
    { log: join(state.dir, 'logs', `${node.name}.log`) },
  );
}

const accepts = (state: ClusterState, port: number) => () =>
  onNode(state, port, async (sql) => (await sql`select 1`).length === 1);

async function startDatabases(state: ClusterState): Promise<void> {
  const [primary, standby] = state.postgres as [PostgresNode, PostgresNode];
  // The password reaches initdb in a file only the postgres user reads, there for that moment.
  const pwfile = join(state.dir, 'pwfile');
  writeFileSync(pwfile, `${state.postgresPassword}\n`, { mode: 0o600 });
  const own = owner();
  if (own.uid !== undefined) chownSync(pwfile, own.uid, own.gid!);
  try {
    // scram-sha-256 for every connection, local (the Unix socket) and TCP, replication too.
    pgRun('initdb', [
      '-D',
      primary.data,
      '-U',
      'postgres',
      '--auth=scram-sha-256',
      `--pwfile=${pwfile}`,
      '-E',
      'UTF8',
      '--no-instructions',
    ]);
  } finally {
    rmSync(pwfile, { force: true });
  }
  include(primary.data, 'primary.conf');
  // The asynchronous variant differs in this one setting only.
  startPostgres(state, primary, state.synchronous ? [] : ['-c', 'synchronous_standby_names=']);
  save(state);
  await until('the primary to accept connections', 30_000, accepts(state, primary.port));
  // In its environment, which only its user reads; -R keeps it in the standby's primary_conninfo.
  pgRun(
    'pg_basebackup',
    ['-h', '127.0.0.1', '-p', String(primary.port), '-U', 'postgres', '-D', standby.data, '-R', '-X', 'stream'],
    { ...process.env, PGPASSWORD: state.postgresPassword },
  );
  include(standby.data, 'standby.conf');
  startPostgres(state, standby);
  save(state);
  await until('the standby to stream from the primary', 30_000, () =>
    onNode(state, primary.port, async (sql) => {
      const rows = await sql`select sync_state from pg_stat_replication where application_name = ${STANDBY_NAME}`;
      return rows[0]?.sync_state === (state.synchronous ? 'sync' : 'async');
    }),
  );
}

/** Appends a deploy/postgresql file to the node's postgresql.conf (the postgres user may not read deploy/). */
function include(data: string, file: string): void {
  const text = readFileSync(join(DEPLOY, 'postgresql', file), 'utf8');
  appendFileSync(join(data, 'postgresql.conf'), `\n# ---- deploy/postgresql/${file}\n${text}`);
}

function startBalancer(state: ClusterState): void {
  const env: NodeJS.ProcessEnv = {
    ...state.balancerEnv,
    PATH: process.env.PATH,
    UA_BIND: `127.0.0.1:${state.haproxy.port}`,
    UA_INTERNAL_BIND: `127.0.0.1:${state.haproxy.internalPort}`,
    UA_ADMIN_SOCKET: state.haproxy.admin,
    // As whoever runs the cluster (a developer, not root): no user, group or chroot.
    UA_RUN_AS_INVOKER: '1',
  };
  state.replicas.forEach((r, i) => {
    env[`UA_APP${i + 1}`] = `127.0.0.1:${r.port}`;
  });
  const files = ['-f', join(DEPLOY, 'haproxy.cfg')];
  if (state.ha !== undefined) {
    // deploy/patroni/haproxy.cfg: the Patroni backend, in the same process.
    files.push('-f', join(DEPLOY, 'patroni', 'haproxy.cfg'));
    env.UA_PG_BIND = `127.0.0.1:${state.ha.writePort}`;
    env.UA_PG_REPLICAS_BIND = `127.0.0.1:${state.ha.readPort}`;
    state.ha.nodes.forEach((n, i) => {
      env[`UA_PG${i + 1}`] = `127.0.0.1:${n.port}`;
      env[`UA_PG${i + 1}_API`] = String(n.apiPort);
    });
  }
  // -db: in the foreground (no daemon), so that its pid is the one we keep.
  state.haproxy.pid = launch([which('haproxy')!, '-db', ...files], {
    log: join(state.dir, 'logs', 'haproxy.log'),
    env,
  });
}

function adminCommand(socket: string, command: string): Promise<string> {
  return new Promise((resolvePromise, reject) => {
    const client = connect(socket);
    let out = '';
    client.on('connect', () => client.end(`${command}\n`));
    client.on('data', (chunk) => {
      out += chunk.toString();
    });
    client.on('end', () => resolvePromise(out));
    client.on('error', reject);
  });
}

function control(state: ClusterState): Cluster {
  const replicaEnv = (port: number, name: string): NodeJS.ProcessEnv => ({
    PATH: process.env.PATH,
    ...deployEnv(),
    PORT: String(port),
    // Each series of its /metrics says which replica it is (all three share this host's name).
    REPLICA_NAME: name,
    DATABASE_URL: state.databaseUrl,
    REDIS_URL: state.redisUrl,
    API_TOKENS: state.token,
    ...(state.metricsToken !== undefined && { METRICS_TOKEN: state.metricsToken }),
    LOG_LEVEL: 'info',
    ...state.serverEnv,
  });
  const ready = (port: number) => async () => (await fetch(`http://127.0.0.1:${port}/readyz`)).status === 200;
  const node = (role: PostgresNode['role']) => state.postgres.find((n) => n.role === role);

  const cluster: Cluster = {
    state,
    ...(state.ha === undefined ? {} : { ha: haControl(state, state.ha) }),
    onNode: (port, query) => onNode(state, port, query),
    async balancerStats() {
      const csv = await adminCommand(state.haproxy.admin, 'show stat');
      const [header = '', ...lines] = csv.trim().split('\n');
      const columns = header.replace(/^# /, '').split(',');
      const rows = new Map<string, Record<string, string>>();
      for (const line of lines) {
        const cells = line.split(',');
        const row = Object.fromEntries(columns.map((column, i) => [column, cells[i] ?? '']));
        rows.set(`${row.pxname}/${row.svname}`, row);
      }
      return rows;
    },
    async balancerStatus() {
      const result: Record<string, string> = {};
      for (const row of (await cluster.balancerStats()).values()) {
        if (row.pxname === 'replicas' && row.svname !== 'BACKEND') result[row.svname!] = row.status!;
      }
      return result;
    },
    async waitBalancer(name, status, ms = 10_000) {
      await until(
        `HAProxy to mark ${name} ${status}`,
        ms,
        async () => (await cluster.balancerStatus())[name]?.startsWith(status) === true,
      );
    },
    async stopReplica(i) {
      const replica = state.replicas[i]!;
      signalGroup(replica.pid, 'SIGTERM');
      if (!(await gone(replica.pid, 30_000))) signalGroup(replica.pid, 'SIGKILL');
    },
    async killReplica(i) {
      const replica = state.replicas[i]!;
      signalGroup(replica.pid, 'SIGKILL');
      await gone(replica.pid, 5_000);
    },
    async startReplica(i) {
      const replica = state.replicas[i]!;
      replica.pid = launch([process.execPath, '--max-semi-space-size=16', state.serverMain ?? SERVER_MAIN], {
        log: join(state.dir, 'logs', `${replica.name}.log`),
        env: replicaEnv(replica.port, replica.name),
        cwd: state.dir,
      });
      save(state);
      await until(`${replica.name} to be ready`, 60_000, async () => {
        if (!alive(replica.pid)) throw new Error(`${replica.name} exited; see ${state.dir}/logs/${replica.name}.log`);
        return ready(replica.port)();
      });
    },
    primary: () => node('primary')!,
    standby: () => node('standby'),
    async killPrimary() {
      const primary = cluster.primary();
      crashPostgres(primary.pid);
      await gone(primary.pid, 5_000);
      primary.role = 'down';
      save(state);
    },
    async promoteStandby() {
      const standby = cluster.standby();
      if (standby === undefined) throw new Error('there is no standby to promote');
      pgRun('pg_ctl', ['promote', '-w', '-D', standby.data]);
      standby.role = 'primary';
      save(state);
      await until('the promoted standby to accept writes', 30_000, () =>
        onNode(state, standby.port, async (sql) => (await sql`select pg_is_in_recovery() as r`)[0]?.r === false),
      );
    },
    async pauseReplication() {
      const [row] = await onNode(state, cluster.primary().port, (sql) => sql`select pid from pg_stat_replication`);
      if (row === undefined) throw new Error('the primary has no WAL sender');
      process.kill(Number(row.pid), 'SIGSTOP');
    },
    async stopRedis() {
      signalGroup(state.redis.pid, 'SIGKILL');
      await gone(state.redis.pid, 5_000);
    },
    async startRedis() {
      // The password in a file of the folder, not on the command line that every user can read.
      const config = join(state.dir, 'redis.conf');
      writeFileSync(config, `requirepass ${state.redisPassword}\n`, { mode: 0o600 });
      state.redis.pid = launch(
        [
          which('redis-server')!,
          config,
          '--port',
          String(state.redis.port),
          '--bind',
          '127.0.0.1',
          '--save',
          '',
          '--appendonly',
          'no',
          '--dir',
          state.dir,
        ],
        { log: join(state.dir, 'logs', 'redis.log') },
      );
      save(state);
      await until('Redis to answer', 10_000, () => pingRedis(state.redis.port, state.redisPassword));
    },
    async down() {
      // Only processes that are still what we started: after a reboot, a kept pid may be anyone's.
      const started: [number, string][] = [
        [state.haproxy.pid, 'haproxy.cfg'],
        ...state.replicas.map((r): [number, string] => [r.pid, state.serverMain ?? SERVER_MAIN]),
        [state.redis.pid, 'redis-server'],
        ...state.postgres.map((n): [number, string] => [n.pid, n.data]),
      ];
      const pids = started.filter(([pid, marker]) => pid > 0 && commandLine(pid).includes(marker)).map(([pid]) => pid);
      // SIGTERM (replicas drain), SIGINT to PostgreSQL (a fast shutdown); a second later, what is left is killed.
      for (const pid of pids) signalGroup(pid, state.postgres.some((n) => n.pid === pid) ? 'SIGINT' : 'SIGTERM');
      await Promise.all(pids.map((pid) => gone(pid, 1_000)));
      for (const pid of pids) {
        if (state.postgres.some((n) => n.pid === pid)) crashPostgres(pid);
        else signalGroup(pid, 'SIGKILL');
      }
      await Promise.all(pids.map((pid) => gone(pid, 5_000)));
      if (state.ha !== undefined) await stopHa(state.ha, (pid, marker) => commandLine(pid).includes(marker));
      rmSync(state.dir, { recursive: true, force: true });
    },
  };
  return cluster;
}

function haControl(state: ClusterState, ha: HaState): HaControl {
  const node = (name: string) => {
    const found = ha.nodes.find((n) => n.name === name);
    if (found === undefined) throw new Error(`no node ${name}`);
    return found;
  };
  const control: HaControl = {
    state: ha,
    members: (skip) => members(ha, skip),
    leader: (skip) => leader(ha, skip),
    node,
    async crash(name) {
      await crashNode(node(name));
    },
    freeze(name) {
      process.kill(node(name).pid, 'SIGSTOP');
    },
    thaw(name) {
      process.kill(node(name).pid, 'SIGCONT');
    },
    start(name) {
      const n = node(name);
      if (alive(n.pid) || postmasterPid(n.data) !== undefined) throw new Error(`${name} is still running`);
      startPatroni(state.dir, DEPLOY, ha, n, state.postgresPassword);
      save(state);
    },
    async waitMembers(what, ms, check) {
      let last: Member[] = [];
      await until(what, ms, async () => {
        last = (await members(ha)) ?? [];
        return check(last);
      });
      return last;
    },
    async backup(type = 'full') {
      const at = await leader(ha);
      if (at === undefined) throw new Error('no leader to back up');
      await backrest(ha, at, [`--type=${type}`, 'backup'], state.postgresPassword);
      const info = JSON.parse(await backrest(ha, undefined, ['--output=json', 'info'], state.postgresPassword)) as {
        backup: { label: string }[];
      }[];
      return info[0]!.backup.at(-1)!.label;
    },
    async restore({ name, to }) {
      // The WAL up to now in the archive: a new segment begun, and the last one archived (else a
      // recent target is past the archive's end, and recovery stops short of it).
      const at = await leader(ha);
      if (at !== undefined) {
        // A commit after the target: recovery stops at the first commit past it, and fails when
        // the archive ends before one (an idle database restored to "now").
        await onNode(state, at.port, (sql) => sql`select txid_current()`);
        const [switched] = await onNode(
          state,
          at.port,
          (sql) => sql<{ wal: string }[]>`select pg_walfile_name(pg_switch_wal()) as wal`,
        );
        await until(`${switched!.wal} archived`, 60_000, async () => {
          const [row] = await onNode(
            state,
            at.port,
            (sql) => sql<{ last: string | null }[]>`select last_archived_wal as last from pg_stat_archiver`,
          );
          return row?.last != null && row.last >= switched!.wal;
        });
      }
      const restored = await restoreNode(
        state.dir,
        ha,
        { name, port: await freePort(), to },
        state.postgresPassword,
        (port) => () =>
          onNode(state, port, async (sql) => (await sql`select pg_is_in_recovery() as r`)[0]?.r === false),
      );
      save(state);
      return restored;
    },
  };
  return control;
}

/** A process's command line, '' when it is gone. */
function commandLine(pid: number): string {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
}

function pingRedis(port: number, password: string): Promise<boolean> {
  return new Promise((resolvePromise) => {
    const client = connect(port, '127.0.0.1');
    let reply = '';
    client.on('connect', () => client.write(`AUTH ${password}\r\nPING\r\n`));
    client.on('data', (chunk) => {
      reply += chunk.toString();
      if (!reply.startsWith('+OK\r\n') || reply.includes('\r\n+PONG')) {
        resolvePromise(reply.startsWith('+OK\r\n+PONG'));
        client.destroy();
      }
    });
    client.on('error', () => resolvePromise(false));
  });
}

export type { HaNode, HaState, Member, Timings } from './patroni.ts';
export { DRILL_TIMINGS } from './patroni.ts';
export { alive, crashPostgres, freePort, postgresBin, postgresOwner, sleep };
