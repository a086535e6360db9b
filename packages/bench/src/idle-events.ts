// `node src/idle-events.ts [--sites N]` (from packages/bench): what an idle server's sequencer costs
// the database with 10,000 sites (issue 34, point 3), before and after migration 0015, on one
// database. Each server polls every SEQUENCER_POLL_MS (100 ms); this times the poll as each
// version runs it, back to back, and reads the CPU its backend used (/proc, PostgreSQL on this
// machine): before 0015 `select sequence_events()`, which looked at every site of
// event_sequences; after, the sequencer's look at the queue (events/sequencer.ts), which holds
// only the events not numbered yet. Not part of `pnpm bench`: it needs no server build.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import postgres from 'postgres';

const { values } = parseArgs({ options: { sites: { type: 'string', default: '10000' } } });
const SITES = Number(values.sites);
const MIGRATIONS_DIR = fileURLToPath(new URL('../../server/drizzle', import.meta.url));
const BASE_URL = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';

/** The migrations' SQL files in order, each split into statements as drizzle's migrator does. */
function migrations(): { tag: string; statements: string[] }[] {
  const journal = JSON.parse(readFileSync(join(MIGRATIONS_DIR, 'meta', '_journal.json'), 'utf8')) as {
    entries: { tag: string }[];
  };
  return journal.entries.map(({ tag }) => ({
    tag,
    statements: readFileSync(join(MIGRATIONS_DIR, `${tag}.sql`), 'utf8')
      .split('--> statement-breakpoint')
      .filter((s) => s.trim() !== ''),
  }));
}

async function apply(sql: postgres.Sql, which: (tag: string) => boolean) {
  for (const m of migrations().filter((m) => which(m.tag))) {
    await sql.begin(async (tx) => {
      for (const statement of m.statements) await tx.unsafe(statement);
    });
  }
}

/** CPU time (ms) the backend of `sql`'s one connection has used so far. */
async function backendCpuMs(sql: postgres.Sql): Promise<number> {
  const [row] = await sql<{ pid: number }[]>`select pg_backend_pid() as pid`;
  const pid = row!.pid;
  const fields = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  // utime and stime, fields 14 and 15 of stat (11 and 12 after the command name), in clock ticks.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / 100;
}

/**
 * The poll, timed `polls` times: median and p99 in ms, and the backend's CPU per poll (/proc counts
 * in ticks of 10 ms, so a cheap poll is timed many times).
 */
async function measure(sql: postgres.Sql, polls: number, poll: () => Promise<unknown>) {
  for (let i = 0; i < 5; i++) await poll();
  const times: number[] = [];
  const cpuBefore = await backendCpuMs(sql);
  for (let i = 0; i < polls; i++) {
    const started = performance.now();
    await poll();
    times.push(performance.now() - started);
  }
  const cpu = (await backendCpuMs(sql)) - cpuBefore;
  times.sort((a, b) => a - b);
  return { median: times[Math.floor(polls / 2)]!, p99: times[Math.ceil(polls * 0.99) - 1]!, cpuPerPoll: cpu / polls };
}

const line = (label: string, m: Awaited<ReturnType<typeof measure>>) =>
  `${label}: poll median ${m.median.toFixed(3)} ms, p99 ${m.p99.toFixed(3)} ms, backend CPU ${m.cpuPerPoll.toFixed(3)} ms a poll, ` +
  `${(m.cpuPerPoll * 10).toFixed(1)} ms of CPU a second per idle server (a poll per 100 ms)`;

const name = `ua_idle_${Date.now()}`;
const admin = postgres(BASE_URL, { max: 1, onnotice: () => {} });
await admin.unsafe(`create database ${name}`);
const url = new URL(BASE_URL);
url.pathname = `/${name}`;
const sql = postgres(url.toString(), { max: 1, onnotice: () => {} });
try {
  await apply(sql, (tag) => tag < '0015');
  // 10,000 sites, 3 events each, all numbered: what sequence_events finds on an idle server.
  await sql`insert into event_sequences (site, last, snapshot)
    select 'site-' || i, 0, pg_current_snapshot() from generate_series(1, ${SITES}) i`;
  await sql`insert into events (site, type, subject, data)
    select 'site-' || i, 'user.created', gen_random_uuid(), '{}'::jsonb
    from generate_series(1, ${SITES}) i, generate_series(1, 3)`;
  while ((await sql<{ n: number }[]>`select sequence_events() as n`)[0]!.n > 0);
  await sql`vacuum analyze`;
  const before = await measure(sql, 100, () => sql`select sequence_events()`);
  console.log(`${SITES} sites, 3 events each, none waiting for a number`);
  console.log(line('before (0014, sequence_events)', before));
  await apply(sql, (tag) => tag >= '0015');
  await sql`vacuum analyze`;
  const [kept] = await sql<{ n: number }[]>`select count(*)::int as n from events`;
  // The idle sequencer's one query (sequenceEvents in events/sequencer.ts, with no site).
  const after = await measure(sql, 5_000, () => sql`select distinct site from event_queue`);
  console.log(`after 0015: ${kept!.n} events kept, none queued`);
  console.log(line('after (0015, the queue)', after));
} finally {
  await sql.end();
  await admin.unsafe(`drop database ${name}`);
  await admin.end();
}
