// The figures of docs/scaling.md (`pnpm bench --only capacity`): for each kind of request, the
// throughput of one server and the CPU it took, from the server's and PostgreSQL's own CPU
// counters (/proc), so that requests per core hold whatever else shares the machine's cores.
import type { ChildProcess } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import type { Row } from './report.ts';

type Make = (i: number) => { method?: 'GET' | 'POST' | 'DELETE'; path: string; body?: string };

export interface CapacityBench {
  ours(): Promise<{ url: string; child: ChildProcess; stop(): Promise<void> }>;
  load(
    url: string,
    connections: number,
    seconds: number,
    make: Make,
  ): Promise<{ rps: number; p99: number; bad: number }>;
  scenarios: { name: string; connections: number; make: Make }[];
  seconds: number;
  log(line: string): void;
}

const TICKS_PER_SECOND = 100; // USER_HZ on Linux

/** CPU seconds (user + system) a process has used, its threads included. */
function cpuOf(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / TICKS_PER_SECOND;
  } catch {
    return 0; // gone meanwhile
  }
}

/** CPU seconds of every PostgreSQL process on the machine (the benchmark's database is the only busy one). */
function postgresCpu(): number {
  let total = 0;
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      if (readFileSync(`/proc/${entry}/comm`, 'utf8').trim() === 'postgres') total += cpuOf(Number(entry));
    } catch {}
  }
  return total;
}

export async function capacityRows(bench: CapacityBench): Promise<Row[]> {
  const rows: Row[] = [];
  for (const scenario of bench.scenarios) {
    const server = await bench.ours();
    try {
      const pid = server.child.pid!;
      const before = { server: cpuOf(pid), postgres: postgresCpu(), wall: performance.now() };
      const result = await bench.load(server.url, scenario.connections, bench.seconds, scenario.make);
      const wall = (performance.now() - before.wall) / 1000;
      const serverCores = (cpuOf(pid) - before.server) / wall;
      const postgresCores = (postgresCpu() - before.postgres) / wall;
      bench.log(
        `  ${scenario.name} @${scenario.connections}: ${result.rps.toFixed(0)} req/s (${result.bad} not 2xx), ` +
          `server ${serverCores.toFixed(2)} cores, PostgreSQL ${postgresCores.toFixed(2)} cores: ` +
          `${(result.rps / serverCores).toFixed(0)} req/s per server core, ${(result.rps / postgresCores).toFixed(0)} per PostgreSQL core`,
      );
      const group = 'capacity';
      rows.push(
        {
          group,
          name: `${scenario.name}, ${scenario.connections} connections: throughput`,
          ours: [result.rps],
          unit: 'req/s',
        },
        { group, name: `${scenario.name}: per core of the server`, ours: [result.rps / serverCores], unit: 'req/s' },
        { group, name: `${scenario.name}: per core of PostgreSQL`, ours: [result.rps / postgresCores], unit: 'req/s' },
      );
    } finally {
      await server.stop();
    }
  }
  return rows;
}
