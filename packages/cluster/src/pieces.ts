// The machine's own binaries (PostgreSQL, Redis, HAProxy) started as detached processes that
// outlive the command that started them: `cluster up` returns, `cluster down` (another process)
// finds them again by the pids kept in the cluster's state file.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, openSync, readdirSync, readFileSync } from 'node:fs';
import { createServer } from 'node:net';
import { userInfo } from 'node:os';
import { join } from 'node:path';

/**
 * Where a command is: on PATH, or in the system folders a user's PATH often lacks (Debian puts
 * haproxy in /usr/sbin; a test that said "no haproxy, install it" sent people to install it again).
 */
export function which(command: string, systemDirs = ['/usr/local/sbin', '/usr/sbin', '/sbin']): string | undefined {
  const path = [...(process.env.PATH ?? '').split(':').filter(Boolean), ...systemDirs].join(':');
  const found = spawnSync('sh', ['-c', 'command -v "$0"', command], {
    encoding: 'utf8',
    env: { ...process.env, PATH: path },
  });
  return found.status === 0 ? found.stdout.trim() : undefined;
}

/** PostgreSQL's server binaries (initdb, pg_basebackup, pg_ctl, postgres): PG_BIN, or Debian's newest. */
export function postgresBin(): string | undefined {
  if (process.env.PG_BIN) return process.env.PG_BIN;
  const root = '/usr/lib/postgresql';
  if (!existsSync(root)) return undefined;
  return readdirSync(root)
    .sort((a, b) => Number(b) - Number(a))
    .map((v) => join(root, v, 'bin'))
    .find((bin) => existsSync(join(bin, 'initdb')) && existsSync(join(bin, 'pg_basebackup')));
}

export interface Owner {
  /** setpriv's arguments to drop to the postgres user, or nothing when we are not root. */
  prefix: string[];
  uid?: number;
  gid?: number;
}

/** PostgreSQL refuses to run as root: as root, it runs as the `postgres` user. */
export function postgresOwner(): Owner | string {
  if (userInfo().uid !== 0) return { prefix: [] };
  const uid = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
  const gid = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
  if (uid.status !== 0) return 'running as root and there is no postgres user to run PostgreSQL as';
  if (spawnSync('setpriv', ['--version']).status !== 0)
    return 'running as root without setpriv to drop to the postgres user';
  const u = Number(uid.stdout.trim());
  const g = Number(gid.stdout.trim());
  return { prefix: ['setpriv', `--reuid=${u}`, `--regid=${g}`, '--init-groups', '--'], uid: u, gid: g };
}

export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const probe = createServer().listen(0, '127.0.0.1', () => {
      const { port } = probe.address() as { port: number };
      probe.close(() => resolve(port));
    });
    probe.on('error', reject);
  });
}

/** Starts a process in a group of its own (so a signal to -pid reaches its children), output to `log`. */
export function launch(command: string[], options: { log: string; env?: NodeJS.ProcessEnv; cwd?: string }): number {
  const out = openSync(options.log, 'a');
  const [exe, ...args] = command;
  const child = spawn(exe!, args, {
    detached: true,
    stdio: ['ignore', out, out],
    env: options.env ?? process.env,
    cwd: options.cwd,
  });
  child.unref();
  if (child.pid === undefined) throw new Error(`${exe} did not start`);
  return child.pid;
}

export function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  // A zombie (dead, not yet reaped: a PostgreSQL whose parent, Patroni, was killed, waits for an
  // init that may not reap it in a container) is gone for us.
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return true;
  }
}

/** Sends `sig` to the process's whole group; nothing when it is gone already. */
export function signalGroup(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(-pid, sig);
  } catch {}
}

/** The processes whose parent is `pid` (from /proc: PostgreSQL's backends are not in its process group). */
export function childrenOf(pid: number): number[] {
  const children: number[] = [];
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      // The field after the parenthesized command name, which may itself hold spaces: state, then ppid.
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      const ppid = Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]);
      if (ppid === pid) children.push(Number(entry));
    } catch {}
  }
  return children;
}

/**
 * A crash: SIGKILL to PostgreSQL's postmaster and every backend at once. Each backend runs in a
 * session of its own, so a signal to the postmaster's group does not reach them; one that is
 * stopped (SIGSTOP) would never notice the postmaster's death and linger.
 */
export function crashPostgres(pid: number): void {
  for (const child of childrenOf(pid)) {
    try {
      process.kill(child, 'SIGKILL');
    } catch {}
  }
  signalGroup(pid, 'SIGKILL');
  // Patroni's postmaster leads no group of its own (Patroni starts it in a new session, through a helper).
  try {
    process.kill(pid, 'SIGKILL');
  } catch {}
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Resolves true once the process is gone, false if it is still there after `ms`. */
export async function gone(pid: number, ms: number): Promise<boolean> {
  const deadline = Date.now() + ms;
  while (alive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(20);
  }
  return true;
}

/** Polls `probe` until it resolves true, or throws `what` after `ms`. */
export async function until(what: string, ms: number, probe: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + ms;
  let last: unknown;
  for (;;) {
    try {
      if (await probe()) return;
    } catch (error) {
      last = error;
    }
    if (Date.now() > deadline) {
      throw new Error(`${what} not within ${ms} ms${last === undefined ? '' : `: ${(last as Error).message}`}`);
    }
    await sleep(50);
  }
}
