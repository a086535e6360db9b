// `./pnpmw exec node packages/bench/src/cpu-per-request.ts [--requests N] [--prof DIR]`: the
// server's own CPU time per get-by-id (user + system, read from /proc), ours against the floor
// (floor.ts), on PostgreSQL. Throughput on a 2-core machine moves with whatever else runs on it;
// the CPU a request costs the server process moves far less, so this is the figure to compare
// before and after a change to the read path while the machine is busy (issue 33). `--prof DIR`
// also writes a V8 CPU profile of each server (`--cpu-prof`) into DIR. Not part of `pnpm test`.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { type AddressInfo, createServer } from 'node:net';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { openPostgres } from '@user-accounts/server/db';
import autocannon from 'autocannon';
import postgres from 'postgres';
import { SERVER_NODE_FLAGS } from './params.ts';
import { cpuMs } from './proc.ts';

const { values } = parseArgs({
  options: { requests: { type: 'string', default: '20000' }, prof: { type: 'string' } },
});
const REQUESTS = Number(values.requests);
const BASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const TOKEN = 'ua_bench_token_0123456789abcdef0123456789';
const BUILD = fileURLToPath(new URL('../../server/build.ts', import.meta.url));
const MAIN = fileURLToPath(new URL('../../server/dist/main.js', import.meta.url));
const FLOOR = fileURLToPath(new URL('./floor.ts', import.meta.url));

/** A port nobody listens on now, for the next server. */
async function freePort(): Promise<number> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function start(name: string, script: string, serverEnv: Record<string, string>) {
  const env = { ...serverEnv, PORT: String(await freePort()) };
  const prof =
    values.prof === undefined
      ? []
      : ['--cpu-prof', `--cpu-prof-dir=${values.prof}`, `--cpu-prof-name=${name}.cpuprofile`];
  const child: ChildProcess = spawn(process.execPath, [...SERVER_NODE_FLAGS, ...prof, script], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (chunk: Buffer) => {
    out += chunk.toString();
  });
  child.stderr!.on('data', (c: Buffer) => {
    out += c.toString();
  });
  // Ready when /healthz answers, not when the "listening on" line is written: that line is at info,
  // and BENCH_LOG_LEVEL=warn measures the server without its access lines.
  const url = `http://127.0.0.1:${env.PORT}`;
  let exited = false;
  await new Promise<void>((resolve, reject) => {
    child.once('exit', (code) => {
      exited = true;
      reject(new Error(`${script} exited (${code}): ${out}`));
    });
    const again = () => {
      if (!exited) setTimeout(poll, 100);
    };
    const poll = () => fetch(`${url}/healthz`).then((r) => (r.ok ? resolve() : again()), again);
    poll();
  });
  child.stdout!.removeAllListeners('data');
  child.stdout!.resume();
  child.stderr!.resume();
  return {
    url,
    pid: child.pid!,
    async stop() {
      child.kill('SIGINT');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

async function run(url: string, ids: string[], amount: number): Promise<number> {
  let i = 0;
  const result = await autocannon({
    url,
    connections: 16,
    amount,
    requests: [
      {
        method: 'GET',
        setupRequest: (req) => ({
          ...req,
          path: `/api/1/user/get?_userId=${ids[i++ % ids.length]}`,
          headers: { authorization: TOKEN },
        }),
      },
    ],
  });
  return result.non2xx + result.errors;
}

async function measure(name: string, script: string, env: Record<string, string>, ids: string[]) {
  const server = await start(name, script, env);
  try {
    await run(server.url, ids, Math.min(REQUESTS, 5000)); // warm-up: JIT, pools, caches
    const before = cpuMs(server.pid);
    const bad = await run(server.url, ids, REQUESTS);
    const used = cpuMs(server.pid) - before;
    if (bad > 0) throw new Error(`${name}: ${bad} answers were not 2xx`);
    return (used * 1000) / REQUESTS;
  } finally {
    await server.stop();
  }
}

async function main() {
  spawnSync(process.execPath, [BUILD], { stdio: 'inherit' });
  const name = `ua_cpu_${Date.now()}`;
  const admin = postgres(BASE_URL, { max: 1, onnotice: () => {} });
  await admin.unsafe(`create database ${name}`);
  const url = BASE_URL.replace(/\/[^/]*$/, `/${name}`);
  try {
    const database = await openPostgres(url);
    await database.migrate();
    await database.close();
    const sql = postgres(url, { max: 1, onnotice: () => {} });
    await sql`insert into users (id, site, email, name, password_hash, origin)
      select gen_random_uuid(), 'default', 'user' || i || '@bench.example.com', 'User ' || i, 'x', 'api'
      from generate_series(1, 10000) as i`;
    await sql`vacuum analyze users`;
    const ids = (await sql<{ id: string }[]>`select id from users order by random() limit 5000`).map((r) => r.id);
    await sql.end();
    const env = {
      DATABASE_URL: url,
      API_TOKENS: TOKEN,
      RATE_LIMIT: '100000000/60s',
      LOG_LEVEL: process.env.BENCH_LOG_LEVEL ?? 'info',
    };
    const ours = await measure('ours', MAIN, env, ids);
    const floor = await measure('floor', FLOOR, { DATABASE_URL: url }, ids);
    process.stdout.write(
      `get-by-id, server CPU per request over ${REQUESTS} requests: ours ${ours.toFixed(0)} µs, ` +
        `floor ${floor.toFixed(0)} µs, ratio ${(ours / floor).toFixed(2)}×\n`,
    );
  } finally {
    await admin.unsafe(`drop database if exists ${name} with (force)`);
    await admin.end();
  }
}

await main();
