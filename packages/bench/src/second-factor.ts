// The two-step login of `pnpm bench` (issue 29): logins completed per second with a TOTP factor
// (verify's 403 second_factor_required, then factor/verify with the ticket and a code) against
// password-only verifies, the same closed loop of callers for both, rounds interleaved, so that
// the ratio is of one run. The accounts with a factor come in by import with their TOTP secrets
// (issue 29, point 4), as a migration brings them.
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { generateSecret, generateSync } from 'otplib';
import { median, type Row } from './report.ts';

interface Server {
  url: string;
  stop(): Promise<void>;
}

export interface SecondFactorBench {
  /** Seeded accounts without a factor, all with `password` (hashed as `passwordHash`). */
  db: { url: string; emails: string[] };
  password: string;
  passwordHash: string;
  ours(db: { url: string }, env?: Record<string, string>): Promise<Server>;
  log(line: string): void;
  rounds: number;
  seconds: number;
  token: string;
  /** How many accounts with a factor to import: each logs in at most once (a TOTP step is good once). */
  accounts: number;
}

/** `callers` loops each running `task` until `seconds` pass: completed tasks per second, and the failed. */
async function closedLoop(callers: number, seconds: number, task: () => Promise<boolean>) {
  let done = 0;
  let failed = 0;
  const until = performance.now() + seconds * 1000;
  const started = performance.now();
  await Promise.all(
    Array.from({ length: callers }, async () => {
      while (performance.now() < until) {
        if (await task()) done++;
        else failed++;
      }
    }),
  );
  return { rate: done / ((performance.now() - started) / 1000), failed };
}

export async function secondFactorRows(b: SecondFactorBench): Promise<Row[]> {
  const key = `bench:${randomBytes(32).toString('base64')}`;
  const server = await b.ours(b.db, { FACTOR_ENCRYPTION_KEY: key });
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { authorization: b.token, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, json: (await response.json()) as Record<string, unknown> };
  };
  try {
    b.log(`two-step login: importing ${b.accounts.toLocaleString('en')} accounts with their TOTP secrets`);
    const secrets: { email: string; secret: string }[] = [];
    const stamp = Date.now().toString(36);
    for (let from = 0; from < b.accounts; from += 1000) {
      const rows = Array.from({ length: Math.min(1000, b.accounts - from) }, (_, k) => {
        const email = `totp.${stamp}.${from + k}@bench.example.com`;
        const secret = generateSecret({ length: 20 });
        secrets.push({ email, secret });
        return { email, name: `Totp ${from + k}`, passwordHash: b.passwordHash, totp: { secret } };
      });
      const { status, json } = await post('/api/1/user/import', { users: rows });
      const created = (json.result as { created?: number } | undefined)?.created;
      if (status !== 200 || created !== rows.length)
        throw new Error(`import with TOTP answered ${status}: ${JSON.stringify(json).slice(0, 300)}`);
    }

    let next = 0;
    let reused = false;
    const steps = { first: [] as number[], second: [] as number[] };
    const twoStep = async () => {
      if (next >= secrets.length) reused = true;
      const account = secrets[next++ % secrets.length]!;
      const t0 = performance.now();
      const first = await post('/api/1/user/verify', { email: account.email, password: b.password });
      const t1 = performance.now();
      if (first.status !== 403 || typeof first.json.ticket !== 'string') return false;
      const code = generateSync({ secret: account.secret, epoch: Date.now() / 1000 });
      const second = await post('/api/1/user/factor/verify', { ticket: first.json.ticket, code });
      steps.first.push(t1 - t0);
      steps.second.push(performance.now() - t1);
      return second.status === 200;
    };
    let plainNext = 0;
    const passwordOnly = async () => {
      const email = b.db.emails[plainNext++ % b.db.emails.length]!;
      return (await post('/api/1/user/verify', { email, password: b.password })).status === 200;
    };

    const callers = 2 * availableParallelism();
    const rates = { twoStep: [] as number[], password: [] as number[] };
    let failed = 0;
    await closedLoop(callers, 1, passwordOnly); // warm-up
    for (let r = 0; r < b.rounds; r++) {
      const plain = await closedLoop(callers, b.seconds, passwordOnly);
      const both = await closedLoop(callers, b.seconds, twoStep);
      rates.password.push(plain.rate);
      rates.twoStep.push(both.rate);
      failed += plain.failed + both.failed;
    }
    if (failed > 0) b.log(`  warning: ${failed} logins did not complete`);
    b.log(
      `  median ${median(steps.first).toFixed(0)} ms verify (403), ${median(steps.second).toFixed(0)} ms factor/verify`,
    );
    if (reused) b.log('  warning: accounts with a factor were used twice (a code of one step is good once)');
    b.log(
      `  two-step login ${median(rates.twoStep).toFixed(0)}/s; password-only verify ${median(rates.password).toFixed(0)}/s (${callers} callers)`,
    );
    return [
      {
        group: 'login',
        name: `two-step login (verify + factor/verify, TOTP) vs password-only verify, ${callers} callers`,
        ours: rates.twoStep,
        baseline: rates.password,
        unit: 'logins/s',
      },
      {
        group: 'login',
        name: 'two-step login: median time of its factor/verify vs its verify (403)',
        ours: [median(steps.second)],
        baseline: [median(steps.first)],
        unit: 'ms',
        lowerIsBetter: true,
      },
    ];
  } finally {
    await server.stop();
  }
}
