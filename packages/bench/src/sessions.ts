// The sessions figures of `pnpm bench` (issue 43): `session/verify` against get-by-id (the read a
// site's backend makes most, our baseline) and against Better Auth's get-session (the peer's
// session check), the four servers interleaved round by round with the Hono floor's get-by-id
// beside them (how much the machine varied: `--only sessions` is judged noisy as a full run is);
// then `session/refresh`, each request rotating a distinct live token once.
//
// The sessions are rows inserted with SQL before the load, as the server writes them
// (sessions/issue.ts): a `uas_` token of 256 random bits, its SHA-256 (base64url) stored.
// session/verify writes a session's `lastSeenAt` at most once a minute (sessions/check.ts), so
// what it costs depends on how often each session is seen; a load of a few thousand requests a
// second over 20,000 sessions sees each less than once a minute. Hence two verify figures, each
// set up before each of its rounds: `session/verify` with every session seen less than a minute
// ago (no write: the read path, the one with targets), and `session/verify, lastSeenAt due` on
// sessions of its own, each last seen more than a minute ago (every request writes: the worst case).
import { createHash, randomBytes } from 'node:crypto';
import postgres from 'postgres';
import type { LoadResult, Make, Server } from './load-types.ts';
import { median, type Row } from './report.ts';

type Result = LoadResult;

interface Side {
  name: string;
  start(): Promise<Server>;
  make: Make;
}

export interface SessionsBench {
  /** A seeded database and a sample of its account ids (each given at most one session of each pool). */
  db: { url: string; ids: string[] };
  /** The peer's database, seeded with its own signed-in sessions (bench.ts, peerDatabase). */
  peerDb(): Promise<{ cookies: string[]; drop(): Promise<void> }>;
  ours(): Promise<Server>;
  peer(peerDb: { cookies: string[] }): Promise<Server>;
  floor(): Promise<Server>;
  /** The Hono floor's throughput per round: how much the machine varied (the noise check). */
  floorRounds(rps: number[]): void;
  interleavedAll(sides: Side[], connections: number): Promise<Result[][]>;
  load(url: string, connections: number, seconds: number, make: Make): Promise<Result>;
  /** The top frames of ours under one more run of `make` (profile.ts). */
  profiled(make: Make, connections: number): Promise<string>;
  log(line: string): void;
  rounds: number;
  seconds: number;
  token: string;
  /** Live sessions `session/verify` picks from. */
  sessions: number;
  /** Sessions each last seen more than a minute ago before each round: more than a round's requests. */
  dueSessions: number;
  /** Sessions refreshed once each: more than the refresh rounds use (a token used twice is a reuse). */
  refreshable: number;
}

const CONNECTIONS = 16;
const PICK = 7919;
const pick = <T>(xs: T[], i: number) => xs[(i * PICK) % xs.length]!;

/** A token as sessions/tokens.ts makes one, and the hash it stores. */
export const newToken = () => {
  const token = `uas_${randomBytes(32).toString('base64url')}`;
  return { token, hash: createHash('sha256').update(token).digest('base64url') };
};

/** `count` live sessions of the site `default`, one per account of `ids` (cycled); their tokens. */
export async function seedSessions(url: string, ids: string[], count: number): Promise<string[]> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const tokens: string[] = [];
    for (let from = 0; from < count; from += 10_000) {
      const made = Array.from({ length: Math.min(10_000, count - from) }, newToken);
      const users = made.map((_, k) => ids[(from + k) % ids.length]!);
      await sql`insert into sessions (id, site, user_id, token_hash, created_at, last_seen_at, expires_at,
          idle_seconds, aal, amr, user_agent, ip)
        select gen_random_uuid(), 'default', u, h, now() - interval '1 hour', now() - random() * interval '60 seconds',
          now() + interval '30 days', 604800, 1, '["pwd"]'::jsonb, 'autocannon', '127.0.0.1'
        from unnest(${users}::uuid[], ${made.map((m) => m.hash)}::text[]) as t(u, h)`;
      tokens.push(...made.map((m) => m.token));
    }
    await sql`vacuum analyze sessions`;
    return tokens;
  } finally {
    await sql.end();
  }
}

const post = async (url: string, token: string, path: string, body: unknown) => {
  const response = await fetch(`${url}${path}`, {
    method: 'POST',
    headers: { authorization: token, 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, json: (await response.json().catch(() => null)) as any };
};

/** Sets the `last_seen_at` of the sessions of `tokens` (all seen now, or all due their minute's write). */
export async function lastSeen(url: string, tokens: string[], due: boolean): Promise<void> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const hashes = tokens.map((t) => createHash('sha256').update(t).digest('base64url'));
    await sql`update sessions set last_seen_at = now() - ${due ? '61 seconds' : '0 seconds'}::interval
      where token_hash = any(${hashes}::text[])`;
    // The update leaves a dead version of each row: gone before the load, as autovacuum would.
    await sql`vacuum analyze sessions`;
  } finally {
    await sql.end();
  }
}

export async function sessionRows(b: SessionsBench): Promise<Row[]> {
  const started = performance.now();
  const live = await seedSessions(b.db.url, b.db.ids, b.sessions);
  const due = await seedSessions(b.db.url, b.db.ids, b.dueSessions);
  const refreshable = await seedSessions(b.db.url, b.db.ids, b.refreshable + 1);
  b.log(
    `  seeded ${live.length.toLocaleString('en')} live sessions, ${due.length.toLocaleString('en')} due their lastSeenAt write and ${refreshable.length.toLocaleString('en')} to refresh in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  const peerDb = await b.peerDb();
  try {
    const getById: Make = (i) => ({ path: `/api/1/user/get?_userId=${pick(b.db.ids, i)}` });
    const verifyOf =
      (tokens: string[]): Make =>
      (i) => ({ method: 'POST', path: '/api/1/session/verify', body: JSON.stringify({ token: pick(tokens, i) }) });
    const verify = verifyOf(live);
    const getSession: Make = (i) => ({ path: '/api/auth/get-session', headers: { cookie: pick(peerDb.cookies, i) } });

    // Each path answers as meant before it is timed: a live session is valid, an unknown one the miss,
    // a refresh rotates, and the peer's get-session knows its cookie (it answers 200 `null` otherwise).
    const check = await b.ours();
    try {
      const valid = await post(check.url, b.token, '/api/1/session/verify', { token: live[0] });
      if (valid.status !== 200 || valid.json?.result?.status !== 'session valid')
        throw new Error(`session/verify answered ${valid.status} ${JSON.stringify(valid.json)}`);
      const miss = await post(check.url, b.token, '/api/1/session/verify', { token: newToken().token });
      if (miss.status !== 422 || miss.json?.code !== 'invalid_session')
        throw new Error(`session/verify of an unknown token answered ${miss.status} ${JSON.stringify(miss.json)}`);
      const refreshed = await post(check.url, b.token, '/api/1/session/refresh', { token: refreshable.pop() });
      if (refreshed.status !== 200 || !String(refreshed.json?.result?.session?.token).startsWith('uas_'))
        throw new Error(`session/refresh answered ${refreshed.status} ${JSON.stringify(refreshed.json)}`);
    } finally {
      await check.stop();
    }
    const checkPeer = await b.peer(peerDb);
    try {
      const r = getSession(0);
      const response = await fetch(`${checkPeer.url}${r.path}`, { headers: { origin: checkPeer.url, ...r.headers } });
      const body = (await response.json().catch(() => null)) as any;
      if (response.status !== 200 || typeof body?.user?.id !== 'string')
        throw new Error(`the peer's get-session answered ${response.status} ${JSON.stringify(body)}`);
    } finally {
      await checkPeer.stop();
    }

    b.log(
      `  session/verify (seen, and due), get-by-id, the peer's get-session and the Hono floor, ${CONNECTIONS} connections`,
    );
    const [f, v, g, p, d] = (await b.interleavedAll(
      [
        { name: 'the Hono floor', start: b.floor, make: getById },
        {
          name: 'session/verify',
          start: async () => {
            await lastSeen(b.db.url, live, false);
            return b.ours();
          },
          make: verify,
        },
        { name: 'get-by-id', start: b.ours, make: getById },
        { name: "the peer's get-session", start: () => b.peer(peerDb), make: getSession },
        {
          name: 'session/verify, lastSeenAt due',
          start: async () => {
            await lastSeen(b.db.url, due, true);
            return b.ours();
          },
          make: verifyOf(due),
        },
      ],
      CONNECTIONS,
    )) as [Result[], Result[], Result[], Result[], Result[]];
    b.floorRounds(f.map((x) => x.rps));
    // Each request of the due side must find a session not seen this minute: no session twice in a round.
    const dueUsed = Math.max(...d.map((x) => x.rps)) * (b.seconds + 1);
    if (dueUsed > due.length)
      b.log(
        `  warning: about ${dueUsed.toFixed(0)} requests a round for ${due.length} due sessions: some saw one twice`,
      );
    const rps = (rs: Result[]) => rs.map((x) => x.rps);
    const p50 = (rs: Result[]) => rs.map((x) => x.p50);
    const p99 = (rs: Result[]) => rs.map((x) => x.p99);
    const ratio = (a: Result[], c: Result[]) => median(rps(a)) / median(rps(c));
    b.log(
      `  session/verify ${median(rps(v)).toFixed(0)} req/s p99 ${median(p99(v))} ms; get-by-id ${median(rps(g)).toFixed(0)} req/s p99 ${median(p99(g))} ms; ` +
        `peer get-session ${median(rps(p)).toFixed(0)} req/s p99 ${median(p99(p))} ms; Hono floor ${median(rps(f)).toFixed(0)} req/s; ` +
        `session/verify, lastSeenAt due ${median(rps(d)).toFixed(0)} req/s p99 ${median(p99(d))} ms`,
    );
    await lastSeen(b.db.url, live, false);
    const frames = await b.profiled(verify, CONNECTIONS);
    b.log(`  session/verify, top frames: ${frames}`);

    // Refresh: one server, each request a distinct token rotated once (a write: the rotation, its audit row).
    b.log(
      `  session/refresh, ${CONNECTIONS} connections, each of ${refreshable.length.toLocaleString('en')} tokens once`,
    );
    let next = 0;
    const refresh: Make = () => ({
      method: 'POST',
      path: '/api/1/session/refresh',
      // Past the pool, an unknown token: a 422, counted below.
      body: JSON.stringify({ token: refreshable[next++] ?? newToken().token }),
    });
    const refreshes: Result[] = [];
    const server = await b.ours();
    try {
      await b.load(server.url, CONNECTIONS, 1, refresh);
      for (let r = 0; r < b.rounds; r++) refreshes.push(await b.load(server.url, CONNECTIONS, b.seconds, refresh));
    } finally {
      await server.stop();
    }
    const bad = refreshes.reduce((sum, r) => sum + r.bad, 0);
    if (next > refreshable.length)
      b.log(`  warning: the refresh pool ran out (${next} requests for ${refreshable.length} tokens): raise it`);
    else if (bad > 0) b.log(`  warning: session/refresh answered ${bad} non-2xx or errors`);
    b.log(
      `  session/refresh ${median(rps(refreshes)).toFixed(0)} req/s p50 ${median(p50(refreshes))} ms p99 ${median(p99(refreshes))} ms (${next} tokens used)`,
    );

    return [
      {
        group: 'sessions',
        name: `session/verify vs get-by-id, throughput, ${CONNECTIONS} connections`,
        ours: rps(v),
        baseline: rps(g),
        unit: 'req/s',
        target: '≥ 1.0×',
        ok: ratio(v, g) >= 1,
        frames,
      },
      {
        group: 'sessions',
        name: `session/verify vs get-by-id, p99, ${CONNECTIONS} connections`,
        ours: p99(v),
        baseline: p99(g),
        unit: 'ms',
        lowerIsBetter: true,
      },
      {
        group: 'sessions',
        name: `session/verify vs Better Auth get-session, throughput, ${CONNECTIONS} connections`,
        ours: rps(v),
        baseline: rps(p),
        unit: 'req/s',
        target: '≥ 5×',
        ok: ratio(v, p) >= 5,
      },
      {
        group: 'sessions',
        name: `session/verify vs Better Auth get-session, p99, ${CONNECTIONS} connections`,
        ours: p99(v),
        baseline: p99(p),
        unit: 'ms',
        lowerIsBetter: true,
      },
      {
        group: 'sessions',
        name: `session/verify, every session due its once-a-minute lastSeenAt write (each request writes) vs get-by-id, throughput, ${CONNECTIONS} connections`,
        ours: rps(d),
        baseline: rps(g),
        unit: 'req/s',
      },
      {
        group: 'sessions',
        name: `session/verify, every session due its lastSeenAt write vs get-by-id, p99, ${CONNECTIONS} connections`,
        ours: p99(d),
        baseline: p99(g),
        unit: 'ms',
        lowerIsBetter: true,
      },
      {
        group: 'sessions',
        name: `session/verify vs the Hono floor's get-by-id, throughput, ${CONNECTIONS} connections`,
        ours: rps(v),
        baseline: rps(f),
        unit: 'req/s',
      },
      {
        group: 'sessions',
        name: `session/refresh throughput (each token rotated once), ${CONNECTIONS} connections`,
        ours: rps(refreshes),
        unit: 'req/s',
      },
      {
        group: 'sessions',
        name: `session/refresh p50, ${CONNECTIONS} connections`,
        ours: p50(refreshes),
        unit: 'ms',
        lowerIsBetter: true,
      },
      {
        group: 'sessions',
        name: `session/refresh p99, ${CONNECTIONS} connections`,
        ours: p99(refreshes),
        unit: 'ms',
        lowerIsBetter: true,
      },
    ];
  } finally {
    await peerDb.drop();
  }
}

export const SESSION_NOTES = [
  '**Sessions** (issue 43): sessions inserted as the server makes them (a `uas_` token, its SHA-256 stored). ' +
    '`session/verify` (POST, a token of one of 20,000 sessions, each seen less than a minute before its round, so ' +
    'that no request is due the once-a-minute `lastSeenAt` write: the read path, as a session used more than once a ' +
    "minute has it), our get-by-id, the peer's get-session (a cookie of one of its 20,000 sessions, read from the " +
    "database: no cookie cache), the Hono floor's get-by-id and `session/verify` on sessions all last seen more than " +
    'a minute before (each request writes `lastSeenAt`: the worst case, no target) are interleaved round by round, ' +
    'each round on freshly started processes. `session/refresh` runs on one server, each request rotating a ' +
    'distinct token once (a write transaction: the rotation and its audit row), no target. Access tokens are ' +
    'signed by whatever signer the server is built with (at this commit, the placeholder of sessions/access-tokens.ts, ' +
    "unsigned: the ES256 signature is not yet in refresh's figure).",
];
