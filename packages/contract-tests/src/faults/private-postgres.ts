// A PostgreSQL cluster of our own, made with the machine's initdb in a temporary folder, for the
// fault tests: they stop it, SIGKILL it and start it again, which nobody may do to a shared server.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { chownSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { crashPostgres, freePort, postgresBin, postgresOwner } from '@user-accounts/cluster';
import postgres from 'postgres';

export interface PrivatePostgres {
  url: string;
  /** A clean shutdown (fast mode: sessions are ended, nothing acknowledged is lost). */
  stop(): Promise<void>;
  /** SIGKILL to the postmaster and every backend at once: a crash. */
  kill(): Promise<void>;
  /** Starts it again on the same folder and port (crash recovery runs first after kill()). */
  start(): Promise<void>;
  /** Runs SQL on it through a connection of the test's own. */
  sql: postgres.Sql;
  remove(): Promise<void>;
}

/** Why a private cluster cannot be made here, or undefined when it can. */
export function privatePostgresUnavailable(): string | undefined {
  const bin = postgresBin();
  if (bin === undefined) return 'no PostgreSQL server binaries (initdb) found; set PG_BIN';
  const owner = postgresOwner();
  return typeof owner === 'string' ? owner : undefined;
}

export async function privatePostgres(): Promise<PrivatePostgres> {
  const bin = postgresBin()!;
  const owner = postgresOwner();
  if (typeof owner === 'string') throw new Error(owner);
  const dir = mkdtempSync(join(tmpdir(), 'ua-pg-'));
  if (owner.uid !== undefined) chownSync(dir, owner.uid, owner.gid!);
  const data = join(dir, 'data');
  const run = (cmd: string, args: string[]) => {
    const [exe, ...rest] = [...owner.prefix, join(bin, cmd), ...args];
    return spawnSync(exe!, rest, { encoding: 'utf8' });
  };
  const init = run('initdb', [
    '-D',
    data,
    '-U',
    'postgres',
    '--auth=trust',
    '-E',
    'UTF8',
    '--no-sync',
    '--no-instructions',
  ]);
  if (init.status !== 0) throw new Error(`initdb failed: ${init.stderr}`);
  const port = await freePort();
  const url = `postgres://postgres@127.0.0.1:${port}/postgres`;
  let child: ChildProcess | undefined;

  const ready = async () => {
    const deadline = Date.now() + 30_000;
    for (;;) {
      const probe = postgres(url, { max: 1, connect_timeout: 1, onnotice: () => {} });
      try {
        await probe`select 1`;
        return;
      } catch (error) {
        if (Date.now() > deadline) throw new Error(`private PostgreSQL did not start: ${(error as Error).message}`);
        await new Promise((r) => setTimeout(r, 100));
      } finally {
        await probe.end({ timeout: 1 }).catch(() => {});
      }
    }
  };
  const exited = () =>
    new Promise<void>((resolve) =>
      child === undefined || child.exitCode !== null || child.signalCode !== null
        ? resolve()
        : child.once('exit', () => resolve()),
    );

  const start = async () => {
    const [exe, ...rest] = [
      ...owner.prefix,
      join(bin, 'postgres'),
      '-D',
      data,
      '-p',
      String(port),
      '-k',
      dir,
      '-c',
      'listen_addresses=127.0.0.1',
      // Durability as in production: every commit is flushed before it is acknowledged.
      '-c',
      'fsync=on',
      '-c',
      'synchronous_commit=on',
      '-c',
      'max_connections=50',
    ];
    child = spawn(exe!, rest, { detached: true, stdio: 'ignore' });
    await ready();
  };

  await start();
  const sql = postgres(url, { max: 2, onnotice: () => {} });
  return {
    url,
    sql,
    start,
    async stop() {
      child?.kill('SIGINT');
      await exited();
    },
    async kill() {
      if (child?.pid !== undefined) crashPostgres(child.pid);
      await exited();
    },
    async remove() {
      await sql.end({ timeout: 1 }).catch(() => {});
      if (child?.pid !== undefined && child.exitCode === null && child.signalCode === null) {
        crashPostgres(child.pid);
        await exited();
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
