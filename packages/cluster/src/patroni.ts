// The database of `cluster up --ha` (issue 62): etcd (one member), three PostgreSQL nodes run by
// Patroni from deploy/patroni/pgN.yml, pgBackRest's repository for base backups and the WAL
// archive, and HAProxy's Patroni backend (deploy/patroni/haproxy.cfg) in front. Only what differs
// on one machine is replaced in the shipped files: addresses and folders, the passwords (made at
// `up`, given in Patroni's PATRONI_* variables, never on a command line), no watchdog, pg_hba for
// the loopback, and the timings (DRILL_TIMINGS, so that a drill takes seconds).
import { spawn, spawnSync } from 'node:child_process';
import { chownSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse } from 'yaml';
import { alive, crashPostgres, gone, launch, postgresBin, postgresOwner, signalGroup, until, which } from './pieces.ts';

export const STANZA = 'user-accounts';

/** Patroni's ttl / loop_wait / retry_timeout (seconds); deploy/patroni's are 30 / 10 / 10. */
export interface Timings {
  ttl: number;
  loop_wait: number;
  retry_timeout: number;
}
/** loop_wait + 2 × retry_timeout <= ttl, as Patroni asks; a leader killed is replaced in about ttl + loop_wait. */
export const DRILL_TIMINGS: Timings = { ttl: 10, loop_wait: 1, retry_timeout: 4 };

export interface HaNode {
  name: string;
  data: string;
  port: number;
  /** Patroni's REST API. */
  apiPort: number;
  /** Patroni's pid (it starts and stops PostgreSQL itself). */
  pid: number;
  config: string;
}

export interface HaState {
  timings: Timings;
  etcd: { port: number; peerPort: number; pid: number; data: string };
  nodes: HaNode[];
  /** HAProxy's postgres_primary (writes) and postgres_replicas frontends. */
  writePort: number;
  readPort: number;
  replicationPassword: string;
  rewindPassword: string;
  apiPassword: string;
  /** pgBackRest's configuration file and repository (the drill's: local disk). */
  backrest: { config: string; repo: string };
  /** Nodes made by restore(), standalone PostgreSQL (not Patroni's). */
  restored: { name: string; data: string; port: number; pid: number }[];
}

/** What Patroni's GET /cluster says of a member. */
export interface Member {
  name: string;
  role: string;
  state: string;
  host: string;
  port: number;
  timeline?: number;
  lag?: number | string;
}

/** Why the HA topology cannot run here, or undefined. */
export function haUnavailable(): string | undefined {
  for (const [command, pkg] of [
    ['patroni', 'patroni'],
    ['etcd', 'etcd-server'],
    ['pgbackrest', 'pgbackrest'],
  ] as const) {
    if (which(command) === undefined) return `no ${command} (Debian's package: apt-get install ${pkg})`;
  }
  // With the interpreter Patroni's script names (PATH's python3 may be another, without Debian's modules).
  const python = /^#!\s*(\S+)/.exec(readFileSync(which('patroni')!, 'utf8').split('\n')[0] ?? '')?.[1] ?? 'python3';
  const etcd3 = spawnSync(python, ['-c', 'import patroni.dcs.etcd, psycopg2'], { encoding: 'utf8' });
  if (etcd3.status !== 0)
    return 'Patroni cannot load its etcd or psycopg2 module (apt-get install python3-etcd python3-psycopg2)';
  return undefined;
}

function owner() {
  const found = postgresOwner();
  if (typeof found === 'string') throw new Error(found);
  return found;
}

/** A file or folder the postgres user owns (it runs Patroni, PostgreSQL and pgBackRest). */
function own(path: string): void {
  const o = owner();
  if (o.uid !== undefined) chownSync(path, o.uid, o.gid!);
}

/** deploy/patroni/<name>.yml with what differs on this machine replaced. */
/** Patroni's YAML as parsed: a tree of its sections, read and rewritten by path. */
// biome-ignore lint/suspicious/noExplicitAny: Patroni's own schema (patroni/validator.py) is not ours to restate.
export type PatroniYaml = Record<string, any>;

export function patroniConfig(deploy: string, dir: string, state: HaState, node: HaNode): PatroniYaml {
  const config = parse(readFileSync(join(deploy, 'patroni', `${node.name}.yml`), 'utf8')) as PatroniYaml;
  config.restapi.listen = `127.0.0.1:${node.apiPort}`;
  config.restapi.connect_address = `127.0.0.1:${node.apiPort}`;
  config.etcd = { hosts: `127.0.0.1:${state.etcd.port}` };
  Object.assign(config.bootstrap.dcs, state.timings);
  const parameters = config.bootstrap.dcs.postgresql.parameters as Record<string, unknown>;
  const push = (pg1Path?: string) =>
    `${which('pgbackrest')} --config=${state.backrest.config} --stanza=${STANZA}${pg1Path ? ` --pg1-path=${pg1Path}` : ''} archive-push %p`;
  parameters.archive_command = push();
  // A drill's restore needs the second write's WAL archived: the drill switches WAL itself.
  parameters.archive_timeout = 60;
  // Every connection asks a password here, the Unix socket too (any local user could open it).
  config.bootstrap.initdb = config.bootstrap.initdb.map((option: unknown) =>
    typeof option === 'object' && option !== null && 'auth-local' in option
      ? { 'auth-local': 'scram-sha-256' }
      : option,
  );
  config.bootstrap.pg_hba = [
    'local all all scram-sha-256',
    'host replication replicator 127.0.0.1/32 scram-sha-256',
    'host all all 127.0.0.1/32 scram-sha-256',
  ];
  config.postgresql.listen = `127.0.0.1:${node.port}`;
  config.postgresql.connect_address = `127.0.0.1:${node.port}`;
  config.postgresql.data_dir = node.data;
  config.postgresql.bin_dir = postgresBin();
  config.postgresql.pgpass = join(dir, `${node.name}.pgpass`);
  config.postgresql.parameters = {
    ...config.postgresql.parameters,
    unix_socket_directories: dir,
    // The nodes share one machine and one pgbackrest.conf: each names its own folder (a local
    // parameter, over the cluster-wide one of bootstrap.dcs; on three machines each node's
    // pgbackrest.conf names its pg1-path).
    archive_command: push(node.data),
  };
  // No /dev/watchdog on a developer's machine.
  config.watchdog = { mode: 'off' };
  return config;
}

/** The PATRONI_* variables that carry the passwords (Debian: /etc/patroni/env.conf). */
function patroniEnv(postgresPassword: string, state: HaState): NodeJS.ProcessEnv {
  return {
    PATH: process.env.PATH,
    PATRONI_SUPERUSER_USERNAME: 'postgres',
    PATRONI_SUPERUSER_PASSWORD: postgresPassword,
    PATRONI_REPLICATION_USERNAME: 'replicator',
    PATRONI_REPLICATION_PASSWORD: state.replicationPassword,
    PATRONI_REWIND_USERNAME: 'rewinder',
    PATRONI_REWIND_PASSWORD: state.rewindPassword,
    PATRONI_RESTAPI_USERNAME: 'patroni',
    PATRONI_RESTAPI_PASSWORD: state.apiPassword,
    // No PGPASSWORD: libpq would prefer it to the pgpass file Patroni writes for pg_basebackup
    // and pg_rewind, and their roles have passwords of their own.
  };
}

export function writeBackrestConfig(dir: string, state: HaState): void {
  for (const sub of ['', 'lock', 'log', 'spool']) {
    const path = join(dir, 'pgbackrest', sub);
    mkdirSync(path, { recursive: true });
    own(path);
  }
  mkdirSync(state.backrest.repo, { recursive: true });
  own(state.backrest.repo);
  // deploy/patroni/pgbackrest.conf with this machine's folders; the node is given per command.
  writeFileSync(
    state.backrest.config,
    [
      '[global]',
      `repo1-path=${state.backrest.repo}`,
      'repo1-retention-full=2',
      `lock-path=${join(dir, 'pgbackrest', 'lock')}`,
      `log-path=${join(dir, 'pgbackrest', 'log')}`,
      `spool-path=${join(dir, 'pgbackrest', 'spool')}`,
      'log-level-console=warn',
      'log-level-file=info',
      'start-fast=y',
      'archive-timeout=30',
      'compress-type=lz4',
      '',
      `[${STANZA}]`,
      `pg1-socket-path=${dir}`,
      '',
    ].join('\n'),
    { mode: 0o600 },
  );
  own(state.backrest.config);
}

export function startEtcd(dir: string, state: HaState): void {
  const { etcd } = state;
  mkdirSync(etcd.data, { recursive: true, mode: 0o700 });
  const peer = `http://127.0.0.1:${etcd.peerPort}`;
  const client = `http://127.0.0.1:${etcd.port}`;
  etcd.pid = launch(
    [
      which('etcd')!,
      '--name',
      'etcd1',
      '--data-dir',
      etcd.data,
      '--listen-client-urls',
      client,
      '--advertise-client-urls',
      client,
      '--listen-peer-urls',
      peer,
      '--initial-advertise-peer-urls',
      peer,
      '--initial-cluster',
      `etcd1=${peer}`,
      '--initial-cluster-state',
      'new',
      '--initial-cluster-token',
      `ua-${etcd.port}`,
      // Patroni speaks its v2 API (deploy/patroni/pg1.yml says why).
      '--enable-v2=true',
    ],
    { log: join(dir, 'logs', 'etcd.log') },
  );
}

export async function etcdHealthy(state: HaState): Promise<boolean> {
  const answer = await fetch(`http://127.0.0.1:${state.etcd.port}/health`, { signal: AbortSignal.timeout(1_000) });
  return answer.ok && ((await answer.json()) as { health?: string }).health === 'true';
}

export function startPatroni(dir: string, deploy: string, state: HaState, node: HaNode, postgresPassword: string) {
  const config = patroniConfig(deploy, dir, state, node);
  // JSON is YAML: Patroni reads it as it reads deploy/patroni's files.
  writeFileSync(node.config, `${JSON.stringify(config, null, 2)}\n`, { mode: 0o600 });
  own(node.config);
  node.pid = launch([...owner().prefix, which('patroni')!, node.config], {
    log: join(dir, 'logs', `${node.name}.log`),
    env: patroniEnv(postgresPassword, state),
    cwd: dir,
  });
}

/** GET on a node's REST API: status and JSON body (undefined body when it did not answer). */
export async function api(
  node: HaNode,
  path: string,
  ms = 1_000,
): Promise<{ status: number; body: PatroniYaml | undefined }> {
  try {
    const answer = await fetch(`http://127.0.0.1:${node.apiPort}${path}`, { signal: AbortSignal.timeout(ms) });
    const text = await answer.text();
    let body: PatroniYaml | undefined;
    try {
      body = JSON.parse(text);
    } catch {}
    return { status: answer.status, body };
  } catch {
    return { status: 0, body: undefined };
  }
}

/** The members as the first node that answers says (Patroni reads them from etcd). */
export async function members(state: HaState, skip: string[] = []): Promise<Member[] | undefined> {
  for (const node of state.nodes) {
    if (skip.includes(node.name) || !alive(node.pid)) continue;
    const { status, body } = await api(node, '/cluster');
    if (status === 200 && Array.isArray(body?.members)) return body.members as Member[];
  }
  return undefined;
}

/** The node that holds the leader key and runs as a primary (its /primary answers 200). */
export async function leader(state: HaState, skip: string[] = []): Promise<HaNode | undefined> {
  for (const node of state.nodes) {
    if (skip.includes(node.name) || !alive(node.pid)) continue;
    if ((await api(node, '/primary')).status === 200) return node;
  }
  return undefined;
}

/** The PostgreSQL postmaster's pid of a data folder (its postmaster.pid), or undefined. */
export function postmasterPid(data: string): number | undefined {
  try {
    const pid = Number(readFileSync(join(data, 'postmaster.pid'), 'utf8').split('\n')[0]);
    return Number.isInteger(pid) && pid > 0 && alive(pid) ? pid : undefined;
  } catch {
    return undefined;
  }
}

/** A crash of the whole node: SIGKILL to its Patroni and to its PostgreSQL (postmaster and backends). */
export async function crashNode(node: HaNode): Promise<void> {
  const postmaster = postmasterPid(node.data);
  signalGroup(node.pid, 'SIGKILL');
  if (postmaster !== undefined) crashPostgres(postmaster);
  await gone(node.pid, 5_000);
  if (postmaster !== undefined) await gone(postmaster, 5_000);
}

/** Stops every Patroni (each stops its PostgreSQL), then kills what is left; etcd last. */
export async function stopHa(state: HaState, isOurs: (pid: number, marker: string) => boolean): Promise<void> {
  const nodes = state.nodes.filter((n) => n.pid > 0 && isOurs(n.pid, n.config));
  for (const n of nodes) {
    signalGroup(n.pid, 'SIGCONT');
    signalGroup(n.pid, 'SIGTERM');
  }
  await Promise.all(nodes.map((n) => gone(n.pid, 8_000)));
  for (const n of state.nodes) {
    if (n.pid > 0 && isOurs(n.pid, n.config)) signalGroup(n.pid, 'SIGKILL');
    const postmaster = postmasterPid(n.data);
    if (postmaster !== undefined) crashPostgres(postmaster);
  }
  for (const r of state.restored) {
    const postmaster = postmasterPid(r.data);
    if (postmaster !== undefined) crashPostgres(postmaster);
  }
  if (state.etcd.pid > 0 && isOurs(state.etcd.pid, state.etcd.data)) {
    signalGroup(state.etcd.pid, 'SIGTERM');
    if (!(await gone(state.etcd.pid, 3_000))) signalGroup(state.etcd.pid, 'SIGKILL');
  }
  await Promise.all(state.nodes.map((n) => gone(n.pid, 5_000)));
}

/** pgBackRest as the postgres user, against `node` (the leader: where a backup is taken). */
export async function backrest(
  state: HaState,
  node: HaNode | undefined,
  args: string[],
  postgresPassword: string,
): Promise<string> {
  const command = [
    ...owner().prefix,
    which('pgbackrest')!,
    `--config=${state.backrest.config}`,
    `--stanza=${STANZA}`,
    ...(node === undefined ? [] : [`--pg1-path=${node.data}`, `--pg1-port=${node.port}`]),
    ...args,
  ];
  const done = await run(command, { PATH: process.env.PATH, PGPASSWORD: postgresPassword });
  if (done.code !== 0) throw new Error(`pgbackrest ${args.join(' ')} failed (${done.code}): ${done.err || done.out}`);
  return done.out;
}

/** A command's exit code and output, without blocking the event loop (a drill's load runs on meanwhile). */
function run(command: string[], env: NodeJS.ProcessEnv): Promise<{ code: number | null; out: string; err: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command[0]!, command.slice(1), { env });
    let out = '';
    let err = '';
    child.stdout.on('data', (chunk: Buffer) => {
      out += chunk.toString();
    });
    child.stderr.on('data', (chunk: Buffer) => {
      err += chunk.toString();
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, out, err }));
  });
}

/**
 * A fresh node from the repository, recovered to `to` (recovery_target_time) and promoted there:
 * a standalone PostgreSQL on `port`, outside Patroni, archiving off (it must not write into the
 * cluster's archive). Resolves once it accepts writes.
 */
export async function restoreNode(
  dir: string,
  state: HaState,
  options: { name: string; port: number; to: Date | undefined },
  postgresPassword: string,
  accepts: (port: number) => () => Promise<boolean>,
): Promise<{ name: string; data: string; port: number; pid: number }> {
  const data = join(dir, options.name);
  if (existsSync(data)) throw new Error(`${data} exists: a restore goes into a fresh folder`);
  mkdirSync(data, { mode: 0o700 });
  own(data);
  // pgBackRest takes PostgreSQL's form of a time (a space, an offset), not ISO 8601's T and Z.
  const time = options.to?.toISOString().replace('T', ' ').replace('Z', '+00');
  const target = time === undefined ? [] : ['--type=time', `--target=${time}`, '--target-action=promote'];
  const command = [
    ...owner().prefix,
    which('pgbackrest')!,
    `--config=${state.backrest.config}`,
    `--stanza=${STANZA}`,
    `--pg1-path=${data}`,
    '--archive-mode=off',
    ...target,
    'restore',
  ];
  const done = await run(command, { PATH: process.env.PATH, PGPASSWORD: postgresPassword });
  if (done.code !== 0) throw new Error(`pgbackrest restore failed (${done.code}): ${done.err || done.out}`);
  const restored = { name: options.name, data, port: options.port, pid: 0 };
  // The copied postgresql.conf is Patroni's for the node the backup came from: its own folder's
  // pg_hba.conf here, no synchronous standby to wait for, no archiving.
  restored.pid = launch(
    [
      ...owner().prefix,
      join(postgresBin()!, 'postgres'),
      '-D',
      data,
      '-p',
      String(options.port),
      '-k',
      dir,
      '-c',
      'listen_addresses=127.0.0.1',
      '-c',
      `hba_file=${join(data, 'pg_hba.conf')}`,
      '-c',
      `ident_file=${join(data, 'pg_ident.conf')}`,
      '-c',
      'synchronous_standby_names=',
      '-c',
      'archive_mode=off',
      '-c',
      'cluster_name=restored',
      '-c',
      'hot_standby=on',
    ],
    { log: join(dir, 'logs', `${options.name}.log`) },
  );
  state.restored.push(restored);
  await until(`the restored node ${options.name} to accept writes`, 60_000, accepts(options.port));
  return restored;
}
