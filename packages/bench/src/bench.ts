// `pnpm bench [--quick] [--rounds N] [--seconds N]`: the service against its floor on PostgreSQL,
// with one load generator (autocannon), configurations interleaved round by round, medians
// reported with ratios. Writes bench/results/<date>.md and .svg. Not part of `pnpm test`.
import { type ChildProcess, spawn, spawnSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import { hash } from '@node-rs/argon2';
import { openPostgres } from '@user-accounts/server/db';
import autocannon from 'autocannon';
import postgres from 'postgres';
import { deepRows, listTimes } from './listing.ts';
import { loginRows } from './login.ts';
import { type Row, writeReport } from './report.ts';

const { values } = parseArgs({
  options: {
    quick: { type: 'boolean', default: false },
    rounds: { type: 'string' },
    seconds: { type: 'string' },
    // `--only login` or `--only listing`: those figures alone.
    only: { type: 'string' },
  },
});
const QUICK = values.quick;
const ROUNDS = Number(values.rounds ?? (QUICK ? 1 : 3));
const SECONDS = Number(values.seconds ?? (QUICK ? 3 : 5));
const STABILITY_SECONDS = QUICK ? 20 : 60;
const BASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const TOKEN = 'ua_bench_token_0123456789abcdef0123456789';
// The server as operators run it: built by `pnpm build` (bundled), before anything is measured.
const BUILD = fileURLToPath(new URL('../../server/build.ts', import.meta.url));
const MAIN = fileURLToPath(new URL('../../server/dist/main.js', import.meta.url));
const FLOOR = fileURLToPath(new URL('./floor.ts', import.meta.url));
const ARGON2ID = { algorithm: 2, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

const log = (line: string) => process.stdout.write(`${line}\n`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor((xs.length - 1) / 2)]!;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

// ---- databases -------------------------------------------------------------------------------

interface BenchDb {
  url: string;
  ids: string[];
  emails: string[];
  drop(): Promise<void>;
}

async function seededDatabase(accounts: number, passwordHash: string): Promise<BenchDb> {
  const admin = postgres(BASE_URL, { max: 1, onnotice: () => {} });
  const name = `ua_bench_${Date.now()}_${accounts}`;
  await admin.unsafe(`create database ${name}`);
  const url = new URL(BASE_URL);
  url.pathname = `/${name}`;
  const database = await openPostgres(url.toString());
  await database.migrate();
  await database.close();
  const sql = postgres(url.toString(), { max: 1, onnotice: () => {} });
  const started = performance.now();
  // Created a second apart, as a site's sign-ups come: list's ranges and pages have an order to walk.
  await sql`insert into users (id, site, email, name, password_hash, origin, created_at)
    select gen_random_uuid(), 'default', 'user' || i || '@bench.example.com', 'User ' || i, ${passwordHash}, 'api',
      timestamptz '2026-01-01' + i * interval '1 second'
    from generate_series(1, ${accounts}) as i`;
  await sql`vacuum analyze users`;
  const sample = await sql<{ id: string; email: string }[]>`select id, email from users order by random() limit 20000`;
  await sql.end();
  log(`  seeded ${accounts.toLocaleString('en')} accounts in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  return {
    url: url.toString(),
    ids: sample.map((r) => r.id),
    emails: sample.map((r) => r.email),
    async drop() {
      await admin.unsafe(`drop database if exists ${name} with (force)`);
      await admin.end();
    },
  };
}

// ---- servers ---------------------------------------------------------------------------------

interface Proc {
  url: string;
  child: ChildProcess;
  peakRssMb(): number;
  stop(): Promise<void>;
}

async function start(script: string, env: Record<string, string>): Promise<Proc> {
  const child = spawn(process.execPath, [script], {
    env: { PATH: process.env.PATH ?? '', PORT: '0', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    const onData = (chunk: Buffer) => {
      out += chunk.toString();
      const match = /listening on (http:\/\/[\d.]+:\d+)/.exec(out);
      if (match) resolve(match[1]!);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', (c: Buffer) => {
      out += c.toString();
    });
    child.on('exit', (code) => reject(new Error(`${script} exited (${code}): ${out}`)));
  });
  child.stdout!.removeAllListeners('data');
  child.stdout!.resume();
  child.stderr!.resume();
  return {
    url,
    child,
    peakRssMb() {
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
      return Number(/VmHWM:\s+(\d+)/.exec(status)![1]) / 1024;
    },
    async stop() {
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    },
  };
}

const ours = (db: { url: string }, env: Record<string, string> = {}) =>
  start(MAIN, {
    ...env,
    DATABASE_URL: db.url,
    API_TOKENS: TOKEN,
    RATE_LIMIT: '100000000/60s',
    RATE_LIMIT_HASH: 'off',
    LOG_LEVEL: 'info', // the server's default: one access-log line per request is part of its cost
  });
const floor = (db: BenchDb) => start(FLOOR, { DATABASE_URL: db.url });

// ---- load ------------------------------------------------------------------------------------

interface Result {
  rps: number;
  p50: number;
  p99: number;
  perSecond: number[];
  bad: number;
}

type Make = (i: number) => { method?: 'GET' | 'POST' | 'DELETE'; path: string; body?: string };

async function load(url: string, connections: number, seconds: number, make: Make): Promise<Result> {
  let i = 0;
  const perSecond: number[] = [];
  const result = await new Promise<autocannon.Result>((resolve, reject) => {
    const instance = autocannon(
      {
        url,
        connections,
        duration: seconds,
        headers: { authorization: TOKEN, 'content-type': 'application/json' },
        requests: [
          {
            setupRequest: (req: any) => {
              const r = make(i++);
              return { ...req, method: r.method ?? 'GET', path: r.path, body: r.body };
            },
          },
        ],
      },
      (error: Error | null, res: autocannon.Result) => (error ? reject(error) : resolve(res)),
    );
    (instance as unknown as NodeJS.EventEmitter).on('tick', (counter: { counter: number }) =>
      perSecond.push(counter.counter),
    );
  });
  return {
    rps: result.requests.total / seconds,
    p50: result.latency.p50,
    p99: result.latency.p99,
    perSecond,
    bad: result.non2xx + result.errors + result.timeouts,
  };
}

const pick = <T>(xs: T[], i: number) => xs[(i * 7919) % xs.length]!;
const getById =
  (db: BenchDb): Make =>
  (i) => ({ path: `/api/1/user/get?_userId=${pick(db.ids, i)}` });
const getByEmail =
  (db: BenchDb): Make =>
  (i) => ({ path: `/api/1/user/get?email=${encodeURIComponent(pick(db.emails, i))}` });

// ---- scenarios -------------------------------------------------------------------------------

async function standaloneHashRate(seconds: number): Promise<number> {
  const cores = availableParallelism();
  let done = 0;
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: cores }, async () => {
      while (performance.now() < until) {
        await hash(`standalone-${done}-password`, ARGON2ID);
        done++;
      }
    }),
  );
  return done / seconds;
}

async function readyTime(): Promise<number[]> {
  const dir = mkdtempSync(join(tmpdir(), 'ua-bench-ready-'));
  try {
    const first = await start(MAIN, { DATA_DIR: dir, LOG_LEVEL: 'info' });
    await first.stop();
    const times: number[] = [];
    for (let r = 0; r < 3; r++) {
      const t0 = performance.now();
      const child = spawn(process.execPath, [MAIN], {
        env: { PATH: process.env.PATH ?? '', PORT: '38271', DATA_DIR: dir, LOG_LEVEL: 'warn' },
        stdio: 'ignore',
      });
      for (;;) {
        try {
          if ((await fetch('http://127.0.0.1:38271/readyz')).status === 200) break;
        } catch {}
        await sleep(10);
      }
      times.push(performance.now() - t0);
      child.kill('SIGTERM');
      await new Promise((r) => child.once('exit', r));
    }
    return times;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const rows: Row[] = [];
  const cores = availableParallelism();
  log(
    `bench: ${ROUNDS} round(s) of ${SECONDS} s per measurement, ${cores} cores, PostgreSQL at ${BASE_URL.replace(/\/\/[^@]*@/, '//')}`,
  );

  log('building the server (pnpm build)');
  const built = spawnSync(process.execPath, [BUILD], { encoding: 'utf8' });
  if (built.status !== 0) throw new Error(`build failed: ${built.stderr}`);

  log('standalone argon2id hash rate');
  const hashRate = await standaloneHashRate(SECONDS);
  const passwordHash = await hash('bench-password-0', ARGON2ID);

  const login = async (db: BenchDb) =>
    rows.push(
      ...(await loginRows(
        {
          db,
          password: 'bench-password-0',
          passwordHash,
          emptyDatabase: () => seededDatabase(0, passwordHash),
          ours,
          load,
          log,
          rounds: ROUNDS,
          seconds: SECONDS,
          token: TOKEN,
        },
        hashRate,
      )),
    );
  if (values.only === 'listing') {
    await scaled(rows, passwordHash, true);
    log(`bench: report written to ${writeReport(rows, { rounds: ROUNDS, seconds: SECONDS, cores, quick: QUICK })}`);
    return;
  }
  if (values.only === 'login') {
    const db = await seededDatabase(100_000, passwordHash);
    try {
      await login(db);
    } finally {
      await db.drop();
    }
    log(`bench: report written to ${writeReport(rows, { rounds: ROUNDS, seconds: SECONDS, cores, quick: QUICK })}`);
    return;
  }

  log('ready time on an existing embedded data folder');
  const ready = await readyTime();
  rows.push({
    group: 'start',
    name: 'ready to serve after start (embedded, existing folder)',
    ours: median(ready),
    unit: 'ms',
    target: '≤ 1000 ms',
    ok: median(ready) <= 1000,
  });

  log('seeding 100,000 accounts');
  const db = await seededDatabase(100_000, passwordHash);
  try {
    // get-by-id and get-by-email, ours and floor interleaved.
    for (const [label, make, levels] of [
      ['get-by-id', getById(db), [16, 64]],
      ['get-by-email', getByEmail(db), [16]],
    ] as const) {
      for (const connections of levels) {
        const o: Result[] = [];
        const f: Result[] = [];
        for (let r = 0; r < ROUNDS; r++) {
          for (const which of r % 2 === 0 ? ['ours', 'floor'] : ['floor', 'ours']) {
            const server = which === 'ours' ? await ours(db) : await floor(db);
            await load(server.url, connections, 1, make); // warm-up
            const result = await load(server.url, connections, SECONDS, make);
            (which === 'ours' ? o : f).push(result);
            if (result.bad > 0) log(`  warning: ${which} answered ${result.bad} non-2xx or errors`);
            await server.stop();
          }
        }
        const oRps = median(o.map((x) => x.rps));
        const fRps = median(f.map((x) => x.rps));
        const oP99 = median(o.map((x) => x.p99));
        const fP99 = median(f.map((x) => x.p99));
        log(
          `  ${label} @${connections}: ours ${oRps.toFixed(0)} req/s p99 ${oP99} ms; floor ${fRps.toFixed(0)} req/s p99 ${fP99} ms`,
        );
        rows.push({
          group: label,
          name: `${label} throughput, ${connections} connections`,
          ours: oRps,
          floor: fRps,
          unit: 'req/s',
          target: label === 'get-by-id' ? '≥ 0.85× floor' : undefined,
          ok: label === 'get-by-id' ? oRps / fRps >= 0.85 : undefined,
        });
        rows.push({
          group: label,
          name: `${label} p99, ${connections} connections`,
          ours: oP99,
          floor: fP99,
          unit: 'ms',
          lowerIsBetter: true,
          target: label === 'get-by-id' ? '≤ 1.5× floor' : undefined,
          ok: label === 'get-by-id' ? oP99 / fP99 <= 1.5 : undefined,
        });
        rows.push({
          group: label,
          name: `${label} p50, ${connections} connections`,
          ours: median(o.map((x) => x.p50)),
          floor: median(f.map((x) => x.p50)),
          unit: 'ms',
          lowerIsBetter: true,
        });
      }
    }

    await login(db);

    // Writes and the mix, on our server only (the floor has no writes).
    const server = await ours(db);
    try {
      let seq = 0;
      const deletable = db.ids.slice(10_000);
      const writes: [string, number, Make][] = [
        [
          'create',
          8,
          () => ({
            method: 'POST',
            path: '/api/1/user/create',
            body: JSON.stringify({
              email: `new.${Date.now()}.${seq++}@bench.example.com`,
              password: `Bench-password-${seq}`,
              name: 'New',
            }),
          }),
        ],
        [
          'update',
          16,
          (i) => ({
            method: 'POST',
            path: '/api/1/user/update',
            body: JSON.stringify({ _userId: pick(db.ids.slice(0, 10_000), i), name: `Renamed ${i}` }),
          }),
        ],
        [
          'delete',
          16,
          () => ({
            method: 'DELETE',
            path: '/api/1/user/delete',
            body: JSON.stringify({ _userId: deletable.pop() ?? db.ids[0] }),
          }),
        ],
        [
          '90/10 read/write mix',
          16,
          (i) =>
            i % 10 === 0
              ? {
                  method: 'POST',
                  path: '/api/1/user/update',
                  body: JSON.stringify({ _userId: pick(db.ids.slice(0, 10_000), i), name: `Mixed ${i}` }),
                }
              : getById(db)(i),
        ],
      ];
      for (const [label, connections, make] of writes) {
        const results: Result[] = [];
        for (let r = 0; r < ROUNDS; r++) results.push(await load(server.url, connections, SECONDS, make));
        const rps = median(results.map((x) => x.rps));
        log(`  ${label} @${connections}: ${rps.toFixed(0)} req/s p99 ${median(results.map((x) => x.p99))} ms`);
        rows.push({
          group: 'writes',
          name: `${label} throughput, ${connections} connections`,
          ours: rps,
          unit: 'req/s',
        });
        rows.push({
          group: 'writes',
          name: `${label} p99, ${connections} connections`,
          ours: median(results.map((x) => x.p99)),
          unit: 'ms',
          lowerIsBetter: true,
        });
        if (label === 'create') {
          rows.push({
            group: 'writes',
            name: 'create throughput vs standalone argon2id hash rate',
            ours: rps,
            floor: hashRate,
            unit: 'per s',
            target: '≥ 0.7×',
            ok: rps / hashRate >= 0.7,
          });
        }
      }

      // Reads while 4 connections create (and so hash) without pause, against reads alone.
      const idle: Result[] = [];
      const busy: Result[] = [];
      for (let r = 0; r < ROUNDS; r++) {
        idle.push(await load(server.url, 16, SECONDS, getById(db)));
        const creating = load(server.url, 4, SECONDS + 1, () => ({
          method: 'POST',
          path: '/api/1/user/create',
          body: JSON.stringify({
            email: `busy.${Date.now()}.${seq++}@bench.example.com`,
            password: `Busy-password-${seq}`,
            name: 'Busy',
          }),
        }));
        await sleep(500);
        busy.push(await load(server.url, 16, SECONDS, getById(db)));
        await creating;
      }
      const idleRps = median(idle.map((x) => x.rps));
      const busyRps = median(busy.map((x) => x.rps));
      const idleP99 = median(idle.map((x) => x.p99));
      const busyP99 = median(busy.map((x) => x.p99));
      log(
        `  reads while hashing: ${busyRps.toFixed(0)} vs ${idleRps.toFixed(0)} req/s idle; p99 ${busyP99} vs ${idleP99} ms`,
      );
      rows.push({
        group: 'hashing',
        name: 'read throughput while 4 creates hash vs idle',
        ours: busyRps,
        floor: idleRps,
        unit: 'req/s',
        target: '≥ 0.5×',
        ok: busyRps / idleRps >= 0.5,
      });
      rows.push({
        group: 'hashing',
        name: 'read p99 while 4 creates hash vs idle',
        ours: busyP99,
        floor: idleP99,
        unit: 'ms',
        lowerIsBetter: true,
        target: '≤ 3×',
        ok: busyP99 / idleP99 <= 3,
      });

      // No slowdown over time: a saturating run, its last quarter against its first.
      log(`  stability: ${STABILITY_SECONDS} s of get-by-id at 64 connections`);
      const long = await load(server.url, 64, STABILITY_SECONDS, getById(db));
      const quarter = Math.floor(long.perSecond.length / 4);
      const first = long.perSecond.slice(0, quarter).reduce((a, b) => a + b, 0) / quarter;
      const last = long.perSecond.slice(-quarter).reduce((a, b) => a + b, 0) / quarter;
      log(`  stability: first quarter ${first.toFixed(0)} req/s, last quarter ${last.toFixed(0)} req/s`);
      rows.push({
        group: 'stability',
        name: `throughput, last vs first quarter of a ${STABILITY_SECONDS} s run`,
        ours: last,
        floor: first,
        unit: 'req/s',
        target: '≥ 0.9×',
        ok: last / first >= 0.9,
      });
      const rss = server.peakRssMb();
      rows.push({
        group: 'memory',
        name: 'peak RSS of the server over every scenario above',
        ours: rss,
        unit: 'MB',
        target: '≤ 200 MB',
        ok: rss <= 200,
      });
    } finally {
      await server.stop();
    }
  } finally {
    await db.drop();
  }

  await scaled(rows, passwordHash, false);

  const file = writeReport(rows, { rounds: ROUNDS, seconds: SECONDS, cores, quick: QUICK });
  log(`bench: report written to ${file}`);
}

/** get-by-email, and list, count and export, at 10k and at 1M accounts (`listingOnly`: the latter alone). */
async function scaled(rows: Row[], passwordHash: string, listingOnly: boolean): Promise<void> {
  const times: Record<number, number> = {};
  const lists: Record<number, Record<string, number>> = {};
  for (const size of [10_000, 1_000_000]) {
    log(`${listingOnly ? 'list' : 'get-by-email and list'} at ${size.toLocaleString('en')} accounts`);
    const sized = await seededDatabase(size, passwordHash);
    try {
      if (!listingOnly) {
        const server = await ours(sized);
        const results: Result[] = [];
        await load(server.url, 16, 1, getByEmail(sized));
        for (let r = 0; r < ROUNDS; r++) results.push(await load(server.url, 16, SECONDS, getByEmail(sized)));
        await server.stop();
        times[size] = median(results.map((x) => x.p50));
        log(`  p50 ${times[size]} ms, ${median(results.map((x) => x.rps)).toFixed(0)} req/s`);
      }
      const bench = { db: sized, accounts: size, ours, token: TOKEN, log };
      lists[size] = await listTimes(bench);
      log(
        `  list p50: ${Object.entries(lists[size])
          .map(([k, v]) => `${k} ${v.toFixed(1)} ms`)
          .join(', ')}`,
      );
      if (size === 1_000_000) rows.push(...(await deepRows(bench, lists[size].first!)));
    } finally {
      await sized.drop();
    }
  }
  for (const [shape, label] of [
    ['prefix', 'list by email prefix'],
    ['range', 'list by creation range'],
  ] as const) {
    const large = lists[1_000_000]![shape]!;
    const small = lists[10_000]![shape]!;
    rows.push({
      group: 'list',
      name: `${label} p50 at 1M vs 10k accounts`,
      ours: large,
      floor: small,
      unit: 'ms',
      lowerIsBetter: true,
      target: '≤ 1.5×',
      ok: large / small <= 1.5,
    });
  }
  if (listingOnly) return;
  rows.push({
    group: 'scale',
    name: 'get-by-email p50 at 1M vs 10k accounts',
    ours: times[1_000_000]!,
    floor: times[10_000]!,
    unit: 'ms',
    lowerIsBetter: true,
    target: '≤ 1.2×',
    ok: times[1_000_000]! / times[10_000]! <= 1.2,
  });
}

await main();
