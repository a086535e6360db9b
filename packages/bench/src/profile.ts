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
  samples: number[];
  timeDeltas: number[];
}

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
 * idle. Samples of one function at one place are added up wherever it was called from.
 */
export function topFrames(profile: CpuProfile, n = 5): { frame: string; share: number }[] {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const self = new Map<string, number>();
  let busy = 0;
  profile.samples.forEach((id, i) => {
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
export function topFramesOf(path: string, n = 5): string {
  const profile = JSON.parse(readFileSync(path, 'utf8')) as CpuProfile;
  return topFrames(profile, n)
    .map((f) => `${f.frame} ${(f.share * 100).toFixed(1)}%`)
    .join(', ');
}
