// The top frames of a V8 CPU profile (`node --cpu-prof`): where a server spent its time in one
// measured run, by self time, so that each result row says what limits it (issue 33, point 4).
import { readFileSync } from 'node:fs';
import { basename } from 'node:path';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
}

interface CpuProfile {
  nodes: ProfileNode[];
  /** When the profile started, µs of the system's monotonic clock (process.hrtime's). */
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}

/** A span of the monotonic clock, µs (process.hrtime.bigint() / 1000): the measured load's. */
export interface Window {
  from: number;
  to: number;
}

/** Now on the clock of a profile's timestamps (CLOCK_MONOTONIC), µs. */
export const monotonicUs = () => Number(process.hrtime.bigint() / 1000n);

/** A frame's name as the report shows it: `function (file:line)`, or V8's own `(garbage collector)`. */
function frameName({ functionName, url, lineNumber }: ProfileNode['callFrame']): string {
  const name = functionName || '(anonymous)';
  if (url === '') return name;
  // node_modules/.pnpm/<pkg>@<v>/node_modules/<pkg>/... reads as <pkg>/...; our own files by their name.
  const where = url.includes('/node_modules/')
    ? url.slice(url.lastIndexOf('/node_modules/') + '/node_modules/'.length)
    : basename(url);
  return `${name} (${where}:${lineNumber + 1})`;
}

/**
 * The `n` frames with the most self time, each with its share of the time the process was not
 * idle. Samples of one function at one place are added up wherever it was called from. With
 * `window`, only the samples taken in it: the profile covers the server's whole life, and its
 * start (compiling its modules: `compileSourceTextModule`) and warm-up are not the load's.
 */
export function topFrames(profile: CpuProfile, n = 5, window?: Window): { frame: string; share: number }[] {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<string, number>();
  let busy = 0;
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i] ?? 0;
    if (window !== undefined && (at < window.from || at > window.to)) return;
    const node = byId.get(id)!;
    if (node.callFrame.functionName === '(idle)') return;
    // timeDeltas[i] is the time before sample i; sample i lasts until the next one (as DevTools counts).
    const dt = profile.timeDeltas[i + 1] ?? 0;
    busy += dt;
    const name = frameName(node.callFrame);
    self.set(name, (self.get(name) ?? 0) + dt);
  });
  return [...self.entries()]
    .sort((a, b) => b[1] - a[1])
    .slice(0, n)
    .map(([frame, time]) => ({ frame, share: busy > 0 ? time / busy : 0 }));
}

/** "f (a.js:3) 12.0%, g (b.js:9) 8.1%, …": the top frames of a profile file. */
export function topFramesOf(path: string, n = 5, window?: Window): string {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  return topFrames(profile, n, window)
    .map((f) => `${f.frame} ${(f.share * 100).toFixed(1)}%`)
    .join(', ');
}
