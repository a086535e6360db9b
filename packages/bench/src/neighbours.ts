// The noisy-neighbour figures of `pnpm bench` (issue 26, "one site cannot hurt another"): one
// server, two sites with their own tokens, "shop" (the victim) and "evil" (the attacker). Shop
// sends a steady open-loop load (get by id, verify with the right password, and updates whose
// webhooks go to a receiver on this machine that answers 204); each phase measures its latency
// and success, quiet (three times, between the attacks) and while evil attacks: (a) wrong
// verifies against imported PBKDF2 hashes of 5,000,000 rounds, (b) as many 30 s long-polls as it
// can hold, (c) a webhook endpoint that accepts connections and never answers, with a backlog of
// deliveries; (d) creates and dry-run imports whose metadata its own schema checks at length
// (issue 41, F1); (e) heavy reads (issue 41, F2), each in 8 loops: lists of 1,000 over 200
// accounts of 63 KiB, exports of them, and a person's data of an account with ~6 MB of events;
// then (a)–(c) together. `/healthz` is timed every 50 ms while shop is measured. Each attacked
// figure is reported as a ratio to the median of the quiet phases of the same run. The server
// runs with its default limits (the rest of the bench lifts the rate limits): they are part of
// the walls.
import { spawn, spawnSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { createServer as createTcpServer, type Socket } from 'node:net';
import { cpus, loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { openPostgres } from '@user-accounts/server/db';
import { createToken, type Scope } from '@user-accounts/server/tokens';
import postgres from 'postgres';
import { bigAccounts } from '../../contract-tests/src/big-accounts.ts';
import { heavyReads, hoarder, type PostLoop, postLoops } from '../../contract-tests/src/heavy-reader.ts';
import { median, type Row } from './report.ts';

const CLI = fileURLToPath(new URL('../../server/dist/cli.js', import.meta.url));

interface Server {
  url: string;
  /** The server's process: its CPU time is read from /proc. */
  child: { pid?: number | undefined };
  stop(): Promise<void>;
}

/** A process's CPU seconds so far (user and system), from /proc/PID/stat; 0 where there is no /proc. */
function cpuSeconds(pid: number | undefined): number {
  try {
    // The fields after the command's closing parenthesis: utime and stime are the 12th and 13th.
    const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

export interface NeighboursBench {
  /** A migrated database (the bench's 100,000 accounts of site `default`); shop's accounts are added to it. */
  db: { url: string };
  password: string;
  /** `password` hashed as the server hashes it (argon2id, its default parameters). */
  passwordHash: string;
  ours(db: { url: string }, env?: Record<string, string>): Promise<Server>;
  log(line: string): void;
  /** Seconds each phase measures (at least 8: a p99 needs a few hundred requests). */
  seconds: number;
  /** `heavy-reads`: the quiet phases and the heavy reads' alone (`--only heavy-reads`); otherwise every phase. */
  only?: 'heavy-reads';
}

/** The attacks of one phase. */
type Attack =
  | 'costly'
  | 'polls'
  | 'webhook'
  | 'schema'
  | 'lateSchema'
  | 'roles'
  | 'row'
  | 'rows'
  | 'list'
  | 'export'
  | 'data';
/** Issue 41, F2: reads whose answers are megabytes, bounded per site by HEAVY_READS_PER_SITE. */
const HEAVY_READS: Attack[] = ['list', 'export', 'data'];
interface Phase {
  key: string;
  /** In the rows' names. */
  short: string;
  label: string;
  attacks: Attack[];
}
// Three quiet phases between the attacks: the baseline is their median, figure by figure, since
// on a shared machine one quiet phase alone can be the slowest of the run. The webhook attack's
// backlog stays until evil's endpoint is removed (before the last quiet phase), so it comes late.
const PHASES: Phase[] = [
  { key: 'quiet1', short: 'quiet (1)', label: 'quiet (1)', attacks: [] },
  {
    key: 'costly',
    short: 'costly verifies',
    label: 'evil: 8 loops of wrong verifies against PBKDF2-SHA512 5,000,000 rounds',
    attacks: ['costly'],
  },
  {
    key: 'polls',
    short: 'long-polls',
    label: 'evil: 200 long-polls (wait=30) attempted, 4 tokens',
    attacks: ['polls'],
  },
  {
    key: 'schema',
    short: 'costly schema checks',
    label:
      "evil: metadata its own schema's patterns check at length (issue 41): 2 loops of creates, 1 of dry-run imports of 30 rows",
    attacks: ['schema'],
  },
  {
    key: 'lateSchema',
    short: 'schema checks past their deadline',
    label:
      'evil: 8 loops of creates whose metadata `[ab]*a[ab]{999}$` checks over 60 KB, each past the 250 ms deadline (issue 57, G2)',
    attacks: ['lateSchema'],
  },
  {
    key: 'roles',
    short: 'org/roles under the lock',
    label: `evil: 24 loops of \`org/roles\` leaving out a role ${(20_000).toLocaleString('en')} members hold (issue 57, G1)`,
    attacks: ['roles'],
  },
  {
    key: 'row',
    short: "one account's updates",
    label: 'evil: 24 loops of updates of one account (issue 57, G1)',
    attacks: ['row'],
  },
  {
    key: 'rows',
    short: "24 accounts' updates",
    label: 'evil: 24 loops, each updating an account of its own (issue 57, G12)',
    attacks: ['rows'],
  },
  {
    key: 'list',
    short: 'heavy lists',
    label: `evil: 8 loops of \`GET /api/1/user/list?limit=1000\` over 200 accounts of 63 KiB (issue 41, F2)`,
    attacks: ['list'],
  },
  { key: 'quiet2', short: 'quiet (2)', label: 'quiet (2)', attacks: [] },
  {
    key: 'export',
    short: 'heavy exports',
    label: 'evil: 8 loops of `GET /api/1/user/export` over the same (issue 41, F2)',
    attacks: ['export'],
  },
  {
    key: 'data',
    short: "heavy person's data",
    label: 'evil: 8 loops of `GET /api/1/user/data` of an account with ~6 MB of events (issue 41, F2)',
    attacks: ['data'],
  },
  {
    key: 'webhook',
    short: 'dead webhook endpoint',
    label: "evil: a webhook endpoint that never answers, 200 imports' deliveries queued",
    attacks: ['webhook'],
  },
  { key: 'all', short: 'all three', label: 'evil: all three at once', attacks: ['costly', 'polls', 'webhook'] },
  { key: 'quiet3', short: 'quiet (3)', label: "quiet (3), evil's endpoint removed", attacks: [] },
];

/** Shop's steady load, per second: what a small busy site sends. */
const GETS_PER_S = 50;
const VERIFIES_PER_S = 10;
const UPDATES_PER_S = 10;
const SHOP_ACCOUNTS = 2_000;
/** A request of shop's not answered by then counts as failed (the server's own deadline is 10 s). */
const CLIENT_TIMEOUT_MS = 15_000;
const COSTLY_ACCOUNTS = 50;
const COSTLY_LOOPS = 8;
const POLLS = 200;
const POLL_TOKENS = 4;
const WEBHOOK_IMPORT = 200;
const SCHEMA_LOOPS = 2;
const SCHEMA_IMPORT_ROWS = 30;
const HEAVY_LOOPS = 8;
const BIG_ACCOUNTS = 200;
const BIG_KIB = 63;
/** Updates of the hoarder's account, 62 KiB of metadata each: its person's data about 6 MB before issue 41. */
const HOARDER_UPDATES = 100;
const HEALTH_EVERY_MS = 50;

/**
 * Evil's metadata schema (issue 41, F1): what `metadata-schema set` accepts, at its costliest. A
 * backtracking `^(a+)+$` (27 s over 31 characters before RE2), and twenty patterns that defeat
 * RE2's DFA (each some 0.3–0.6 s over 60 KB of random text, matched only at its very end).
 */
const EVIL_SCHEMA = {
  properties: {
    code: { type: 'string', pattern: '^(a+)+$' },
    x: { type: 'string', allOf: Array.from({ length: 20 }, (_, i) => ({ pattern: `[ab]*a[ab]{${20 + i}}$` })) },
  },
};
function costlyMetadata(): { code: string; x: string } {
  const text = Array.from({ length: 60_000 }, () => (Math.random() < 0.5 ? 'a' : 'b')).join('');
  return { code: `${'a'.repeat(27)}!`, x: `${text}${'a'.repeat(41)}` };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const percentile = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.max(0, Math.ceil((p / 100) * xs.length) - 1)] ?? Number.NaN;
/** passlib's adapted base64 (no padding, '.' for '+'), as its PBKDF2 hashes are written. */
const b64 = (n: number) => randomBytes(n).toString('base64').replaceAll('=', '').replaceAll('+', '.');

function runCli(args: string[], env: Record<string, string>): Promise<string> {
  const child = spawn(process.execPath, [CLI, ...args], { env: { PATH: process.env.PATH ?? '', ...env } });
  let out = '';
  child.stdout.on('data', (c: Buffer) => {
    out += c.toString();
  });
  child.stderr.on('data', (c: Buffer) => {
    out += c.toString();
  });
  return new Promise((resolve, reject) =>
    child.on('close', (code) => (code === 0 ? resolve(out) : reject(new Error(`cli ${args.join(' ')}: ${out}`)))),
  );
}

const git = (args: string[]) =>
  spawnSync('git', args, { cwd: fileURLToPath(new URL('.', import.meta.url)), encoding: 'utf8' }).stdout?.trim() ?? '';

interface Sample {
  ms: number;
  ok: boolean;
}

/** Sends `send(i)` `rate` times a second for `ms`, whatever the answers (an open loop); the samples once all are answered. */
async function paced(rate: number, ms: number, send: (i: number) => Promise<boolean>): Promise<Sample[]> {
  const samples: Sample[] = [];
  const inFlight: Promise<void>[] = [];
  const started = performance.now();
  for (let i = 0; performance.now() - started < ms; i++) {
    const wait = started + (i * 1000) / rate - performance.now();
    if (wait > 0) await sleep(wait);
    const t0 = performance.now();
    inFlight.push(
      send(i).then(
        (ok) => {
          samples.push({ ms: performance.now() - t0, ok });
        },
        () => {
          samples.push({ ms: performance.now() - t0, ok: false });
        },
      ),
    );
  }
  await Promise.all(inFlight);
  return samples;
}

interface Figures {
  get: Sample[];
  verify: Sample[];
  update: Sample[];
  /** Write to receipt at shop's receiver, ms, for this phase's updates. */
  hooks: number[];
  evil: string[];
  /** The server's CPU use while shop was measured, in cores (1 = one core busy), and in the 2 s after evil stopped. */
  cpu: number;
  cpuAfter: number;
  /** The longest `GET /healthz` (asked every 50 ms) took while shop was measured, ms. */
  healthMax: number;
}

const stats = (samples: Sample[]) => ({
  p50: Math.round(
    percentile(
      samples.map((s) => s.ms),
      50,
    ),
  ),
  p99: Math.round(
    percentile(
      samples.map((s) => s.ms),
      99,
    ),
  ),
  success: (100 * samples.filter((s) => s.ok).length) / Math.max(1, samples.length),
});

export async function neighbourRows(b: NeighboursBench): Promise<{ rows: Row[]; notes: string[] }> {
  const { log } = b;
  const phases =
    b.only === 'heavy-reads' ? PHASES.filter((p) => p.attacks.every((a) => HEAVY_READS.includes(a))) : PHASES;
  const heavy = phases.some((p) => p.attacks.some((a) => HEAVY_READS.includes(a)));
  const phaseMs = Math.max(8, b.seconds) * 1000;
  const loadBefore = loadavg();

  // ---- the two sites: accounts, tokens, webhook endpoints --------------------------------------
  const sql = postgres(b.db.url, { max: 1, onnotice: () => {} });
  const shopAccounts = await sql<{ id: string; email: string }[]>`
    insert into users (id, site, email, name, password_hash, origin, created_at)
    select gen_random_uuid(), 'shop', 'customer' || i || '@shop.example.com', 'Customer ' || i, ${b.passwordHash}, 'api',
      timestamptz '2026-01-01' + i * interval '1 second'
    from generate_series(1, ${SHOP_ACCOUNTS}) as i
    returning id, email`;
  // Evil's big accounts for the heavy reads, written as the contract test writes them.
  if (heavy)
    await bigAccounts(
      { sql: (query, params = []) => sql.unsafe(query, params as never[]) },
      'evil',
      BIG_ACCOUNTS,
      BIG_KIB,
    );
  await sql`analyze users`;
  await sql.end();
  const database = await openPostgres(b.db.url);
  const mint = async (site: string, scopes: Scope[], label: string) =>
    (await createToken(database.db, { site, scopes, label })).token;
  const shopToken = await mint('shop', ['read', 'write', 'verify'], 'bench shop');
  const evilToken = await mint('evil', ['write', 'verify'], 'bench evil');
  const pollTokens: string[] = [];
  for (let t = 0; t < POLL_TOKENS; t++) pollTokens.push(await mint('evil', ['events'], `bench evil poller ${t}`));
  const readerToken = await mint('evil', ['read', 'export'], 'bench evil reader');
  await database.close();

  // Shop's receiver answers at once; each update names its phase, so a late delivery counts where it was written.
  const hooks = new Map<string, number[]>(phases.map((p) => [p.key, []]));
  const receiver = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => {
      body += c.toString();
    });
    req.on('end', () => {
      const event = JSON.parse(body) as { time: string; data: { name?: string } };
      const phase = /^Shop (\w+) /.exec(event.data.name ?? '')?.[1];
      if (phase !== undefined) hooks.get(phase)?.push(Date.now() - Date.parse(event.time));
      res.writeHead(204).end();
    });
  });
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  // Evil's endpoint accepts the connection, reads the request and never answers.
  const held = new Set<Socket>();
  const dead = createTcpServer((socket) => {
    held.add(socket);
    socket.on('error', () => {});
    socket.on('close', () => held.delete(socket));
    socket.resume();
  });
  await new Promise<void>((resolve) => dead.listen(0, '127.0.0.1', resolve));
  const cliEnv = { DATABASE_URL: b.db.url, WEBHOOK_ALLOW_PRIVATE: 'true' };
  const hookUrl = (s: { address(): AddressInfo | string | null }) =>
    `http://127.0.0.1:${(s.address() as AddressInfo).port}/`;
  const endpointId = (out: string) => /Added webhook ([0-9a-f-]{36})/.exec(out)![1]!;
  const shopEndpoint = endpointId(
    await runCli(['webhook', 'add', '--site', 'shop', '--url', hookUrl(receiver)], cliEnv),
  );
  let evilEndpoint: string | undefined;

  // The server's default limits, written out: the rest of the bench lifts them, here they are walls.
  const server = await b.ours(b.db, {
    RATE_LIMIT: '6000/60s',
    RATE_LIMIT_HASH: '6000/60s',
    WEBHOOK_ALLOW_PRIVATE: 'true',
  });
  const call = (token: string, path: string, body?: unknown, signal?: AbortSignal) =>
    fetch(`${server.url}${path}`, {
      method: body === undefined ? 'GET' : 'POST',
      headers: { authorization: token, 'content-type': 'application/json' },
      body: body === undefined ? null : JSON.stringify(body),
      signal: signal ?? AbortSignal.timeout(CLIENT_TIMEOUT_MS),
    });
  const importAs = async (users: unknown[]) => {
    const response = await call(evilToken, '/api/1/user/import', { users });
    const text = await response.text();
    if (response.status !== 200) throw new Error(`evil's import answered ${response.status}: ${text}`);
  };

  // Evil's costly accounts, imported before anything is measured (the import itself hashes nothing).
  const costly = Array.from({ length: COSTLY_ACCOUNTS }, (_, i) => ({
    email: `bomb.${i}@evil.example.com`,
    name: 'Bomb',
    passwordHash: `$pbkdf2-sha512$5000000$${b64(16)}$${b64(64)}`,
  }));
  await importAs(costly);
  // The hoarder: one account of evil's whose person's data is megabytes (its events' metadata).
  const hoarderId = heavy ? await hoarder(server.url, evilToken, HOARDER_UPDATES) : '';
  let imported = 0;
  const importPlain = () =>
    importAs(
      Array.from({ length: WEBHOOK_IMPORT }, () => ({
        email: `filler.${imported++}@evil.example.com`,
        name: 'Filler',
        passwordHash: b.passwordHash,
      })),
    );

  // ---- evil's attacks: each starts, and returns a stop that says what evil got -------------------
  /** HEAVY_LOOPS loops of GETs of `path`, in a thread of their own (reading megabytes is not the measuring thread's work). */
  const heavyAttack = async (name: string, path: string) => {
    const attacker = heavyReads(`${server.url}${path}`, readerToken, HEAVY_LOOPS);
    return async () => {
      const statuses = await attacker.stop();
      return `${name}: ${Object.entries(statuses)
        .map(([s, n]) => `${n}× ${s === '0' ? 'failed' : s === '-1' ? 'abandoned at the stop' : s}`)
        .join(', ')}`;
    };
  };
  /** Loops of writes in a thread of their own (postLoops); the stop says how evil's answers went. */
  const writeLoops = (name: string, loops: PostLoop[]) => {
    const attacker = postLoops(server.url, loops);
    return async () => {
      await attacker.stop();
      const statuses = new Map<number, number>();
      for (const status of attacker.answers) statuses.set(status, (statuses.get(status) ?? 0) + 1);
      return `${name}: ${[...statuses].map(([st, n]) => `${n}× ${st}`).join(', ')}`;
    };
  };
  const attacks: Record<Attack, () => Promise<() => Promise<string>>> = {
    async costly() {
      const stop = new AbortController();
      const statuses = new Map<string, number>();
      const loops = Array.from({ length: COSTLY_LOOPS }, async (_, loop) => {
        for (let n = 0; !stop.signal.aborted; n++) {
          const email = costly[(loop + COSTLY_LOOPS * n) % COSTLY_ACCOUNTS]!.email;
          const status = await call(evilToken, '/api/1/user/verify', { email, password: 'a wrong guess' }, stop.signal)
            .then(async (r) => {
              await r.arrayBuffer();
              return String(r.status);
            })
            .catch(() => (stop.signal.aborted ? 'abandoned' : 'error'));
          statuses.set(status, (statuses.get(status) ?? 0) + 1);
        }
      });
      return async () => {
        stop.abort();
        await Promise.all(loops);
        return `costly verifies: ${[...statuses].map(([s, n]) => `${n}× ${s}`).join(', ')}`;
      };
    },

    async polls() {
      // From the site's latest event on, as a client that follows the feed does: a poll waits.
      let after = '0';
      for (;;) {
        const r = await call(pollTokens[0]!, `/api/1/events?after=${after}&limit=1000`);
        const page = ((await r.json()) as { result: { events: unknown[]; next: string } }).result;
        after = page.next;
        if (page.events.length === 0) break;
      }
      const stop = new AbortController();
      const started = new Map<number, number>();
      let refused = 0;
      let answered = 0;
      let mostHeld = 0;
      const watch = setInterval(() => {
        const now = performance.now();
        let waiting = 0;
        for (const t of started.values()) if (now - t > 500) waiting++;
        mostHeld = Math.max(mostHeld, waiting);
      }, 250);
      const loops = Array.from({ length: POLLS }, async (_, loop) => {
        const token = pollTokens[loop % POLL_TOKENS]!;
        while (!stop.signal.aborted) {
          started.set(loop, performance.now());
          try {
            const r = await call(token, `/api/1/events?after=${after}&wait=30`, undefined, stop.signal);
            const body = (await r.json()) as { result?: { next?: string } };
            started.delete(loop);
            if (r.status === 429) {
              refused++;
              // As a client that honours Retry-After: it comes back as soon as it may.
              await sleep(1000 * Number(r.headers.get('retry-after') ?? 1));
            } else {
              answered++;
              if (r.status === 200 && body.result?.next !== undefined) after = body.result.next;
            }
          } catch {
            started.delete(loop);
          }
        }
      });
      return async () => {
        stop.abort();
        clearInterval(watch);
        await Promise.all(loops);
        return `long-polls: at most ${mostHeld} held at once, ${refused} answered 429, ${answered} otherwise`;
      };
    },

    async schema() {
      const file = join(mkdtempSync(join(tmpdir(), 'bench-schema-')), 'evil.json');
      writeFileSync(file, JSON.stringify(EVIL_SCHEMA));
      await runCli(['metadata-schema', 'set', '--site', 'evil', file], cliEnv);
      const metadata = costlyMetadata();
      const stop = new AbortController();
      const statuses = new Map<string, number>();
      let n = 0;
      const send = async (path: string, body: unknown) => {
        const status = await call(evilToken, path, body, stop.signal)
          .then(async (r) => {
            await r.arrayBuffer();
            return `${path.slice('/api/1/user/'.length)} ${r.status}`;
          })
          .catch(() => (stop.signal.aborted ? 'abandoned' : 'error'));
        statuses.set(status, (statuses.get(status) ?? 0) + 1);
      };
      const user = () => ({ email: `schema.${n++}@evil.example.com`, name: 'Evil', password: b.password, metadata });
      const loops = [
        ...Array.from({ length: SCHEMA_LOOPS }, async () => {
          while (!stop.signal.aborted) await send('/api/1/user/create', user());
        }),
        (async () => {
          while (!stop.signal.aborted) {
            await send('/api/1/user/import', { dryRun: true, users: Array.from({ length: SCHEMA_IMPORT_ROWS }, user) });
          }
        })(),
      ];
      return async () => {
        stop.abort();
        await Promise.all(loops);
        await runCli(['metadata-schema', 'clear', '--site', 'evil'], cliEnv);
        return `costly schema checks: ${[...statuses].map(([s, k]) => `${k}× ${s}`).join(', ')}`;
      };
    },

    async lateSchema() {
      const file = join(mkdtempSync(join(tmpdir(), 'bench-schema-')), 'evil.json');
      writeFileSync(file, JSON.stringify({ properties: { x: { type: 'string', pattern: '[ab]*a[ab]{999}$' } } }));
      await runCli(['metadata-schema', 'set', '--site', 'evil', file], cliEnv);
      const x = `${costlyMetadata().x}${'a'.repeat(1000)}`;
      const body = JSON.stringify({
        email: 'late.%N%@evil.example.com',
        name: 'Evil',
        password: b.password,
        metadata: { x },
      });
      const stop = writeLoops(
        'schema checks past their deadline',
        Array.from({ length: 8 }, () => ({ path: '/api/1/user/create', token: evilToken, body })),
      );
      return async () => {
        const said = await stop();
        await runCli(['metadata-schema', 'clear', '--site', 'evil'], cliEnv);
        return said;
      };
    },
    async roles() {
      const roles = [
        { role: 'member', permissions: ['read'] },
        { role: 'admin', permissions: ['read', 'write'] },
      ];
      await (await call(evilToken, '/api/1/org/roles', { roles })).arrayBuffer();
      const created = await call(evilToken, '/api/1/org/create', { name: 'Evil' });
      const orgId = ((await created.json()) as { result: { orgId: string } }).result.orgId;
      const direct = postgres(b.db.url, { max: 1, onnotice: () => {} });
      await direct.unsafe(
        `insert into users (site, email, name, origin) select 'evil', 'member.' || i || '@evil.example.com', 'Member', 'api'
         from generate_series(1, 20000) i`,
      );
      await direct.unsafe(
        `insert into org_memberships (org_id, user_id, site, roles)
         select $1, id, 'evil', array['member'] from users where site = 'evil' and email like 'member.%'`,
        [orgId],
      );
      await direct.end();
      const body = JSON.stringify({ roles: [{ role: 'admin', permissions: ['read'] }] });
      return writeLoops(
        'org/roles',
        Array.from({ length: 24 }, () => ({ path: '/api/1/org/roles', token: evilToken, body })),
      );
    },
    async row() {
      const created = await call(evilToken, '/api/1/user/create', {
        email: `row.${Date.now()}@evil.example.com`,
        name: 'Row',
        password: b.password,
      });
      const _userId = ((await created.json()) as { result: { _userId: string } }).result._userId;
      const body = JSON.stringify({ _userId, metadata: { x: '%N%' } });
      return writeLoops(
        "one account's updates",
        Array.from({ length: 24 }, () => ({ path: '/api/1/user/update', token: evilToken, body })),
      );
    },
    async rows() {
      const loops: PostLoop[] = [];
      for (let i = 0; i < 24; i++) {
        const created = await call(evilToken, '/api/1/user/create', {
          email: `rows.${i}.${Date.now()}@evil.example.com`,
          name: 'Rows',
          password: b.password,
        });
        const _userId = ((await created.json()) as { result: { _userId: string } }).result._userId;
        loops.push({
          path: '/api/1/user/update',
          token: evilToken,
          body: JSON.stringify({ _userId, metadata: { x: '%N%' } }),
        });
      }
      return writeLoops("24 accounts' updates", loops);
    },

    list: () => heavyAttack('lists', '/api/1/user/list?limit=1000'),
    export: () => heavyAttack('exports', '/api/1/user/export'),
    data: () => heavyAttack("person's data", `/api/1/user/data?_userId=${hoarderId}`),

    async webhook() {
      if (evilEndpoint === undefined)
        evilEndpoint = endpointId(await runCli(['webhook', 'add', '--site', 'evil', '--url', hookUrl(dead)], cliEnv));
      await importPlain();
      return async () => `dead endpoint: ${held.size} connections held open now, ${imported} accounts imported so far`;
    },
  };

  // ---- the phases ---------------------------------------------------------------------------------
  const figures = new Map<string, Figures>();
  let updated = 0;
  const answer = (r: Response) => r.arrayBuffer().then(() => r.status === 200);
  /** Shop's load for `ms`, its updates named after `key`. */
  const shop = (key: string, ms: number) =>
    Promise.all([
      paced(GETS_PER_S, ms, (i) =>
        call(shopToken, `/api/1/user/get?_userId=${shopAccounts[(i * 7919) % SHOP_ACCOUNTS]!.id}`).then(answer),
      ),
      paced(VERIFIES_PER_S, ms, (i) =>
        call(shopToken, '/api/1/user/verify', {
          email: shopAccounts[(i * 104_729) % SHOP_ACCOUNTS]!.email,
          password: b.password,
        }).then(answer),
      ),
      // Each update to an account of its own: a delivery waits for none of the same account's.
      paced(UPDATES_PER_S, ms, () => {
        const n = updated++;
        return call(shopToken, '/api/1/user/update', {
          _userId: shopAccounts[n % SHOP_ACCOUNTS]!.id,
          name: `Shop ${key} ${n}`,
        }).then(answer);
      }),
    ]);
  /** `GET /healthz` every HEALTH_EVERY_MS until `signal`: the longest wait for an answer, ms (a failure counts as the client's timeout). */
  const health = async (signal: AbortSignal) => {
    let most = 0;
    while (!signal.aborted) {
      const t0 = performance.now();
      const ok = await fetch(`${server.url}/healthz`, { signal: AbortSignal.timeout(CLIENT_TIMEOUT_MS) })
        .then((r) => r.arrayBuffer().then(() => r.ok))
        .catch(() => false);
      most = Math.max(most, ok ? performance.now() - t0 : CLIENT_TIMEOUT_MS);
      await sleep(HEALTH_EVERY_MS);
    }
    return most;
  };
  try {
    // Warm-up, not counted: V8's compiler, the caches, the first connections, the webhook worker.
    await shop('warm', 4000);
    await sleep(1000);
    for (const phase of phases) {
      if (phase.key === 'quiet3' && evilEndpoint !== undefined) {
        await runCli(['webhook', 'remove', evilEndpoint], cliEnv);
        evilEndpoint = undefined;
      }
      log(`  ${phase.label}`);
      const stops = await Promise.all(phase.attacks.map((a) => attacks[a]()));
      // The attacks take hold: the costly lane fills, the long-polls take their places.
      if (stops.length > 0) await sleep(1500);
      const cpu0 = cpuSeconds(server.child.pid);
      const t0 = performance.now();
      const probing = new AbortController();
      const probe = health(probing.signal);
      const [get, verify, update] = await shop(phase.key, phaseMs);
      const cpu = (cpuSeconds(server.child.pid) - cpu0) / ((performance.now() - t0) / 1000);
      probing.abort();
      const healthMax = await probe;
      const evil = await Promise.all(stops.map((s) => s()));
      // What the attack left running (hashes in their slot, long-polls closing) ends before the next
      // phase; the server's CPU meanwhile says whether abandoned work still runs.
      const cpu1 = cpuSeconds(server.child.pid);
      await sleep(2000);
      const cpuAfter = (cpuSeconds(server.child.pid) - cpu1) / 2;
      figures.set(phase.key, { get, verify, update, hooks: hooks.get(phase.key)!, evil, cpu, cpuAfter, healthMax });
      const g = stats(get);
      const v = stats(verify);
      log(
        `    get p50 ${g.p50} p99 ${g.p99} ms ${g.success.toFixed(1)}%; verify p50 ${v.p50} p99 ${v.p99} ms ${v.success.toFixed(1)}%` +
          `; /healthz max ${Math.round(healthMax)} ms; server CPU ${cpu.toFixed(2)} cores, ${cpuAfter.toFixed(2)} in the 2 s after` +
          `${evil.length > 0 ? `; ${evil.join('; ')}` : ''}`,
      );
    }
    // The last deliveries of shop's updates, however late.
    const sent = [...figures.values()].reduce((n, f) => n + f.update.filter((s) => s.ok).length, 0);
    const deadline = Date.now() + 20_000;
    const delivered = () => phases.reduce((n, p) => n + hooks.get(p.key)!.length, 0);
    while (delivered() < sent && Date.now() < deadline) await sleep(100);
  } finally {
    await server.stop();
    receiver.close();
    for (const socket of held) socket.destroy();
    dead.close();
    if (evilEndpoint !== undefined) await runCli(['webhook', 'remove', evilEndpoint], cliEnv).catch(() => {});
    await runCli(['webhook', 'remove', shopEndpoint], cliEnv).catch(() => {});
  }
  const loadAfter = loadavg();

  // ---- rows: each attacked phase against the quiet ones --------------------------------------------
  const hookStats = (f: Figures) => ({
    p50: percentile(f.hooks, 50),
    p99: percentile(f.hooks, 99),
    missing: f.update.filter((s) => s.ok).length - f.hooks.length,
  });
  const success = (f: Figures) => {
    const all = [...f.get, ...f.verify, ...f.update];
    return (100 * all.filter((s) => s.ok).length) / all.length;
  };
  const measure = (f: Figures) => {
    const g = stats(f.get);
    const v = stats(f.verify);
    const h = hookStats(f);
    return {
      getP50: g.p50,
      getP99: g.p99,
      verifyP50: v.p50,
      verifyP99: v.p99,
      hookP50: h.p50,
      hookP99: h.p99,
      healthMax: Math.round(f.healthMax),
      success: Math.round(success(f) * 10) / 10,
    };
  };
  type Measure = ReturnType<typeof measure>;
  const quietPhases = phases.filter((p) => p.attacks.length === 0);
  const quiets = quietPhases.map((p) => measure(figures.get(p.key)!));
  /** Each figure: the median of the quiet phases'. */
  const q = Object.fromEntries(
    (Object.keys(quiets[0]!) as (keyof Measure)[]).map((k) => [k, median(quiets.map((m) => m[k]))]),
  ) as Measure;
  const quietOf = (k: keyof Measure) => quiets.map((m) => m[k]);
  const rows: Row[] = [];
  for (const phase of phases.filter((p) => p.attacks.length > 0)) {
    const f = figures.get(phase.key)!;
    const m = measure(f);
    const h = hookStats(f);
    const row = (name: string, k: keyof Measure, extra: Partial<Row> = {}): Row => ({
      group: 'neighbours',
      name: `${phase.short}: shop ${name} vs quiet`,
      ours: [m[k]],
      baseline: quietOf(k),
      unit: k === 'success' ? '%' : 'ms',
      ...(k === 'success' ? {} : { lowerIsBetter: true }),
      ...extra,
    });
    rows.push(
      row('get-by-id p50', 'getP50', { target: '≤ 3×', ok: m.getP50 <= 3 * Math.max(1, q.getP50) }),
      row('get-by-id p99', 'getP99'),
      row('verify p50', 'verifyP50', { target: '≤ 3×', ok: m.verifyP50 <= 3 * Math.max(1, q.verifyP50) }),
      row('verify p99', 'verifyP99'),
      row('webhook delivery p50 (write to receipt)', 'hookP50'),
      row(`webhook delivery p99 (${f.hooks.length} delivered, ${h.missing} not)`, 'hookP99', {
        target: '≤ 5000 ms, all delivered',
        ok: m.hookP99 <= 5000 && h.missing === 0,
      }),
      row('requests answered 200 (get, verify, update)', 'success', { target: '100%', ok: m.success === 100 }),
      row('/healthz max (asked every 50 ms)', 'healthMax', { target: '< 100 ms', ok: m.healthMax < 100 }),
    );
  }

  // A compact table of every phase, with the ratios to the quiet median in parentheses.
  const r = (x: number, base: number) => (base > 0 ? ` (${(x / base).toFixed(2)}×)` : '');
  const table = [
    '| Phase | get p50 | get p99 | verify p50 | verify p99 | webhook p50 | webhook p99 | /healthz max | shop 200s (get / verify / update) | server CPU, cores: during / 2 s after | what evil got |',
    '|---|---:|---:|---:|---:|---:|---:|---:|---|---|---|',
    ...phases.map((phase) => {
      const f = figures.get(phase.key)!;
      const m = measure(f);
      const [g, v, u] = [stats(f.get), stats(f.verify), stats(f.update)];
      const h = hookStats(f);
      return (
        `| ${phase.label} | ${m.getP50} ms${r(m.getP50, q.getP50)} | ${m.getP99} ms${r(m.getP99, q.getP99)} | ` +
        `${m.verifyP50} ms${r(m.verifyP50, q.verifyP50)} | ${m.verifyP99} ms${r(m.verifyP99, q.verifyP99)} | ` +
        `${m.hookP50} ms${r(m.hookP50, q.hookP50)} | ${m.hookP99} ms${r(m.hookP99, q.hookP99)}${h.missing > 0 ? `, ${h.missing} not delivered` : ''} | ${m.healthMax} ms | ` +
        `${g.success.toFixed(1)}% / ${v.success.toFixed(1)}% / ${u.success.toFixed(1)}% (${f.get.length + f.verify.length + f.update.length} requests) | ${f.cpu.toFixed(2)} / ${f.cpuAfter.toFixed(2)} | ${f.evil.join('; ') || '—'} |`
      );
    }),
    `| **quiet, median of the ${quietPhases.length} (the baseline)** | ${q.getP50} ms | ${q.getP99} ms | ${q.verifyP50} ms | ${q.verifyP99} ms | ${q.hookP50} ms | ${q.hookP99} ms | ${q.healthMax} ms | ${q.success}% | | |`,
  ].join('\n');
  const notes = [
    b.only === 'heavy-reads'
      ? '## Noisy neighbours: heavy reads (issue 41, F2)'
      : '## Noisy neighbours (issues 26 and 41)',
    `\`./pnpmw bench --only ${b.only ?? 'neighbours'}\`${b.only === 'heavy-reads' ? ' (the quiet phases and (e) alone)' : ''}. One server (the built one, its default limits: RATE_LIMIT and RATE_LIMIT_HASH 6000/60s ` +
      'per token, HASH_CONCURRENCY = cores, HASH_COSTLY_CONCURRENCY 1, LONG_POLLS_PER_TOKEN 8, LONG_POLLS_PER_SITE 32, ' +
      'WEBHOOK_ENDPOINT_CONCURRENCY 4, HEAVY_READS_PER_SITE 2; WEBHOOK_ALLOW_PRIVATE for the local receivers) on the local PostgreSQL; two sites with ' +
      `tokens of their own. Shop (${SHOP_ACCOUNTS.toLocaleString('en')} accounts, argon2id) sends an open loop of ` +
      `${GETS_PER_S} gets by id, ${VERIFIES_PER_S} verifies (right password) and ${UPDATES_PER_S} updates a second for ` +
      `${phaseMs / 1000} s per phase; its webhook endpoint, a receiver on 127.0.0.1, answers 204 at once. Latencies are ` +
      `request to answer (or to failure; ${CLIENT_TIMEOUT_MS / 1000} s at most), the webhook's the event's time to its receipt. ` +
      `Evil: (a) imports ${COSTLY_ACCOUNTS} accounts with \`$pbkdf2-sha512$5000000$…\` hashes (before the first phase) and runs ` +
      `${COSTLY_LOOPS} loops of wrong verifies against them; (b) ${POLLS} loops of \`GET /api/1/events?after=<latest>&wait=30\` ` +
      `over ${POLL_TOKENS} events tokens, each coming back after a 429's Retry-After; (c) a webhook endpoint that accepts ` +
      `connections and never answers, then ${WEBHOOK_IMPORT} accounts imported (and ${WEBHOOK_IMPORT} more in the "all" phase), ` +
      "a delivery each. (d) sets its metadata schema (`^(a+)+$` and twenty patterns that defeat RE2's DFA) and sends " +
      `${SCHEMA_LOOPS} loops of creates and 1 of dry-run imports of ${SCHEMA_IMPORT_ROWS} rows, each with metadata those patterns ` +
      'check over 60 KB (cleared after its phase). ' +
      `(e) heavy reads, each in ${HEAVY_LOOPS} loops in a thread of the bench's own, every answer read to its end, with a token ` +
      `of scopes read and export: \`GET /api/1/user/list?limit=1000\` over ${BIG_ACCOUNTS} accounts of ${BIG_KIB} KiB of ` +
      `metadata (written before the first phase), \`GET /api/1/user/export\`, and \`GET /api/1/user/data\` of an account ` +
      `created with 62 KiB of metadata and updated ${HOARDER_UPDATES} times with 62 KiB more (~6 MB of events); what evil got ` +
      'counts its answers by status (200, or 429 from the per-site bound). ' +
      `\`/healthz\` is asked every ${HEALTH_EVERY_MS} ms while shop is measured; its column is the longest answer. ` +
      'Each attack starts 1.5 s before the measurement and is stopped after it (2 s pause between phases); ' +
      "the endpoint's backlog stays until the endpoint is removed before the last quiet phase. Three quiet phases lie " +
      "between the attacks (in every run); each figure's baseline is their median (the table above lists the three in the baseline column), " +
      'and the ratios are to it: on a shared machine one quiet phase alone can be the slowest of the run. ' +
      'Load generator and attacker run in the bench process, on the same cores as the server and PostgreSQL.',
    table,
    `Ran on ${cpus().length} × ${cpus()[0]?.model ?? 'unknown CPU'} shared with other work, the server built from the working ` +
      `tree at ${git(['rev-parse', '--short', 'HEAD'])} (${git(['status', '--porcelain', '--', 'packages/server']).split('\n').filter(Boolean).length} ` +
      'uncommitted changes under packages/server at the time, built in). ' +
      `Load average (1, 5, 15 min) before: ${loadBefore.map((x) => x.toFixed(2)).join(', ')}; after: ${loadAfter.map((x) => x.toFixed(2)).join(', ')}.`,
  ];
  return { rows, notes };
}
