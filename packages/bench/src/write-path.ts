// The write path against its floor (issue 63, point 1): `update` (a new name on one of 200
// accounts) and `delete` (an account for good, each request a new one), ours against the bare
// node:http floor doing ours' transaction with ours' statements (floor-write.ts,
// write-statements.ts), 16 connections, interleaved round by round (the order alternating) on
// freshly started processes.
//
// First, and before anything is timed, the counts, which do not depend on the machine's load: each
// side is run through the wire counter (wire-count.ts, a proxy that reads the protocol) for 400
// requests at 16 connections, and the statements, the statements parsed anew (an unnamed Parse)
// and the round trips per request are read, with every text and how often it came. Whatever ours
// sent besides the floor's statements is listed: its background (the sequencer numbering the
// events, the webhook worker's look, the rate-limit lease) and any drift between ours and the
// floor's copy of its statements (a warning: write-statements.ts is then to follow ours).
//
// One answer of each side is compared on the way (status, body, an ETag or none): the floor must answer as ours.
//
// Then the timed rounds: req/s, p50, p99, the server's CPU per request (user + system from
// /proc/<pid>/stat) and PostgreSQL's (the backends of that server's connections, found in
// pg_stat_activity by database and application_name, read the same way), over each measured round.
import postgres from 'postgres';
import type { LoadResult, Make } from './load-types.ts';
import { cpuMs } from './proc.ts';
import { median, type Row } from './report.ts';
import { startWireCounter, type WireCounts } from './wire-count.ts';
import { DELETE_STATEMENTS, UPDATE_STATEMENTS } from './write-statements.ts';

export interface WriteServer {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

export interface WritePathBench {
  /** A database seeded with accounts, and its URL. */
  db: { url: string };
  /** Ours, as built, on the database at `url` (default: the bench's). */
  ours(url?: string): Promise<WriteServer>;
  /** The write floor (floor-write.ts) on the database at `url` (default: the bench's). */
  floor(url?: string): Promise<WriteServer>;
  load(url: string, connections: number, seconds: number, make: Make): Promise<LoadResult>;
  /** The floor's throughput per round of one operation: the noise check. */
  floorRounds(scenario: string, rps: number[]): void;
  log(line: string): void;
  rounds: number;
  seconds: number;
  warmUpSeconds: number;
  token: string;
}

const CONNECTIONS = 16;
const UPDATED_ACCOUNTS = 200;
/** Requests of each counting pass. */
const COUNTED = 400;
/** Accounts seeded for the deletes (each delete takes one; never two the same). */
const DELETABLE = 150_000;
const THROUGHPUT_TARGET = 0.7;
const P99_TARGET = 2;

const APPLICATION = { ours: 'user-accounts', floor: 'write-floor' } as const;
type SideKey = keyof typeof APPLICATION;

interface Round extends LoadResult {
  cpuUs: number;
  pgCpuUs: number;
}

const normal = (text: string) => text.replace(/\s+/g, ' ').trim();

/** The CPU time so far of each PostgreSQL backend serving `application` on `database`, ms by pid. */
async function backendsCpu(admin: postgres.Sql, database: string, application: string): Promise<Map<number, number>> {
  const pids = await admin<{ pid: number }[]>`select pid from pg_stat_activity
    where datname = ${database} and application_name = ${application} and backend_type = 'client backend'`;
  const cpu = new Map<number, number>();
  for (const { pid } of pids) {
    try {
      cpu.set(pid, cpuMs(pid));
    } catch {
      // gone meanwhile
    }
  }
  return cpu;
}

const cpuSince = (before: Map<number, number>, after: Map<number, number>) =>
  [...after].reduce((sum, [pid, ms]) => sum + ms - (before.get(pid) ?? 0), 0);

/** A few requests at `connections` at once, `count` in all, each checked 200. */
async function drive(url: string, token: string, make: Make, count: number, connections: number) {
  let next = 0;
  let bad = 0;
  const worker = async () => {
    while (next < count) {
      const r = make(next++);
      const response = await fetch(`${url}${r.path}`, {
        method: r.method ?? 'GET',
        headers: { authorization: token, 'content-type': 'application/json' },
        body: r.body ?? null,
      });
      await response.arrayBuffer();
      if (response.status !== 200) bad++;
    }
  };
  await Promise.all(Array.from({ length: connections }, worker));
  return bad;
}

interface Counted {
  /** Of `statements`: the floor's statements as this side sent them (each at most as often as the floor does). */
  own?: number;
  /** The counting pass's length, s: the background's statements come by the second, not by the request. */
  seconds?: number;
  statements: number;
  parses: number;
  roundTrips: number;
  byText: [string, number][];
}

const perRequest = (c: WireCounts, n: number): Counted => ({
  statements: c.statements / n,
  parses: c.parses / n,
  roundTrips: c.roundTrips / n,
  byText: c.byText.map(([t, k]) => [t, k / n]),
});

export async function writePathRows(b: WritePathBench): Promise<{ rows: Row[]; notes: string[] }> {
  const sql = postgres(b.db.url, { max: 1, onnotice: () => {} });
  const database = new URL(b.db.url).pathname.slice(1);
  let updated: string[];
  let deletable: string[];
  try {
    const started = performance.now();
    await sql`insert into users (id, site, email, name, password_hash, origin)
      select gen_random_uuid(), 'default', 'deletable' || i || '@bench.example.com', 'Deletable ' || i, 'x', 'api'
      from generate_series(1, ${DELETABLE}) as i`;
    await sql`vacuum analyze users`;
    deletable = (await sql<{ id: string }[]>`select id from users where email like 'deletable%' order by random()`).map(
      (r) => r.id,
    );
    updated = (
      await sql<
        { id: string }[]
      >`select id from users where email not like 'deletable%' order by random() limit ${UPDATED_ACCOUNTS}`
    ).map((r) => r.id);
    b.log(
      `  seeded ${DELETABLE.toLocaleString('en')} accounts to delete in ${((performance.now() - started) / 1000).toFixed(1)} s`,
    );
  } finally {
    await sql.end();
  }
  let updates = 0;
  const update: Make = (i) => ({
    method: 'POST',
    path: '/api/1/user/update',
    body: JSON.stringify({ _userId: updated[i % updated.length], name: `Renamed ${++updates}` }),
  });
  let exhausted = 0;
  const remove: Make = () => {
    const id = deletable.pop();
    if (id === undefined) exhausted++;
    return {
      method: 'DELETE',
      path: '/api/1/user/delete',
      body: JSON.stringify({ _userId: id ?? '00000000-0000-4000-8000-000000000000' }),
    };
  };
  const ops = [
    { label: 'update', make: update, statements: UPDATE_STATEMENTS },
    { label: 'delete', make: remove, statements: DELETE_STATEMENTS },
  ];
  const notes: string[] = [];
  const rows: Row[] = [];

  // 1. The counts (and, on the way, one answer of each side, compared).
  const counts = new Map<string, Counted>();
  const answers = new Map<string, { status: number; body: string; etag: boolean }>();
  for (const op of ops) {
    for (const key of ['ours', 'floor'] as SideKey[]) {
      const wire = await startWireCounter(b.db.url);
      const server = key === 'ours' ? await b.ours(wire.url) : await b.floor(wire.url);
      try {
        await drive(server.url, b.token, op.make, 50, CONNECTIONS); // the pools open, the caches warm
        const one = op.make(0);
        const answer = await fetch(`${server.url}${one.path}`, {
          method: one.method ?? 'GET',
          headers: { authorization: b.token, 'content-type': 'application/json' },
          body: one.body ?? null,
        });
        answers.set(key, { status: answer.status, body: await answer.text(), etag: answer.headers.has('etag') });
        await new Promise((r) => setTimeout(r, 300));
        wire.reset();
        const began = performance.now();
        const bad = await drive(server.url, b.token, op.make, COUNTED, CONNECTIONS);
        // What the requests left to the background (the sequencer's run of their events) is theirs too.
        await new Promise((r) => setTimeout(r, 300));
        if (bad > 0) b.log(`  warning: ${op.label} (${key}): ${bad} of ${COUNTED} answers were not 200`);
        counts.set(`${op.label}/${key}`, {
          ...perRequest(wire.counts(), COUNTED),
          seconds: (performance.now() - began) / 1000,
        });
      } finally {
        await server.stop();
        await wire.stop();
      }
    }
    const [mine, theirs] = [answers.get('ours')!, answers.get('floor')!];
    if (mine.status !== theirs.status || mine.body !== theirs.body || mine.etag !== theirs.etag)
      throw new Error(
        `${op.label}: the floor's answer is not ours (ours ${mine.status} ${mine.body}${mine.etag ? ' with an ETag' : ''}, the floor ${theirs.status} ${theirs.body}${theirs.etag ? ' with an ETag' : ''})`,
      );
    b.log(`  ${op.label}: the floor answered as ours (${mine.status} ${mine.body}${mine.etag ? ', an ETag' : ''})`);
    const ours = counts.get(`${op.label}/ours`)!;
    const floor = counts.get(`${op.label}/floor`)!;
    const floorTexts = new Set(op.statements.map((s) => normal(s.text)));
    // The floor's own statements as each side sent them, each text at most as often as the floor
    // sends it (begin and commit are the background's too): the rest is the background.
    for (const c of [ours, floor])
      c.own = floor.byText.reduce((sum, [t, k]) => sum + Math.min(k, c.byText.find(([o]) => o === t)?.[1] ?? 0), 0);
    const missing = [...floorTexts].filter((t) => !ours.byText.some(([o, k]) => o === t && k >= 0.99));
    const list = (c: Counted) =>
      c.byText
        .filter(([, k]) => k >= 0.005)
        .map(([t, k]) => `${k.toFixed(2)} × \`${t.length > 140 ? `${t.slice(0, 140)}…` : t}\``)
        .join('; ');
    b.log(
      `  ${op.label}, per request over ${COUNTED} at ${CONNECTIONS} connections: ours ${ours.statements.toFixed(2)} statements ` +
        `(the transaction's ${ours.own!.toFixed(2)}, the background's ${(ours.statements - ours.own!).toFixed(2)}: ` +
        `${(((ours.statements - ours.own!) * COUNTED) / ours.seconds!).toFixed(0)} a second over ${ours.seconds!.toFixed(1)} s), ` +
        `${ours.parses.toFixed(2)} parsed anew, ${ours.roundTrips.toFixed(2)} round trips; the floor ` +
        `${floor.statements.toFixed(2)} (${floor.parses.toFixed(2)}), ${floor.roundTrips.toFixed(2)}`,
    );
    b.log(`    ours: ${list(ours)}`);
    b.log(`    floor: ${list(floor)}`);
    if (missing.length > 0) {
      const warning = `warning: ${op.label}: ours no longer sends once a request ${missing.length} of the floor's statements (write-statements.ts is to follow ours): ${missing.map((t) => t.slice(0, 80)).join(' | ')}`;
      b.log(`  ${warning}`);
      notes.push(warning);
    }
    rows.push(
      {
        group: 'write path',
        name: `${op.label}: statements per request in the write's transaction (the floor's, as each sends them)`,
        ours: [ours.own!],
        baseline: [floor.own!],
        unit: 'statements',
        lowerIsBetter: true,
      },
      {
        group: 'write path',
        name: `${op.label}: statements per request, ours' background included (sequencer, webhook worker, leases, heartbeats: by the second, so more a request on a slower machine)`,
        ours: [ours.statements],
        baseline: [floor.statements],
        unit: 'statements',
        lowerIsBetter: true,
      },
      {
        group: 'write path',
        name: `${op.label}: statements parsed and planned anew per request (unnamed)`,
        ours: [ours.parses],
        baseline: [floor.parses],
        unit: 'parses',
        lowerIsBetter: true,
      },
      {
        group: 'write path',
        name: `${op.label}: round trips to PostgreSQL per request`,
        ours: [ours.roundTrips],
        baseline: [floor.roundTrips],
        unit: 'round trips',
        lowerIsBetter: true,
      },
    );
    notes.push(
      `${op.label}, what each side sent a request (counted on the wire): ours ${list(ours)}. The floor: ${list(floor)}.`,
    );
  }

  // 2. The timed rounds.
  const admin = postgres(b.db.url, { max: 1, onnotice: () => {} });
  try {
    for (const op of ops) {
      const results: Record<SideKey, Round[]> = { ours: [], floor: [] };
      for (let r = 0; r < b.rounds; r++) {
        const order: SideKey[] = r % 2 === 0 ? ['ours', 'floor'] : ['floor', 'ours'];
        for (const key of order) {
          const server = key === 'ours' ? await b.ours() : await b.floor();
          try {
            await b.load(server.url, CONNECTIONS, b.warmUpSeconds, op.make);
            const cpuBefore = cpuMs(server.pid);
            const pgBefore = await backendsCpu(admin, database, APPLICATION[key]);
            const result = await b.load(server.url, CONNECTIONS, b.seconds, op.make);
            const pgAfter = await backendsCpu(admin, database, APPLICATION[key]);
            const n = Math.max(result.requests, 1);
            const cpuUs = ((cpuMs(server.pid) - cpuBefore) * 1000) / n;
            const pgCpuUs = (cpuSince(pgBefore, pgAfter) * 1000) / n;
            if (result.bad > 0) b.log(`  warning: ${op.label} (${key}) answered ${result.bad} non-2xx or errors`);
            results[key].push({ ...result, cpuUs, pgCpuUs });
          } finally {
            await server.stop();
          }
        }
      }
      const o = results.ours;
      const f = results.floor;
      b.floorRounds(
        `write floor (${op.label})`,
        f.map((x) => x.rps),
      );
      const ratio = median(o.map((x) => x.rps)) / median(f.map((x) => x.rps));
      const pairs = o.map((x, i) => x.rps / f[i]!.rps);
      const p99Ratio = median(o.map((x) => x.p99)) / median(f.map((x) => x.p99));
      b.log(
        `  ${op.label}: ours ${median(o.map((x) => x.rps)).toFixed(0)} req/s, the floor ${median(f.map((x) => x.rps)).toFixed(0)} ` +
          `(${ratio.toFixed(2)}×; rounds' ratios ${pairs.map((x) => x.toFixed(2)).join(' ')}); p99 ${median(o.map((x) => x.p99))} vs ${median(f.map((x) => x.p99))} ms; ` +
          `CPU a request: server ${median(o.map((x) => x.cpuUs)).toFixed(0)} vs ${median(f.map((x) => x.cpuUs)).toFixed(0)} µs, ` +
          `PostgreSQL ${median(o.map((x) => x.pgCpuUs)).toFixed(0)} vs ${median(f.map((x) => x.pgCpuUs)).toFixed(0)} µs`,
      );
      rows.push(
        {
          group: 'write path',
          name: `${op.label}, ${CONNECTIONS} connections, vs the write floor (same statements)`,
          ours: o.map((x) => x.rps),
          baseline: f.map((x) => x.rps),
          unit: 'req/s',
          target: `≥ ${THROUGHPUT_TARGET}×`,
          ok: ratio >= THROUGHPUT_TARGET,
        },
        {
          group: 'write path',
          name: `${op.label}, p50`,
          ours: o.map((x) => x.p50),
          baseline: f.map((x) => x.p50),
          unit: 'ms',
          lowerIsBetter: true,
        },
        {
          group: 'write path',
          name: `${op.label}, p99`,
          ours: o.map((x) => x.p99),
          baseline: f.map((x) => x.p99),
          unit: 'ms',
          lowerIsBetter: true,
          target: `≤ ${P99_TARGET}× the floor's`,
          ok: p99Ratio <= P99_TARGET,
        },
        {
          group: 'write path',
          name: `${op.label}, the server's CPU per request`,
          ours: o.map((x) => Math.round(x.cpuUs)),
          baseline: f.map((x) => Math.round(x.cpuUs)),
          unit: 'µs',
          lowerIsBetter: true,
        },
        {
          group: 'write path',
          name: `${op.label}, PostgreSQL's CPU per request (its backends for that server)`,
          ours: o.map((x) => Math.round(x.pgCpuUs)),
          baseline: f.map((x) => Math.round(x.pgCpuUs)),
          unit: 'µs',
          lowerIsBetter: true,
        },
      );
    }
  } finally {
    await admin.end();
  }
  if (exhausted > 0) notes.push(`warning: ${exhausted} deletes found no account left to delete (404s): seed more.`);
  notes.unshift(
    `The write path (issue 63): update (a new name on one of ${UPDATED_ACCOUNTS} accounts) and delete (an account for good, a new one each request, none with sessions or memberships) ` +
      `against the write floor: a bare node:http server (floor-write.ts) running ours' statements (write-statements.ts, as read from ours on the wire and checked against ours before anything is timed) ` +
      `in one transaction with ours' pool settings, and nothing else (no token, budgets, validation, idempotency, deadline, log, sequencer or webhook worker). ` +
      `${CONNECTIONS} connections, interleaved round by round on freshly started processes. Counts come first and do not depend on the machine: statements, statements parsed anew and round trips per request, read on the wire ` +
      `(wire-count.ts) over ${COUNTED} requests each; ours' include its background (the sequencer numbering the events, the webhook worker's look, the rate-limit lease), the floor has none. ` +
      `CPU per request: the server process's, and PostgreSQL's backends for that server's connections (pg_stat_activity), from /proc; WAL writing and checkpoints are in neither. Throughput moves with what else runs on the machine; the ratios of one interleaved run and the counts are what to trust.`,
  );
  return { rows, notes };
}
