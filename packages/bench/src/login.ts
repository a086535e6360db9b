// The login and import figures of `pnpm bench` (issue 12): verify against the standalone
// argon2id verify rate, the time of an unknown email against a wrong password, and `cli import`
// of 100,000 accounts (hashes given) and of plain passwords, with the CLI's peak memory.
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { verify } from '@node-rs/argon2';
import { median, type Row } from './report.ts';

const CLI = fileURLToPath(new URL('../../server/dist/cli.js', import.meta.url));

interface Server {
  url: string;
  stop(): Promise<void>;
}

export interface LoginBench {
  /** A database of seeded accounts, all with `password`, hashed as `passwordHash`. */
  db: { url: string; emails: string[] };
  password: string;
  passwordHash: string;
  /** A fresh empty database (migrated), for the imports. */
  emptyDatabase(): Promise<{ url: string; drop(): Promise<void> }>;
  ours(db: { url: string }): Promise<Server>;
  load(
    url: string,
    connections: number,
    seconds: number,
    make: (i: number) => { method?: 'POST'; path: string; body?: string },
  ): Promise<{ rps: number; bad: number }>;
  log(line: string): void;
  rounds: number;
  seconds: number;
  token: string;
}

async function standaloneVerifyRate(passwordHash: string, password: string, seconds: number): Promise<number> {
  let done = 0;
  const until = performance.now() + seconds * 1000;
  await Promise.all(
    Array.from({ length: availableParallelism() }, async () => {
      while (performance.now() < until) {
        await verify(passwordHash, password);
        done++;
      }
    }),
  );
  return done / seconds;
}

/** Runs the built CLI; its peak RSS read from /proc while it runs (VmHWM only grows). */
async function cli(args: string[], env: Record<string, string>, nodeFlags: string[] = []) {
  const child = spawn(process.execPath, [...nodeFlags, CLI, ...args], {
    env: { PATH: process.env.PATH ?? '', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  child.stdout!.on('data', (c: Buffer) => {
    stdout += c.toString();
  });
  child.stderr!.resume();
  let peakMb = 0;
  const watch = setInterval(() => {
    try {
      const status = readFileSync(`/proc/${child.pid}/status`, 'utf8');
      peakMb = Math.max(peakMb, Number(/VmHWM:\s+(\d+)/.exec(status)?.[1] ?? 0) / 1024);
    } catch {}
  }, 50);
  const started = performance.now();
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  clearInterval(watch);
  return { code, stdout, seconds: (performance.now() - started) / 1000, peakMb };
}

export async function loginRows(b: LoginBench, hashRate: number): Promise<Row[]> {
  const rows: Row[] = [];
  const server = await b.ours(b.db);
  try {
    b.log('verify: standalone argon2id verify rate, then verify through the server');
    const standalone = await standaloneVerifyRate(b.passwordHash, b.password, b.seconds);
    const rates: number[] = [];
    for (let r = 0; r < b.rounds; r++) {
      const result = await b.load(server.url, 2 * availableParallelism(), b.seconds, (i) => ({
        method: 'POST',
        path: '/api/1/user/verify',
        body: JSON.stringify({ email: b.db.emails[i % b.db.emails.length], password: b.password }),
      }));
      if (result.bad > 0) b.log(`  warning: verify answered ${result.bad} non-2xx or errors`);
      rates.push(result.rps);
    }
    b.log(`  verify ${median(rates).toFixed(0)}/s; standalone verify ${standalone.toFixed(0)}/s`);
    rows.push({
      group: 'login',
      name: 'verify throughput vs standalone argon2id verify rate',
      ours: rates,
      baseline: [standalone],
      unit: 'per s',
      target: '≥ 0.8×',
      ok: median(rates) / standalone >= 0.8,
    });

    // One caller at a time, the two kinds interleaved, each email used once (no lockout).
    b.log('verify: unknown email against wrong password, 200 calls each');
    const times: { unknown: number[]; wrong: number[] } = { unknown: [], wrong: [] };
    const call = async (email: string, password: string) => {
      const t0 = performance.now();
      const response = await fetch(`${server.url}/api/1/user/verify`, {
        method: 'POST',
        headers: { authorization: b.token, 'content-type': 'application/json' },
        body: JSON.stringify({ email, password }),
      });
      await response.arrayBuffer();
      return performance.now() - t0;
    };
    for (let i = 0; i < 200; i++) {
      times.unknown.push(await call(`nobody.${i}.${Date.now()}@bench.example.com`, 'a wrong password'));
      times.wrong.push(await call(b.db.emails[10_000 + i]!, 'a wrong password'));
    }
    const unknown = median(times.unknown);
    const wrong = median(times.wrong);
    b.log(`  median ${unknown.toFixed(1)} ms unknown email, ${wrong.toFixed(1)} ms wrong password`);
    rows.push({
      group: 'login',
      name: 'verify median, unknown email vs wrong password',
      ours: [unknown],
      baseline: [wrong],
      unit: 'ms',
      lowerIsBetter: true,
      target: 'within ±10%',
      ok: Math.abs(unknown / wrong - 1) <= 0.1,
    });
  } finally {
    await server.stop();
  }

  // cli import, as an operator runs the built CLI.
  const file = join(tmpdir(), `ua-bench-import-${process.pid}.ndjson`);
  for (const [label, count, row, flags] of [
    ['hashes given', 100_000, (i: number) => ({ passwordHash: b.passwordHash, i }), []],
    [
      'hashes given, --max-semi-space-size=4',
      100_000,
      (i: number) => ({ passwordHash: b.passwordHash, i }),
      ['--max-semi-space-size=4'],
    ],
    [
      'plain passwords',
      Math.round(Math.max(hashRate, 20) * 15),
      (i: number) => ({ password: `Imported-password-${i}`, i }),
    ],
  ] as const) {
    const lines: string[] = [];
    for (let i = 0; i < count; i++) {
      const { i: _, ...secret } = row(i);
      lines.push(JSON.stringify({ email: `imported.${i}@bench.example.com`, name: `Imported ${i}`, ...secret }));
    }
    writeFileSync(file, `${lines.join('\n')}\n`);
    const target = await b.emptyDatabase();
    try {
      b.log(`cli import: ${count.toLocaleString('en')} accounts, ${label}`);
      const run = await cli(['import', '--site', 'default', file], { DATABASE_URL: target.url }, [...(flags ?? [])]);
      if (run.code !== 0) b.log(`  warning: cli import exited ${run.code}: ${run.stdout}`);
      const rate = count / run.seconds;
      b.log(`  ${rate.toFixed(0)} accounts/s, peak RSS ${run.peakMb.toFixed(0)} MB`);
      if (label === 'plain passwords') {
        rows.push({
          group: 'import',
          name: 'cli import of plain passwords vs standalone argon2id hash rate',
          ours: [rate],
          baseline: [hashRate],
          unit: 'per s',
          target: '≥ 0.8×',
          ok: rate / hashRate >= 0.8,
        });
      } else {
        rows.push({
          group: 'import',
          name: `cli import of 100,000 accounts, ${label}`,
          ours: [rate],
          unit: 'accounts/s',
          target: '≥ 5000/s',
          ok: rate >= 5000,
        });
      }
      rows.push({
        group: 'import',
        name: `cli import peak RSS, ${label}`,
        ours: [run.peakMb],
        unit: 'MB',
        target: '≤ 250 MB',
        ok: run.peakMb <= 250,
      });
    } finally {
      await target.drop();
    }
  }
  return rows;
}
