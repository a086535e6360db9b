// The dated report: a markdown table (each figure's median and the spread of its rounds, the
// baseline of the same run, the ratio of the medians, the target) and an SVG chart of the ratios
// against their targets. Only a full run that is not noisy goes to bench/results/; a quick run
// and a noisy one go to a scratch folder outside the repository, marked as not a result.
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export interface Row {
  group: string;
  name: string;
  /** Ours: one value per round (a single value when the figure is measured once). */
  ours: number[];
  /** The baseline measured in the same run, per round: the floor, the peer, the idle figure... */
  baseline?: number[];
  unit: string;
  lowerIsBetter?: boolean;
  target?: string;
  ok?: boolean;
  /** Ours' top five frames by self time in a profiled run of the same load (profile.ts). */
  frames?: string | undefined;
}

/** The floor's throughput in one scenario, round by round: how much the machine itself varied. */
export interface FloorVariation {
  scenario: string;
  rps: number[];
}

export interface ReportMeta {
  /** A suffix of the file's name for a run of one scenario (`neighbours`: <date>-neighbours.md). */
  name?: string | undefined;
  rounds: number;
  seconds: number;
  cores: number;
  quick: boolean;
  floor: FloorVariation[];
  /** Beyond this (max − min) / median of the floor's throughput, the run is noisy. */
  noiseLimit: number;
  /** Paragraphs after the table: what the peer is and which of its paths were measured. */
  notes: string[];
}

const RESULTS = fileURLToPath(new URL('../../../bench/results/', import.meta.url));
/** Quick and noisy runs: kept for a look, never where results are committed from. */
export const SCRATCH = join(tmpdir(), 'ua-bench');

/** The middle value; of an even count, the mean of the two middle ones (of 2 rounds, their mean). */
export function median(xs: number[]): number {
  const sorted = [...xs].sort((a, b) => a - b);
  const mid = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}
/** (max − min) / median: 0 for a single round. */
export const variation = (xs: number[]) => (Math.max(...xs) - Math.min(...xs)) / median(xs);
export const noisy = (meta: Pick<ReportMeta, 'floor' | 'noiseLimit'>) =>
  meta.floor.filter((f) => variation(f.rps) > meta.noiseLimit);

const fmt = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2));
const pct = (x: number) => `${(x * 100).toFixed(1)}%`;

/** "2441 req/s (2300–2500)": the median, then the lowest and highest round when there are several. */
function figure(xs: number[] | undefined, unit: string): string {
  if (xs === undefined) return '';
  const spread = xs.length > 1 ? ` (${fmt(Math.min(...xs))}–${fmt(Math.max(...xs))})` : '';
  return `${fmt(median(xs))} ${unit}${spread}`;
}

function svg(rows: Row[], title: string): string {
  const rated = rows.filter((r) => r.baseline !== undefined && r.target !== undefined);
  const width = 760;
  const barH = 22;
  const left = 360;
  const scale = (x: number) => left + Math.min(x, 3) * ((width - left - 20) / 3);
  const height = 40 + rated.length * (barH + 8);
  const bars = rated
    .map((r, i) => {
      const ratio = median(r.ours) / median(r.baseline!);
      const y = 30 + i * (barH + 8);
      const color = r.ok ? '#2e7d32' : '#c62828';
      return (
        `<text x="${left - 8}" y="${y + 15}" text-anchor="end" font-size="12">${r.name.replace(/&/g, '&amp;')}</text>` +
        `<rect x="${left}" y="${y}" width="${scale(ratio) - left}" height="${barH}" fill="${color}"/>` +
        `<text x="${scale(ratio) + 4}" y="${y + 15}" font-size="12">${ratio.toFixed(2)}× (target ${r.target})</text>`
      );
    })
    .join('\n');
  const one = scale(1);
  return (
    `<svg xmlns="http://www.w3.org/2000/svg" width="${width}" height="${height}" font-family="sans-serif">\n` +
    `<text x="10" y="18" font-size="13" font-weight="bold">${title}</text>\n` +
    `<line x1="${one}" y1="24" x2="${one}" y2="${height}" stroke="#555" stroke-dasharray="4"/>\n${bars}\n</svg>\n`
  );
}

/**
 * Where ours spent its time, for each row measured with a profile: the top five frames by self
 * time, in one more run of the same load with `--cpu-prof` (shares of the time it was not idle).
 */
function profileSection(rows: Row[]): string[] {
  const profiled = rows.filter((r) => r.frames);
  if (profiled.length === 0) return [];
  return [
    "**Where ours spends its time**: each row's top five frames by self time, from one more run of the same load " +
      'with `node --cpu-prof` (not a measured round), as a share of the time the server was not idle.',
    '',
    ...profiled.map((r) => `- ${r.name}: ${r.frames}`),
    '',
  ];
}

/** Writes the report and its chart; returns the markdown file's path. */
export function writeReport(rows: Row[], meta: ReportMeta): string {
  const bad = noisy(meta);
  const scratch = meta.quick || bad.length > 0;
  const dir = scratch ? `${SCRATCH}/` : RESULTS;
  mkdirSync(dir, { recursive: true });
  const now = new Date().toISOString();
  const stamp = `${now.slice(0, 16).replace(/[:T]/g, '-')}${meta.name ? `-${meta.name}` : ''}${meta.quick ? '-quick' : ''}${bad.length > 0 ? '-noisy' : ''}`;
  const status = [
    ...(bad.length > 0
      ? [
          `**NOISY — not a result.** The floor's throughput varied by more than ${pct(meta.noiseLimit)} between rounds ` +
            `(${bad.map((f) => `${f.scenario}: ${pct(variation(f.rps))}`).join('; ')}): the machine was busy with ` +
            'something else, so the figures below say as much about it as about the server. The run exited 1.',
          '',
        ]
      : []),
    ...(meta.quick
      ? [
          '**Quick run (`--quick`) — not a result.** Fewer and shorter scenarios, for a developer loop; ' +
            'written outside `bench/results/`. Run `./pnpmw bench` for a result.',
          '',
        ]
      : []),
  ];
  const floor =
    meta.floor.length === 0
      ? 'Floor variation between rounds: not measured in this run.'
      : `Floor variation between rounds ((max − min) / median of its throughput; a run is noisy above ${pct(meta.noiseLimit)}): ` +
        `${meta.floor.map((f) => `${f.scenario} ${pct(variation(f.rps))}`).join(', ')}.`;
  const lines = [
    `# Benchmark, ${now.slice(0, 16).replace('T', ' ')} UTC${bad.length > 0 ? ' — NOISY' : ''}${meta.quick ? ' (quick)' : ''}`,
    '',
    ...status,
    `${meta.cores} cores, shared with the load generator (autocannon, in the same machine). ${meta.rounds} round(s) of ${meta.seconds} s per measurement: ` +
      'each figure is the median of its rounds, with the lowest and highest round in parentheses; the ratio is of the medians. ' +
      'Ours is the server built by `pnpm build`, as operators run it; where it is compared with the floor or the peer, ' +
      'the two are interleaved round by round, each round on freshly started processes. ' +
      'The floors are a minimal Hono handler (`floor.ts`) and a bare `node:http` one (`floor-http.ts`), each doing the same single ' +
      'postgres.js query with the same pool settings: what separates the two is the framework, what separates ours from the Hono floor is ours. ' +
      'Reproduce with `./pnpmw bench`.',
    '',
    floor,
    '',
    '| Measurement | Ours: median (min–max) | Baseline, same run: median (min–max) | Ratio, ours / baseline | Target | Met |',
    '|---|---:|---:|---:|---|:-:|',
    ...rows.map((r) => {
      // Latencies are whole milliseconds: a 0 ms baseline has no meaningful ratio.
      const base = r.baseline === undefined ? 0 : median(r.baseline);
      const ratio = base > 0 ? `${(median(r.ours) / base).toFixed(2)}×` : '';
      const met = r.ok === undefined ? '' : r.ok ? 'yes' : '**no**';
      return `| ${r.name} | ${figure(r.ours, r.unit)} | ${figure(r.baseline, r.unit)} | ${ratio} | ${r.target ?? ''} | ${met} |`;
    }),
    '',
    ...profileSection(rows),
    ...meta.notes.flatMap((n) => [n, '']),
    `![ratios](${stamp}.svg)`,
    '',
  ];
  const md = `${dir}${stamp}.md`;
  writeFileSync(md, lines.join('\n'));
  const title =
    scratch && bad.length > 0
      ? 'NOISY run, not a result: ratio to the baseline of the same run'
      : `Ratio to the baseline of the same run (green: target met)${meta.quick ? ', quick run' : ''}`;
  writeFileSync(`${dir}${stamp}.svg`, svg(rows, title));
  return md;
}
