// The dated report: a markdown table (figure, baseline of the same run, ratio, target) and an SVG
// chart of the ratios against their targets.
import { mkdirSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

export interface Row {
  group: string;
  name: string;
  ours: number;
  /** The baseline measured in the same run: the floor, the idle figure, the first quarter... */
  floor?: number;
  unit: string;
  lowerIsBetter?: boolean;
  target?: string;
  ok?: boolean;
}

const RESULTS = fileURLToPath(new URL('../../../bench/results/', import.meta.url));

const fmt = (n: number) => (n >= 100 ? n.toFixed(0) : n >= 10 ? n.toFixed(1) : n.toFixed(2));

function svg(rows: Row[]): string {
  const rated = rows.filter((r) => r.floor !== undefined && r.target !== undefined);
  const width = 760;
  const barH = 22;
  const left = 360;
  const scale = (x: number) => left + Math.min(x, 3) * ((width - left - 20) / 3);
  const height = 40 + rated.length * (barH + 8);
  const bars = rated
    .map((r, i) => {
      const ratio = r.ours / r.floor!;
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
    `<text x="10" y="18" font-size="13" font-weight="bold">Ratio to the baseline of the same run (green: target met)</text>\n` +
    `<line x1="${one}" y1="24" x2="${one}" y2="${height}" stroke="#555" stroke-dasharray="4"/>\n${bars}\n</svg>\n`
  );
}

export function writeReport(
  rows: Row[],
  meta: { rounds: number; seconds: number; cores: number; quick: boolean },
): string {
  mkdirSync(RESULTS, { recursive: true });
  const stamp = new Date().toISOString().slice(0, 16).replace(/[:T]/g, '-');
  const lines = [
    `# Benchmark, ${new Date().toISOString().slice(0, 16).replace('T', ' ')} UTC`,
    '',
    `${meta.cores} cores, shared with the load generator (autocannon, in the same machine). Medians of ${meta.rounds} round(s) of ${meta.seconds} s per measurement, ` +
      'ours (the server built by `pnpm build`, as operators run it) and the floor interleaved round by round. The floor is a minimal Hono handler doing the same single postgres.js query with the same pool settings. ' +
      `${meta.quick ? '**Quick run** (`--quick`): indicative only. ' : ''}Reproduce with \`./pnpmw bench\`.`,
    '',
    '| Measurement | Ours | Baseline (same run) | Ratio | Target | Met |',
    '|---|---:|---:|---:|---|:-:|',
    ...rows.map((r) => {
      // Latencies are whole milliseconds: a 0 ms baseline has no meaningful ratio.
      const ratio = r.floor !== undefined && r.floor > 0 ? `${(r.ours / r.floor).toFixed(2)}×` : '';
      const met = r.ok === undefined ? '' : r.ok ? 'yes' : '**no**';
      return `| ${r.name} | ${fmt(r.ours)} ${r.unit} | ${r.floor !== undefined ? `${fmt(r.floor)} ${r.unit}` : ''} | ${ratio} | ${r.target ?? ''} | ${met} |`;
    }),
    '',
    `![ratios](${stamp}.svg)`,
    '',
  ];
  const md = `${RESULTS}${stamp}.md`;
  writeFileSync(md, lines.join('\n'));
  writeFileSync(`${RESULTS}${stamp}.svg`, svg(rows));
  return md;
}
