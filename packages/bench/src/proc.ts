// What a server process has used so far, read from Linux's /proc: its CPU time (user + system)
// and its peak resident memory. cpu-per-request.ts, bench.ts and hot-path.ts read them the same way.
import { readdirSync, readFileSync } from 'node:fs';

const CLOCK_TICKS = 100; // USER_HZ on Linux

/** The process's user + system CPU time so far, in ms (10 ms steps). */
export function cpuMs(pid: number, stat = `/proc/${pid}/stat`): number {
  const fields = readFileSync(stat, 'utf8').split(') ')[1]!.split(' ');
  // After "pid (comm) ": state is field 0; utime is 11, stime 12.
  return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLOCK_TICKS;
}

/** The process's peak resident set size so far (VmHWM), in MB. */
export function peakRssMb(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmHWM:\s+(\d+)/.exec(status)![1]) / 1024;
}

/** The process's CPU time so far by thread name (`MainThread`, `libuv-worker`, `V8Worker`…), in ms. */
export function threadsCpuMs(pid: number): Map<string, number> {
  const byName = new Map<string, number>();
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    try {
      const name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      byName.set(name, (byName.get(name) ?? 0) + cpuMs(Number(tid), `/proc/${pid}/task/${tid}/stat`));
    } catch {
      // ended meanwhile
    }
  }
  return byName;
}
