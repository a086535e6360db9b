// Hashing at its own rate (issue 63, point 4): create and verify against the standalone argon2id
// rate, measured in the same rounds (interleaved, the order alternating), not once before them.
// For each of ours' rounds, what the server's own metrics and /proc say of where the time went:
// the hashes' mean time inside the server (password_hash_duration_seconds: the run, its wait for
// a slot excluded) against the standalone hash's, how full the slots were (password_hash_in_progress
// and password_hash_queue_depth, sampled every 100 ms), and the server's CPU per request beside
// the hashes (its process CPU less the hashes' own time). `./pnpmw bench --only hashing`.
import { hash, verify } from '@node-rs/argon2';
import type { LoadResult, Make } from './load-types.ts';
import { ARGON2ID } from './params.ts';
import { cpuMs, threadsCpuMs } from './proc.ts';
import { median, type Row } from './report.ts';

export interface HashingServer {
  url: string;
  pid: number;
  stop(): Promise<void>;
}

export interface HashingBench {
  /** Ours, with METRICS_TOKEN set to `metricsToken`. */
  ours(env: Record<string, string>): Promise<HashingServer>;
  load(url: string, connections: number, seconds: number, make: Make): Promise<LoadResult>;
  create: Make;
  verify: Make;
  /** The hash slots (HASH_CONCURRENCY's default: the cores). */
  cores: number;
  log(line: string): void;
  rounds: number;
  seconds: number;
  warmUpSeconds: number;
}

const CONNECTIONS = 8;
const METRICS_TOKEN = 'bench-metrics-token-0123456789abcdef0123456789';

/** The standalone rate: `cores` hashes (or verifies) at once on libuv's pool, nothing else. */
async function standalone(
  kind: 'hash' | 'verify',
  cores: number,
  seconds: number,
): Promise<{ rate: number; cpuMs: number }> {
  const stored = await hash('standalone-password', ARGON2ID);
  const cpuBefore = process.cpuUsage();
  let done = 0;
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: cores }, async () => {
      while (performance.now() < until) {
        if (kind === 'hash') await hash(`standalone-${done}-password`, ARGON2ID);
        else await verify(stored, 'standalone-password');
        done++;
      }
    }),
  );
  const cpu = process.cpuUsage(cpuBefore);
  // The process's CPU (the pool's threads included) per hash: what one costs with nothing beside it.
  return { rate: done / seconds, cpuMs: (cpu.user + cpu.system) / 1000 / Math.max(done, 1) };
}

/** A metric's value in Prometheus' text (the sum over its series). */
function metric(text: string, name: string): number {
  let sum = 0;
  for (const line of text.split('\n'))
    if (line.startsWith(`${name} `) || line.startsWith(`${name}{`))
      sum += Number(line.slice(line.lastIndexOf(' ') + 1));
  return sum;
}

const scrape = async (url: string) =>
  (await fetch(`${url}/metrics`, { headers: { authorization: `Bearer ${METRICS_TOKEN}` } })).text();

interface OursRound {
  rps: number;
  p99: number;
  /** The hashes' mean run time inside the server, ms. */
  hashMs: number;
  /** Mean hashes running, and waiting, over the round. */
  running: number;
  waiting: number;
  /** The server's CPU per request, ms. */
  cpuMs: number;
  /** Of it, by thread: the event loop's, libuv's pool (the hash, and any other pool work), V8's helpers (GC, the compiler). */
  mainMs: number;
  poolMs: number;
  v8Ms: number;
}

async function oursRound(b: HashingBench, make: Make): Promise<OursRound> {
  const server = await b.ours({ METRICS_TOKEN });
  try {
    await b.load(server.url, CONNECTIONS, b.warmUpSeconds, make);
    const before = await scrape(server.url);
    const cpuBefore = cpuMs(server.pid);
    const threadsBefore = threadsCpuMs(server.pid);
    const samples: { running: number; waiting: number }[] = [];
    let sampling = true;
    const sampler = (async () => {
      while (sampling) {
        await new Promise((r) => setTimeout(r, 100));
        const text = await scrape(server.url);
        samples.push({
          running: metric(text, 'password_hash_in_progress'),
          waiting: metric(text, 'password_hash_queue_depth'),
        });
      }
    })();
    const result = await b.load(server.url, CONNECTIONS, b.seconds, make);
    sampling = false;
    await sampler;
    const after = await scrape(server.url);
    const cpu = cpuMs(server.pid) - cpuBefore;
    const threadsAfter = threadsCpuMs(server.pid);
    const threadCpu = (name: string) => (threadsAfter.get(name) ?? 0) - (threadsBefore.get(name) ?? 0);
    const hashes =
      metric(after, 'password_hash_duration_seconds_count') - metric(before, 'password_hash_duration_seconds_count');
    const hashSeconds =
      metric(after, 'password_hash_duration_seconds_sum') - metric(before, 'password_hash_duration_seconds_sum');
    const n = Math.max(result.requests, 1);
    const mean = (xs: number[]) => xs.reduce((s, x) => s + x, 0) / Math.max(xs.length, 1);
    return {
      rps: result.rps,
      p99: result.p99,
      hashMs: (hashSeconds * 1000) / Math.max(hashes, 1),
      // The sampler's own scrapes are in the CPU too: a few per second, next to hundreds of hashes.
      running: mean(samples.map((s) => s.running)),
      waiting: mean(samples.map((s) => s.waiting)),
      cpuMs: cpu / n,
      mainMs: threadCpu('MainThread') / n,
      poolMs: threadCpu('libuv-worker') / n,
      v8Ms: threadCpu('V8Worker') / n,
    };
  } finally {
    await server.stop();
  }
}

export async function hashingRows(b: HashingBench): Promise<{ rows: Row[]; notes: string[] }> {
  const rows: Row[] = [];
  const notes: string[] = [];
  for (const [label, kind, make] of [
    ['create', 'hash', b.create],
    ['verify', 'verify', b.verify],
  ] as const) {
    const ours: OursRound[] = [];
    const alone: number[] = [];
    const aloneCpu: number[] = [];
    const standaloneRound = async () => {
      const { rate, cpuMs } = await standalone(kind, b.cores, b.seconds);
      alone.push(rate);
      aloneCpu.push(cpuMs);
    };
    for (let r = 0; r < b.rounds; r++) {
      if (r % 2 === 0) {
        ours.push(await oursRound(b, make));
        await standaloneRound();
      } else {
        await standaloneRound();
        ours.push(await oursRound(b, make));
      }
    }
    // A standalone hash's time, `cores` at once as the server runs them.
    const oneHashMs = (b.cores * 1000) / median(alone);
    const m = (f: (x: OursRound) => number) => median(ours.map(f));
    // Beside the hash: the server's CPU a request less a standalone hash's CPU.
    const beside = ours.map((x) => x.cpuMs - median(aloneCpu));
    const ratio = m((x) => x.rps) / median(alone);
    const pairs = ours.map((x, i) => x.rps / alone[i]!);
    b.log(
      `  ${label} @${CONNECTIONS}: ${m((x) => x.rps).toFixed(1)}/s against standalone ${median(alone).toFixed(1)}/s ` +
        `(${ratio.toFixed(2)}×; rounds ${pairs.map((x) => x.toFixed(2)).join(' ')}); a hash in the server ${m((x) => x.hashMs).toFixed(1)} ms ` +
        `against ${oneHashMs.toFixed(1)} ms standalone (${b.cores} at once); slots busy ${m((x) => x.running).toFixed(2)} of ${b.cores}, ` +
        `waiting ${m((x) => x.waiting).toFixed(1)}; the server's CPU a request ${m((x) => x.cpuMs).toFixed(1)} ms ` +
        `against a standalone ${kind}'s ${median(aloneCpu).toFixed(1)} ms: ${median(beside).toFixed(1)} ms beside it ` +
        `(by thread: the event loop ${m((x) => x.mainMs).toFixed(1)}, libuv's pool ${m((x) => x.poolMs).toFixed(1)}, V8's helpers ${m((x) => x.v8Ms).toFixed(1)})`,
    );
    rows.push(
      {
        group: 'hashing',
        name: `${label} throughput vs the standalone argon2id ${kind} rate, ${CONNECTIONS} connections, interleaved`,
        ours: ours.map((x) => x.rps),
        baseline: alone,
        unit: 'per s',
        target: '≥ 0.8×',
        ok: ratio >= 0.8,
      },
      {
        group: 'hashing',
        name: `${label}: one hash's run inside the server (its wait excluded) vs standalone, ${b.cores} at once`,
        ours: ours.map((x) => Math.round(x.hashMs * 10) / 10),
        baseline: [Math.round(oneHashMs * 10) / 10],
        unit: 'ms',
        lowerIsBetter: true,
      },
      {
        group: 'hashing',
        name: `${label}: the event loop's CPU per request (the thread beside the hashes)`,
        ours: ours.map((x) => Math.round(x.mainMs * 100) / 100),
        unit: 'ms',
        lowerIsBetter: true,
      },
      {
        group: 'hashing',
        name: `${label}: libuv's pool CPU per request (the hash), against a standalone ${kind}'s CPU`,
        ours: ours.map((x) => Math.round(x.poolMs * 100) / 100),
        baseline: aloneCpu.map((x) => Math.round(x * 100) / 100),
        unit: 'ms',
        lowerIsBetter: true,
      },
      {
        group: 'hashing',
        name: `${label}: hash slots busy, mean over the round (of ${b.cores})`,
        ours: ours.map((x) => Math.round(x.running * 100) / 100),
        unit: 'slots',
      },
      {
        group: 'hashing',
        name: `${label}: the server's CPU per request, against a standalone ${kind}'s CPU`,
        ours: ours.map((x) => Math.round(x.cpuMs * 100) / 100),
        baseline: aloneCpu.map((x) => Math.round(x * 100) / 100),
        unit: 'ms',
        lowerIsBetter: true,
      },
    );
  }
  notes.push(
    `Hashing (issue 63, point 4): create and verify at ${CONNECTIONS} connections against the standalone argon2id rate (${b.cores} at once on libuv's pool in the bench's own process, nothing else), interleaved round by round. ` +
      'A hash inside the server is its run alone (password_hash_duration_seconds), slots busy and waiting are sampled from /metrics every 100 ms, ' +
      "and the CPU beside the hash is the server process's CPU per request less a standalone hash's CPU (the bench process's, its pool threads included, per hash). On 2 cores the load generator and PostgreSQL share the cores with the hashes: the standalone rate has them to itself.",
  );
  return { rows, notes };
}
