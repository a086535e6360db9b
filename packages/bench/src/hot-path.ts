// The hot paths of `pnpm bench` (issue 47, point 3): get-by-id, `session/verify` and
// `org/member/check`, each against the bare `node:http` floor doing the same query
// (floor-http.ts, floor-query.ts: ours' SQL, ours' JSON, nothing else; for get-by-id the floor
// started with FLOOR_GET=ours, which runs get_user_by_id's own text and answers every field of
// toUser and the ETag). get-by-id is measured a second time against the floor's light get (7
// columns by id, 7 fields: issue 33's floor, which the main report keeps), for continuity with
// issue 33's figures, with no target. Ours and the floor
// interleaved round by round on freshly started processes, 16 connections. For each: req/s, p50,
// p99, the server's CPU per request over each measured round (user + system from /proc/<pid>/stat,
// as cpu-per-request.ts reads it), the server's peak RSS at the end of each round (VmHWM from
// /proc/<pid>/status), and ours' top frames in one more, profiled, run of the same load.
//
// Targets (issue 47): get-by-id and session/verify at least 0.6× the floor's throughput, every
// p99 at most 2× the floor's, ours' peak RSS at most 250 MB. Where one is missed, the report says
// by how much, and what its CPU per request and its frames say bounds it.
//
// What it seeds is sessions.ts's and orgs.ts's: 20,000 live sessions of `default` (each marked
// seen before each round of session/verify, so that no request is due its once-a-minute
// `lastSeenAt` write: the read path, for ours and the floor alike), and memberships (100,000 with
// `--only hot-path` unless `--memberships N`; in a full run, the ones the organizations scenario
// seeded before it).
import postgres from 'postgres';
import type { LoadResult, Make } from './load-types.ts';
import { MEMBERS_PER_ORG, PERMISSIONS, sampleMemberships, seedMemberships } from './orgs.ts';
import { cpuMs } from './proc.ts';
import { median, type Row } from './report.ts';
import { lastSeen, seedSessions } from './sessions.ts';

export interface HotServer {
  url: string;
  pid: number;
  /** VmHWM so far, MB. */
  peakRssMb(): number;
  stop(): Promise<void>;
}

type Result = LoadResult;

export interface HotPathBench {
  /** A seeded database and a sample of its account ids. */
  db: { url: string; ids: string[] };
  ours(): Promise<HotServer>;
  /**
   * The bare node:http floor (floor-http.ts); get `ours`: its get-by-id runs ours' statement and
   * answers ours' JSON and ETag (FLOOR_GET=ours), `light`: issue 33's light get.
   */
  floor(get: 'ours' | 'light'): Promise<HotServer>;
  load(url: string, connections: number, seconds: number, make: Make): Promise<Result>;
  /** The floor's throughput per round of one operation: how much the machine varied (the noise check). */
  floorRounds(scenario: string, rps: number[]): void;
  /** The top frames of ours under one more run of `make` (profile.ts). */
  profiled(make: Make, connections: number): Promise<string>;
  log(line: string): void;
  rounds: number;
  seconds: number;
  warmUpSeconds: number;
  token: string;
  /** Memberships to seed when the database has none yet. */
  memberships: number;
  /** Live sessions session/verify picks from. */
  sessions: number;
}

const CONNECTIONS = 16;
const PICK = 7919;
const pick = <T>(xs: T[], i: number) => xs[(i * PICK) % xs.length]!;

/** Issue 47's targets. */
const THROUGHPUT_TARGET = 0.6;
const P99_TARGET = 2;
const RSS_TARGET_MB = 250;

interface Round extends Result {
  /** The server's CPU (user + system) over the measured seconds, per request, µs. */
  cpuUs: number;
  /** The server's VmHWM at the end of the round, MB. */
  rssMb: number;
}

interface Operation {
  label: string;
  /** Which floor, as the report names it: `same query`, or get-by-id's light one. */
  against: string;
  /** The floor's get (only get-by-id's answer depends on it). */
  floorGet: 'ours' | 'light';
  /** Every field of ours' result must be the floor's (else: only the floor's fields must be ours'). */
  allFields: boolean;
  /** The ETag too must be the same. */
  etag?: boolean;
  /**
   * Issue 47's targets (p99, peak RSS; throughput where set) apply, and ours is profiled: false for
   * the light get's pass alone, a continuity figure (ours' frames are the same-query pass's).
   */
  judged: boolean;
  make: Make;
  /** Before each round of either side (session/verify: every session marked seen). */
  before?: () => Promise<void>;
  /** The throughput target against the floor, when the issue sets one. */
  throughput?: number;
}

async function countMemberships(url: string): Promise<number> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const [row] = await sql<{ n: number }[]>`select count(*)::int as n from org_memberships`;
    return row?.n ?? 0;
  } finally {
    await sql.end();
  }
}

/** One side's round: a warm-up, then the measured load with the server's CPU read around it. */
async function round(b: HotPathBench, start: () => Promise<HotServer>, op: Operation): Promise<Round> {
  await op.before?.();
  const server = await start();
  try {
    await b.load(server.url, CONNECTIONS, b.warmUpSeconds, op.make);
    const cpuBefore = cpuMs(server.pid);
    const result = await b.load(server.url, CONNECTIONS, b.seconds, op.make);
    const cpuUs = ((cpuMs(server.pid) - cpuBefore) * 1000) / Math.max(result.requests, 1);
    return { ...result, cpuUs, rssMb: server.peakRssMb() };
  } finally {
    await server.stop();
  }
}

/** The JSON both answer for one request of `op` (the floor's must be ours', field for field). */
async function answerOf(
  url: string,
  token: string,
  r: ReturnType<Make>,
): Promise<{ status: number; json: any; etag: string | null }> {
  const response = await fetch(`${url}${r.path}`, {
    method: r.method ?? 'GET',
    headers: { authorization: token, 'content-type': 'application/json', ...r.headers },
    body: r.body ?? null,
  });
  return { status: response.status, json: await response.json().catch(() => null), etag: response.headers.get('etag') };
}

/** Ours' and the floor's answers to the same request, before anything is timed: 200 both, the same result. */
async function sameAnswers(b: HotPathBench, ops: Operation[]): Promise<void> {
  for (const op of ops) await op.before?.();
  const ours = await b.ours();
  const floors = { ours: await b.floor('ours'), light: await b.floor('light') };
  try {
    for (const op of ops) {
      const floor = floors[op.floorGet];
      const checked = new Set<string>();
      for (const i of [0, 1, 2]) {
        const r = op.make(i);
        const [o, f] = [await answerOf(ours.url, b.token, r), await answerOf(floor.url, b.token, r)];
        if (o.status !== 200 || f.status !== 200)
          throw new Error(
            `${op.label} (${op.against}): ours answered ${o.status}, the floor ${f.status} (${JSON.stringify(o.json)})`,
          );
        // The light get reads fewer columns than ours answers (metadata, identities...): the floor's
        // fields must be ours' where it has them. The others: the very same result, field by field.
        const theirs = f.json?.result ?? {};
        const mine = o.json?.result ?? {};
        const keys = op.allFields ? [...new Set([...Object.keys(mine), ...Object.keys(theirs)])] : Object.keys(theirs);
        for (const k of keys) checked.add(k);
        const differ = keys.filter((k) => JSON.stringify(mine[k]) !== JSON.stringify(theirs[k]));
        if (op.etag && o.etag !== f.etag) differ.push(`ETag (ours ${o.etag}, floor ${f.etag})`);
        if (differ.length > 0)
          b.log(
            `  warning: ${op.label} (${op.against}): the floor's answer differs from ours in ${differ.join(', ')} (ours ${JSON.stringify(mine)}, floor ${JSON.stringify(theirs)})`,
          );
      }
      b.log(
        `  ${op.label} (${op.against}): compared ours' and the floor's answers to 3 requests, ${checked.size} fields${op.etag ? ' and the ETag' : ''}`,
      );
    }
  } finally {
    await ours.stop();
    await floors.ours.stop();
    await floors.light.stop();
  }
}

const fmt = (x: number) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));

export async function hotPathRows(b: HotPathBench): Promise<{ rows: Row[]; notes: string[] }> {
  const started = performance.now();
  const tokens = await seedSessions(b.db.url, b.db.ids, b.sessions);
  let pairs = await sampleMemberships(b.db.url);
  if (pairs.length === 0) pairs = await seedMemberships(b.db.url, b.memberships);
  const memberships = await countMemberships(b.db.url);
  b.log(
    `  seeded ${tokens.length.toLocaleString('en')} live sessions; ${memberships.toLocaleString('en')} memberships (${Math.ceil(memberships / MEMBERS_PER_ORG).toLocaleString('en')} organizations) in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );

  const getById: Make = (i) => ({ path: `/api/1/user/get?_userId=${pick(b.db.ids, i)}` });
  const ops: Operation[] = [
    {
      label: 'get-by-id',
      against: 'same query',
      floorGet: 'ours',
      allFields: true,
      etag: true,
      judged: true,
      make: getById,
      throughput: THROUGHPUT_TARGET,
    },
    {
      // Issue 33's floor (7 columns by id, 7 fields), as the main report measures it: continuity, no target.
      label: 'get-by-id',
      against: 'light query, as issue 33 measured',
      floorGet: 'light',
      allFields: false,
      judged: false,
      make: getById,
    },
    {
      label: 'session/verify',
      against: 'same query',
      floorGet: 'light',
      allFields: true,
      judged: true,
      make: (i) => ({
        method: 'POST',
        path: '/api/1/session/verify',
        body: JSON.stringify({ token: pick(tokens, i) }),
      }),
      before: () => lastSeen(b.db.url, tokens, false),
      throughput: THROUGHPUT_TARGET,
    },
    {
      label: 'org/member/check',
      against: 'same query',
      floorGet: 'light',
      allFields: true,
      judged: true,
      make: (i) => {
        const { orgId, userId } = pick(pairs, i);
        return {
          path: `/api/1/org/member/check?orgId=${orgId}&_userId=${userId}&permission=${PERMISSIONS[i % PERMISSIONS.length]}`,
        };
      },
    },
  ];
  await sameAnswers(b, ops);

  const rows: Row[] = [];
  const missed: string[] = [];
  const floorRss: string[] = [];
  for (const op of ops) {
    const what = `${op.label} (${op.against})`;
    b.log(`  ${op.label}: ours and the node:http floor (${op.against}), ${CONNECTIONS} connections`);
    const ours: Round[] = [];
    const floor: Round[] = [];
    for (let r = 0; r < b.rounds; r++) {
      // Which goes first alternates round by round.
      const sides = [
        () => round(b, b.ours, op).then((x) => ours.push(x)),
        () => round(b, () => b.floor(op.floorGet), op).then((x) => floor.push(x)),
      ];
      if (r % 2 === 1) sides.reverse();
      for (const side of sides) await side();
    }
    for (const [who, rs] of [
      ['ours', ours],
      ['the floor', floor],
    ] as const) {
      const bad = rs.reduce((sum, x) => sum + x.bad, 0);
      if (bad > 0) b.log(`  warning: ${what}: ${who} answered ${bad} non-2xx or errors`);
    }
    b.floorRounds(
      `hot-path: ${op.label} @${CONNECTIONS} (node:http floor, ${op.against})`,
      floor.map((x) => x.rps),
    );
    const of = (rs: Round[], k: 'rps' | 'p50' | 'p99' | 'cpuUs' | 'rssMb') => rs.map((x) => x[k]);
    const m = (rs: Round[], k: 'rps' | 'p50' | 'p99' | 'cpuUs' | 'rssMb') => median(of(rs, k));
    const throughput = m(ours, 'rps') / m(floor, 'rps');
    const tail = m(ours, 'p99') / Math.max(m(floor, 'p99'), 1);
    const cpu = m(ours, 'cpuUs') / m(floor, 'cpuUs');
    const rss = Math.max(...of(ours, 'rssMb'));
    b.log(
      `  ${what}: ours ${m(ours, 'rps').toFixed(0)} req/s p50 ${m(ours, 'p50')} ms p99 ${m(ours, 'p99')} ms ` +
        `${m(ours, 'cpuUs').toFixed(0)} µs CPU/req, peak RSS ${rss.toFixed(0)} MB; ` +
        `floor ${m(floor, 'rps').toFixed(0)} req/s p50 ${m(floor, 'p50')} ms p99 ${m(floor, 'p99')} ms ` +
        `${m(floor, 'cpuUs').toFixed(0)} µs CPU/req, peak RSS ${Math.max(...of(floor, 'rssMb')).toFixed(0)} MB ` +
        `(${throughput.toFixed(2)}×, p99 ${tail.toFixed(2)}×, CPU ${cpu.toFixed(2)}×)`,
    );
    floorRss.push(`${what} ${Math.max(...of(floor, 'rssMb')).toFixed(0)} MB`);
    // Ours' frames once per operation: the light get's pass runs the same server under the same load.
    let frames: string | undefined;
    if (op.judged) {
      await op.before?.();
      frames = await b.profiled(op.make, CONNECTIONS);
      b.log(`  ${op.label}, top frames: ${frames}`);
    }

    const vs = `vs the node:http floor (${op.against})`;
    const name = (what: string) => `${op.label} ${what}, ${CONNECTIONS} connections`;
    rows.push(
      {
        group: 'hot-path',
        name: name(`throughput ${vs}`),
        ours: of(ours, 'rps'),
        baseline: of(floor, 'rps'),
        unit: 'req/s',
        target: op.throughput === undefined ? undefined : `≥ ${op.throughput}×`,
        ok: op.throughput === undefined ? undefined : throughput >= op.throughput,
        frames,
      },
      {
        group: 'hot-path',
        name: name(`p50 ${vs}`),
        ours: of(ours, 'p50'),
        baseline: of(floor, 'p50'),
        unit: 'ms',
        lowerIsBetter: true,
      },
      {
        group: 'hot-path',
        name: name(`p99 ${vs}`),
        ours: of(ours, 'p99'),
        baseline: of(floor, 'p99'),
        unit: 'ms',
        lowerIsBetter: true,
        target: op.judged ? `≤ ${P99_TARGET}×` : undefined,
        ok: op.judged ? tail <= P99_TARGET : undefined,
      },
      {
        group: 'hot-path',
        name: name(`server CPU per request (user + system) ${vs}`),
        ours: of(ours, 'cpuUs'),
        baseline: of(floor, 'cpuUs'),
        unit: 'µs',
        lowerIsBetter: true,
      },
    );
    // Ours' peak RSS is judged once per operation, in its same-query pass.
    if (!op.judged) continue;
    rows.push({
      group: 'hot-path',
      // No baseline: the target is absolute (a ratio to the floor's would chart against it). The floor's is in the notes.
      name: name('peak RSS (VmHWM) of ours at the end of each round (the target on the highest)'),
      ours: of(ours, 'rssMb'),
      unit: 'MB',
      lowerIsBetter: true,
      target: `≤ ${RSS_TARGET_MB} MB`,
      ok: rss <= RSS_TARGET_MB,
    });

    // By how much each missed target is missed, and what the CPU and the frames say bounds it.
    const bound =
      `ours spends ${fmt(m(ours, 'cpuUs'))} µs of server CPU a request against the floor's ${fmt(m(floor, 'cpuUs'))} µs ` +
      `(${cpu.toFixed(2)}×: at the same CPU, about ${(1 / cpu).toFixed(2)}× the floor's requests); ` +
      `its top frames: ${frames || '(no profile)'}`;
    if (op.throughput !== undefined && throughput < op.throughput) {
      const needed = op.throughput * m(floor, 'rps');
      missed.push(
        `- **${what} throughput**: ${throughput.toFixed(2)}× the floor (${m(ours, 'rps').toFixed(0)} against ` +
          `${m(floor, 'rps').toFixed(0)} req/s), target ≥ ${op.throughput}×: short by ${(op.throughput - throughput).toFixed(2)}× ` +
          `(${(needed - m(ours, 'rps')).toFixed(0)} req/s more, ${((needed / m(ours, 'rps') - 1) * 100).toFixed(0)}% above its figure). ` +
          `What bounds it: ${bound}.`,
      );
    }
    if (tail > P99_TARGET) {
      missed.push(
        `- **${what} p99**: ${tail.toFixed(2)}× the floor's (${m(ours, 'p99')} against ${m(floor, 'p99')} ms), ` +
          `target ≤ ${P99_TARGET}×: over by ${(tail - P99_TARGET).toFixed(2)}× (${(m(ours, 'p99') - P99_TARGET * Math.max(m(floor, 'p99'), 1)).toFixed(1)} ms). ` +
          `What bounds it: ${bound}.`,
      );
    }
    if (rss > RSS_TARGET_MB) {
      missed.push(
        `- **${what} peak RSS**: ${rss.toFixed(0)} MB at its highest round, target ≤ ${RSS_TARGET_MB} MB: ` +
          `over by ${(rss - RSS_TARGET_MB).toFixed(0)} MB.`,
      );
    }
  }

  const notes = [
    '**Hot paths** (issue 47, point 3): get-by-id, `session/verify` and `org/member/check`, each against the bare ' +
      '`node:http` floor (`floor-http.ts`) doing the same query as ours: the same SQL text as a prepared statement ' +
      "(`floor-query.ts`: `http/routes/get-user.ts`'s get_user_by_id as drizzle renders it, with the floor started with " +
      "`FLOOR_GET=ours`; `sessions/check.ts`'s check_session; `orgs/check.ts`'s one statement), " +
      'the same row → JSON (for get-by-id every field of `toUser`, identities included, and the ETag; checked equal to ours ' +
      'on 3 requests of each before anything is timed), and nothing else (no API token, site limits, validation, request id or access log). ' +
      "get-by-id is also measured against the floor's light get (7 columns by id alone, no site, origin or deletion condition, " +
      'no identities, 7 fields, no ETag: the floor of issue 33, which the main report keeps), for continuity with those figures ' +
      'only: no target applies to it, and it flatters the floor. ' +
      `Ours and the floor interleaved round by round, each round on freshly started processes after a ${b.warmUpSeconds} s warm-up, ` +
      `${CONNECTIONS} connections. session/verify picks one of ${tokens.length.toLocaleString('en')} live sessions, all marked seen ` +
      "before each round (no request is due the once-a-minute `lastSeenAt` write, ours' or the floor's); " +
      `org/member/check a pair of 20,000 sampled of ${memberships.toLocaleString('en')} memberships and one of three permissions. ` +
      "Server CPU per request: the server process's user + system time (`/proc/<pid>/stat`, 10 ms ticks) over the measured " +
      "seconds, divided by the requests answered in them. Peak RSS: the server's VmHWM (`/proc/<pid>/status`) at the end of " +
      "each round. Targets (issue 47): get-by-id (against the same-query floor) and `session/verify` ≥ 0.6× the floor's " +
      'throughput (org/member/check has none), ' +
      "every p99 ≤ 2× the floor's (autocannon reports whole milliseconds; a floor p99 of 0 counts as 1), peak RSS ≤ 250 MB. " +
      `The floor's own peak RSS, for scale (its highest round): ${floorRss.join(', ')}.`,
    missed.length === 0
      ? '**Targets missed**: none.'
      : ['**Targets missed**, by how much, and what bounds each:', '', ...missed].join('\n'),
  ];
  return { rows, notes };
}
