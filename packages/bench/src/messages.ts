// Mail sent by us (issue 60, "Done when"): the messages a server hands to the SMTP server per
// second, and what `send: { channel: "email" }` adds to `user/ticket`.
//
// The SMTP server is smtp-server in the bench's own process (startSmtp: plain, on loopback, as the
// senders allow there; it accepts every message, and counts them and the time each arrived, by
// envelope sender and by our Message-ID `<messageId@user-accounts>`): its parsing is on the bench's
// CPU, never on the server's, whose CPU time is read from /proc/<pid>/stat around each measured
// phase (as providers.ts reads it); what a phase's CPU divided by its requests says is ours alone.
//
// One server (the built one) on the local PostgreSQL, the rate limits lifted as in the rest of the
// bench, and the two message budgets lifted too (MESSAGE_ACCOUNT_HOURLY_LIMIT 1000, the most it
// takes, and MESSAGE_SITE_DAILY_LIMIT 10,000,000): at their defaults (5 an account an hour, 10,000
// a site a day) they would refuse most of the bench's sends with 429. The tickets are spread over
// 50,000 accounts besides, a few messages each. Site `default` sends the tickets' mail; site
// `backlog`, at the same SMTP server, the backlog's (so that its rows are not in `default`'s day,
// which send's site budget counts).
//
// Each round: (1) and (2), in turn (which goes first alternates): user/ticket (reset_password, an
// account that exists) at 16 connections without `send` (the ticket in the answer), and with
// `send: { channel: "email" }` (the message written to the outbox in the ticket's transaction, then
// sent by the server's worker): req/s, p50, p99, and the server's CPU per request, for the send
// phase from its start until the SMTP server has every message of the site (its sending included);
// (3) a backlog of N messages written to the outbox in one transaction (as sends write them: the
// default reset template rendered, sealed), then the time from its commit until the SMTP server
// has them all: N / seconds, and the server's CPU per message over that time; (4) user/ticket
// with `send` at a steady rate (open loop), each message's time from before its request until
// the SMTP server received it (by its Message-ID), p50 and p99.
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { openPostgres } from '@user-accounts/server/db';
import { enqueueMessage, messageRing } from '@user-accounts/server/messages/outbox';
import { setSenders } from '@user-accounts/server/messages/senders';
import { defaultTemplate, render } from '@user-accounts/server/messages/templates';
import { DEFAULT_PER_SITE } from '@user-accounts/server/messages/worker';
import postgres from 'postgres';
import { SMTPServer } from 'smtp-server';
import type { LoadResult, Make } from './load-types.ts';
import { cpuMs } from './proc.ts';
import type { Row } from './report.ts';

export interface MessagesBench {
  /** A migrated database with accounts of site `default`, and a sample of their emails. */
  db: { url: string; emails: string[] };
  /** Ours, started with these variables added (the budgets lifted). */
  ours(env: Record<string, string>): Promise<{ url: string; pid: number; stop(): Promise<void> }>;
  load(url: string, connections: number, seconds: number, make: Make): Promise<LoadResult>;
  log(line: string): void;
  rounds: number;
  seconds: number;
  warmUpSeconds: number;
  /** The bench's token (site `default`, scopes read, write, verify, events). */
  token: string;
}

const CONNECTIONS = 16;
/** The budgets lifted (see the top): the account's hourly one to its maximum. */
export const LIFTED_BUDGETS = { MESSAGE_ACCOUNT_HOURLY_LIMIT: '1000', MESSAGE_SITE_DAILY_LIMIT: '10000000' };
const SHOP_FROM = 'no-reply@shop.bench.example';
const BACKLOG_FROM = 'no-reply@backlog.bench.example';
const LINK_ORIGIN = 'https://shop.bench.example';
/** The steady rate of (4), unless half the backlog's rate of the first round is less. */
const STEADY_RATE = 100;
/** How long the SMTP server may take to have a phase's messages before the bench gives up. */
const DRAIN_TIMEOUT_MS = 180_000;

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const percentile = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;
};

/** The SMTP server (see the top): accepts everything; when each message arrived, by envelope sender and by Message-ID. */
async function startSmtp() {
  const bySender = new Map<string, number[]>();
  const byId = new Map<string, number>();
  const server = new SMTPServer({
    authOptional: true,
    disabledCommands: ['STARTTLS'],
    logger: false,
    onData(stream, session, callback) {
      // The headers come first: enough of the message to find our Message-ID.
      let head = '';
      stream.on('data', (chunk: Buffer) => {
        if (head.length < 8192) head += chunk.toString('latin1');
      });
      stream.on('end', () => {
        const at = performance.now();
        const from = session.envelope.mailFrom === false ? '' : session.envelope.mailFrom.address.toLowerCase();
        const times = bySender.get(from) ?? [];
        times.push(at);
        bySender.set(from, times);
        const id = /^message-id:\s*<([^@>\s]+)@user-accounts>/im.exec(head)?.[1];
        if (id !== undefined) byId.set(id, at);
        callback();
      });
    },
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  const times = (from: string) => bySender.get(from) ?? [];
  return {
    port: (server.server.address() as AddressInfo).port,
    /** When each message of `from` arrived (performance.now()), in order. */
    times,
    arrivedAt: (messageId: string) => byId.get(messageId),
    /** Resolves once `from`'s messages number `count`; throws past the timeout. */
    async until(from: string, count: number, what: string) {
      const deadline = performance.now() + DRAIN_TIMEOUT_MS;
      while (times(from).length < count) {
        if (performance.now() > deadline)
          throw new Error(
            `${what}: ${times(from).length} of ${count} messages at the SMTP server after ${DRAIN_TIMEOUT_MS} ms`,
          );
        await sleep(5);
      }
    },
    close: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

interface Phase {
  rps: number;
  p50: number;
  p99: number;
  cpu: number;
  bad: number;
}

export async function messageRows(b: MessagesBench): Promise<{ rows: Row[]; notes: string[] }> {
  const loadBefore = loadavg();
  const smtp = await startSmtp();
  const transport = `smtp://127.0.0.1:${smtp.port}`;
  // The senders, as `cli site set --mail-from --mail-transport --link-origins` keeps them (no
  // password: the SMTP server asks for none); sealed under the database's own key, as on a server
  // without FACTOR_ENCRYPTION_KEY, which the bench's is.
  const database = await openPostgres(b.db.url);
  const sql = postgres(b.db.url, { max: 1, onnotice: () => {} });
  const notes: string[] = [];
  const plain: Phase[] = [];
  const sent: (Phase & { drainMs: number })[] = [];
  const backlogs: { n: number; rate: number; flowing: number; firstMs: number; cpu: number }[] = [];
  const steady: { rate: number; p50: number; p99: number; count: number }[] = [];
  let server: Awaited<ReturnType<MessagesBench['ours']>> | undefined;
  let dayMessages = 0;
  try {
    await setSenders(
      database.db,
      'default',
      { mailFrom: `Shop <${SHOP_FROM}>`, mailTransport: transport, linkOrigins: [LINK_ORIGIN] },
      undefined,
    );
    await setSenders(
      database.db,
      'backlog',
      { mailFrom: `Backlog <${BACKLOG_FROM}>`, mailTransport: transport, linkOrigins: [LINK_ORIGIN] },
      undefined,
    );
    // The backlog's recipients: accounts of site `backlog` (a message's end is an event of its account).
    const backlogSize = Math.max(400, 400 * b.seconds);
    const recipients = await sql<
      { id: string; email: string; name: string }[]
    >`insert into users (id, site, email, name, origin)
      select gen_random_uuid(), 'backlog', 'b' || i || '@backlog.bench.example', 'Person ' || i, 'api'
      from generate_series(1, ${backlogSize}) as i
      returning id::text as id, email, name`;
    server = await b.ours(LIFTED_BUDGETS);
    const url = server.url;
    const pid = server.pid;
    const emails = b.db.emails;
    const send = { channel: 'email', linkTemplate: `${LINK_ORIGIN}/reset?ticket={ticket}` };
    // Each request another account of the sample (a stride through it): a few messages each.
    let nth = 0;
    const email = () => emails[(nth++ * 7919) % emails.length]!;
    const ticket: Make = () => ({
      method: 'POST',
      path: '/api/1/user/ticket',
      body: JSON.stringify({ email: email(), purpose: 'reset_password' }),
    });
    const ticketSent: Make = () => ({
      method: 'POST',
      path: '/api/1/user/ticket',
      body: JSON.stringify({ email: email(), purpose: 'reset_password', send }),
    });
    /** Every message of site `default` written so far is at the SMTP server. */
    const drained = async (what: string) => {
      // Requests still in flight when the load stopped may write theirs a moment later.
      await sleep(250);
      const [written] = await sql<{ n: number }[]>`select count(*)::int as n from messages where site = 'default'`;
      await smtp.until(SHOP_FROM, written!.n, what);
    };
    const plainPhase = async (seconds: number): Promise<Phase> => {
      const c0 = cpuMs(pid);
      const r = await b.load(url, CONNECTIONS, seconds, ticket);
      return { rps: r.rps, p50: r.p50, p99: r.p99, bad: r.bad, cpu: (cpuMs(pid) - c0) / Math.max(1, r.requests) };
    };
    const sendPhase = async (seconds: number): Promise<Phase & { drainMs: number }> => {
      const c0 = cpuMs(pid);
      const r = await b.load(url, CONNECTIONS, seconds, ticketSent);
      const loadEnd = performance.now();
      await drained('user/ticket with send');
      // The site's last message's arrival (0: all were there when the load stopped).
      const drainMs = Math.max(0, smtp.times(SHOP_FROM).at(-1)! - loadEnd);
      return {
        rps: r.rps,
        p50: r.p50,
        p99: r.p99,
        bad: r.bad,
        cpu: (cpuMs(pid) - c0) / Math.max(1, r.requests),
        drainMs,
      };
    };
    const backlogPhase = async (round: number) => {
      const n = recipients.length;
      const ring = await messageRing(database.db, undefined);
      const before = smtp.times(BACKLOG_FROM).length;
      await database.db.transaction(async (tx) => {
        for (const [i, to] of recipients.entries())
          await enqueueMessage(tx, ring, {
            site: 'backlog',
            userId: to.id,
            channel: 'email',
            purpose: 'reset_password',
            recipient: to.email,
            rendered: render(defaultTemplate('reset_password'), {
              siteName: 'Backlog',
              link: `${LINK_ORIGIN}/reset?ticket=backlog-${round}-${i}`,
              expiresIn: '1 hour',
              email: to.email,
              name: to.name,
            }),
          });
      });
      const committed = performance.now();
      const c0 = cpuMs(pid);
      await smtp.until(BACKLOG_FROM, before + n, 'the backlog');
      const cpu = (cpuMs(pid) - c0) / n;
      const times = smtp.times(BACKLOG_FROM).slice(before);
      return {
        n,
        rate: (n * 1000) / (times.at(-1)! - committed),
        // Once the worker has found the backlog: its poll's wait left out.
        flowing: ((n - 1) * 1000) / Math.max(1, times.at(-1)! - times[0]!),
        firstMs: times[0]! - committed,
        cpu,
      };
    };
    const steadyPhase = async (rate: number, seconds: number) => {
      const count = Math.max(20, Math.round(rate * seconds));
      const headers = { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' };
      const one = async () => {
        const t0 = performance.now();
        const res = await fetch(`${url}/api/1/user/ticket`, {
          method: 'POST',
          headers,
          body: JSON.stringify({ email: email(), purpose: 'reset_password', send }),
        });
        const body = (await res.json()) as { result?: { messageId?: string } };
        if (res.status !== 201 || body.result?.messageId === undefined)
          throw new Error(`user/ticket with send: ${res.status} ${JSON.stringify(body)}`);
        return { t0, id: body.result.messageId };
      };
      const started = performance.now();
      const sends: Promise<{ t0: number; id: string }>[] = [];
      for (let i = 0; i < count; i++) {
        const wait = started + (i * 1000) / rate - performance.now();
        if (wait > 0) await sleep(wait);
        sends.push(one());
      }
      const done = await Promise.all(sends);
      await drained('the steady sends');
      const latencies = done.map(({ t0, id }) => {
        const at = smtp.arrivedAt(id);
        if (at === undefined) throw new Error(`message ${id}: no Message-ID <${id}@user-accounts> at the SMTP server`);
        return at - t0;
      });
      return { rate, count, p50: percentile(latencies, 50), p99: percentile(latencies, 99) };
    };

    // Warm-up (V8's compiler, PostgreSQL's caches, the SMTP pool's connections), not counted.
    await plainPhase(b.warmUpSeconds);
    await sendPhase(b.warmUpSeconds);
    let steadyRate = STEADY_RATE;
    for (let r = 0; r < b.rounds; r++) {
      if (r % 2 === 0) {
        plain.push(await plainPhase(b.seconds));
        sent.push(await sendPhase(b.seconds));
      } else {
        sent.push(await sendPhase(b.seconds));
        plain.push(await plainPhase(b.seconds));
      }
      backlogs.push(await backlogPhase(r));
      // Below what the server drains, so that the latency is a message's own, not a queue's.
      if (r === 0) steadyRate = Math.max(10, Math.min(STEADY_RATE, Math.floor(backlogs[0]!.rate / 20) * 10));
      steady.push(await steadyPhase(steadyRate, b.seconds));
      const p = plain.at(-1)!;
      const s = sent.at(-1)!;
      const q = backlogs.at(-1)!;
      const t = steady.at(-1)!;
      b.log(
        `  round ${r + 1}: ticket ${p.rps.toFixed(0)} req/s, ${p.cpu.toFixed(2)} ms CPU; with send ${s.rps.toFixed(0)} req/s, ${s.cpu.toFixed(2)} ms CPU (drained ${s.drainMs.toFixed(0)} ms after); ` +
          `backlog of ${q.n}: ${q.rate.toFixed(0)} messages/s (${q.flowing.toFixed(0)} once flowing), ${q.cpu.toFixed(2)} ms CPU each; at ${t.rate}/s write to receipt p50 ${t.p50.toFixed(0)} ms, p99 ${t.p99.toFixed(0)} ms`,
      );
    }
    const [day] = await sql<{ n: number }[]>`select count(*)::int as n from messages where site = 'default'`;
    dayMessages = day!.n;
  } finally {
    await server?.stop();
    await smtp.close();
    await sql.end();
    await database.close();
  }
  const loadAfter = loadavg();

  const of = <T>(xs: T[], f: (x: T) => number) => xs.map(f);
  const rate = steady[0]?.rate ?? STEADY_RATE;
  const backlogSize = backlogs[0]?.n ?? 0;
  const rows: Row[] = [
    {
      group: 'messages',
      name: `user/ticket (reset_password) @${CONNECTIONS} with send (email) vs without: req/s`,
      ours: of(sent, (s) => s.rps),
      baseline: of(plain, (p) => p.rps),
      unit: 'req/s',
      lowerIsBetter: false,
    },
    {
      group: 'messages',
      name: 'user/ticket with send vs without: p50',
      ours: of(sent, (s) => s.p50),
      baseline: of(plain, (p) => p.p50),
      unit: 'ms',
    },
    {
      group: 'messages',
      name: 'user/ticket with send vs without: p99',
      ours: of(sent, (s) => s.p99),
      baseline: of(plain, (p) => p.p99),
      unit: 'ms',
    },
    {
      group: 'messages',
      name: 'user/ticket with send (its message sent, until the SMTP server has it) vs without: server CPU per request',
      ours: of(sent, (s) => s.cpu),
      baseline: of(plain, (p) => p.cpu),
      unit: 'ms',
    },
    {
      group: 'messages',
      name: "user/ticket with send: the site's last message at the SMTP server after the load stopped",
      ours: of(sent, (s) => s.drainMs),
      unit: 'ms',
    },
    {
      group: 'messages',
      name: 'user/ticket answers other than 201, with send and without (of every round)',
      ours: [...of(sent, (s) => s.bad), ...of(plain, (p) => p.bad)],
      unit: 'count',
      target: '0',
      ok: [...sent, ...plain].every((x) => x.bad === 0),
    },
    {
      group: 'messages',
      name: `messages handed to the SMTP server per second, one site (a backlog of ${backlogSize}: N / seconds from its commit)`,
      ours: of(backlogs, (q) => q.rate),
      unit: 'messages/s',
      lowerIsBetter: false,
    },
    {
      group: 'messages',
      name: "the same, from the backlog's first message at the SMTP server to its last ((N − 1) / seconds: the poll's wait left out)",
      ours: of(backlogs, (q) => q.flowing),
      unit: 'messages/s',
      lowerIsBetter: false,
    },
    {
      group: 'messages',
      name: "the backlog's first message at the SMTP server after its commit (the worker's poll, ≤ 1 s)",
      ours: of(backlogs, (q) => q.firstMs),
      unit: 'ms',
    },
    {
      group: 'messages',
      name: 'a backlog message: server CPU per message sent',
      ours: of(backlogs, (q) => q.cpu),
      unit: 'ms',
    },
    {
      group: 'messages',
      name: `user/ticket with send at ${rate}/s: write (before the request) to receipt at the SMTP server, p50`,
      ours: of(steady, (t) => t.p50),
      unit: 'ms',
    },
    {
      group: 'messages',
      name: `user/ticket with send at ${rate}/s: write to receipt, p99`,
      ours: of(steady, (t) => t.p99),
      unit: 'ms',
    },
  ];
  notes.push(
    '## Mail sent by us (issue 60)',
    "`./pnpmw bench --only messages` (messages.ts). One server (the built one) on the local PostgreSQL with 100,000 accounts of site `default`, its rate limits lifted as in the rest of the bench and its message budgets lifted too: `MESSAGE_ACCOUNT_HOURLY_LIMIT=1000` (its maximum; the default 5 an account an hour) and `MESSAGE_SITE_DAILY_LIMIT=10000000` (the default 10,000 a site a day), which would otherwise answer most of the bench's sends 429; the tickets go to 50,000 accounts in turn besides. The sites' senders (`default`, and `backlog` for the backlog) are an SMTP server in the bench's process (smtp-server, plain on loopback as the senders allow there, accepting every message at once, counting them and the time each arrived by envelope sender and by our Message-ID): its work and the load generator's are on the bench's CPU, in one process (while the load generator is busy the SMTP server answers later: the sending figures are, if anything, pessimistic); the server's CPU is its process's user + system time (/proc) over a phase, divided by the phase's requests or messages: ours alone.",
    `**user/ticket with and without send**: reset_password for an account that exists, at ${CONNECTIONS} connections for ${b.seconds} s each, the two in turn in every round (which goes first alternating), after a warm-up of each. Without \`send\` the ticket is in the answer; with \`send: { channel: "email", linkTemplate }\` the answer carries the messageId and the message is written to the outbox in the ticket's transaction (the default template rendered, sealed), then sent by the server's own worker while the load runs. The CPU of a send phase is counted from its start until the SMTP server has every message of the site (so the sending is in it: the added cost of \`send\`, whole), the drain after the load stopped is its own row; the ratio of the medians is the added cost. Send's site budget counts the site's messages of the last day (up to the budget): ${dayMessages.toLocaleString('en')} by the end of this run, so the last rounds count more than the first.`,
    `**Messages per second**: ${backlogSize} messages of site \`backlog\` (one to each of its ${backlogSize} accounts) written to the outbox in one transaction (as sends write them), then the time from its commit until the SMTP server had them all; N / seconds. One site's messages are at most ${DEFAULT_PER_SITE} in flight at once, every server together (the worker's per-site cap, \`DEFAULT_PER_SITE\`; the server has 16 slots for several sites), each on the site's pooled SMTP connection: this is what one site gets of one server; several sites' backlogs were not measured. The time includes the wait for the worker's next poll (it is not kicked by a write of another process; at most 1 s, its own row; the rate from the first arrival to the last, without it, is the next row).`,
    `**Write to receipt**: user/ticket with \`send\` at a steady ${rate} requests a second (open loop, ${b.seconds} s a round; ${STEADY_RATE}/s, or half the first backlog's rate if that is less), each message's time from before its request to its arrival at the SMTP server, matched by its Message-ID (\`<messageId@user-accounts>\`, the messageId of the answer). A send on the server kicks its worker, so no poll is waited for.`,
    `**The machine was loaded** (2 cores shared with other agents' work): load average (1, 5, 15 min) before ${loadBefore.map((l) => l.toFixed(2)).join(', ')}; after ${loadAfter.map((l) => l.toFixed(2)).join(', ')}. The absolute figures are those of a busy machine; the CPU per request is the steadier figure.`,
  );
  return { rows, notes };
}
