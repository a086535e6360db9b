// The two-step login and the passkey login of `pnpm bench` (issue 29): logins completed per second with a TOTP factor
// (verify's 403 second_factor_required, then factor/verify with the ticket and a code) against
// password-only verifies, the same closed loop of callers for both, rounds interleaved, so that
// the ratio is of one run. The accounts with a factor come in by import with their TOTP secrets
// (issue 29, point 4), as a migration brings them.
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { generateSecret, generateSync } from 'otplib';
import postgres from 'postgres';
import {
  type CreationOptions,
  type RequestOptions,
  SoftAuthenticator,
} from '../../contract-tests/src/webauthn/soft-authenticator.ts';
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

export interface PasskeyBench {
  /** Seeded accounts without a factor (their emails, for the password-only baseline), all with `password`. */
  db: { url: string; emails: string[] };
  password: string;
  passwordHash: string;
  ours(db: { url: string }): Promise<Server>;
  log(line: string): void;
  rounds: number;
  seconds: number;
  token: string;
  /** Accounts given a passkey: each caller logs in with its own, one at a time (their counters only go up). */
  accounts: number;
}

const ORIGIN = 'http://localhost:5173';

/**
 * Passkey login (issue 29, point 3): passkey/options by email, the assertion of a software
 * authenticator (the contract tests' own, node:crypto), passkey/verify, against password-only
 * verify in the same run. The site's relying party is set as `cli site set --rp-id --origins` sets it.
 */
export async function passkeyRows(b: PasskeyBench): Promise<Row[]> {
  const sql = postgres(b.db.url, { max: 1, onnotice: () => {} });
  const stamp = Date.now().toString(36);
  try {
    await sql`insert into site_settings (site, rp_id, rp_name, rp_origins)
      values ('default', 'localhost', 'Bench', ${sql.json([ORIGIN])})
      on conflict (site) do update set rp_id = excluded.rp_id, rp_origins = excluded.rp_origins`;
    await sql`insert into users (id, site, email, name, password_hash, origin)
      select gen_random_uuid(), 'default', 'passkey.' || ${stamp} || '.' || i || '@bench.example.com', 'Passkey ' || i,
        ${b.passwordHash}, 'api'
      from generate_series(1, ${b.accounts}) as i`;
  } finally {
    await sql.end();
  }
  const server = await b.ours(b.db);
  const post = async (path: string, body: unknown) => {
    const response = await fetch(`${server.url}${path}`, {
      method: 'POST',
      headers: { authorization: b.token, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    return { status: response.status, json: (await response.json()) as { result?: Record<string, unknown> } };
  };
  try {
    b.log(`passkey login: registering a passkey for each of ${b.accounts} accounts`);
    const authenticator = new SoftAuthenticator(ORIGIN);
    const emails = Array.from({ length: b.accounts }, (_, i) => `passkey.${stamp}.${i + 1}@bench.example.com`);
    for (const email of emails) {
      const user = await fetch(`${server.url}/api/1/user/get?email=${encodeURIComponent(email)}`, {
        headers: { authorization: b.token },
      });
      const userId = ((await user.json()) as { result: { _userId: string } }).result._userId;
      const options = await post('/api/1/user/factor/passkey/options', { _userId: userId });
      const registered = await post('/api/1/user/factor/passkey', {
        _userId: userId,
        response: authenticator.register(options.json.result!.options as CreationOptions),
      });
      if (registered.status !== 201) throw new Error(`passkey registration answered ${registered.status}`);
    }

    const callers = 2 * availableParallelism();
    // Each caller its own accounts, one login at a time: a credential's counter only goes up.
    const turns = Array.from({ length: callers }, () => 0);
    const passkeyLogin = (caller: number) => async () => {
      const mine = emails.filter((_, i) => i % callers === caller);
      const email = mine[turns[caller]!++ % mine.length]!;
      const options = await post('/api/1/user/passkey/options', { email });
      if (options.status !== 200) return false;
      const response = authenticator.assert(options.json.result!.options as RequestOptions);
      return (await post('/api/1/user/passkey/verify', { response })).status === 200;
    };
    let plainNext = 0;
    const passwordOnly = async () => {
      const email = b.db.emails[plainNext++ % b.db.emails.length]!;
      return (await post('/api/1/user/verify', { email, password: b.password })).status === 200;
    };
    const perCaller = async (seconds: number) => {
      const results = await Promise.all(
        Array.from({ length: callers }, (_, c) => closedLoop(1, seconds, passkeyLogin(c))),
      );
      return {
        rate: results.reduce((sum, r) => sum + r.rate, 0),
        failed: results.reduce((sum, r) => sum + r.failed, 0),
      };
    };
    await perCaller(1); // warm-up
    const rates = { passkey: [] as number[], password: [] as number[] };
    let failed = 0;
    for (let r = 0; r < b.rounds; r++) {
      const plain = await closedLoop(callers, b.seconds, passwordOnly);
      const passkey = await perCaller(b.seconds);
      rates.password.push(plain.rate);
      rates.passkey.push(passkey.rate);
      failed += plain.failed + passkey.failed;
    }
    if (failed > 0) b.log(`  warning: ${failed} logins did not complete`);
    b.log(
      `  passkey login ${median(rates.passkey).toFixed(0)}/s; password-only verify ${median(rates.password).toFixed(0)}/s (${callers} callers)`,
    );
    return [
      {
        group: 'login',
        name: `passkey login (passkey/options + passkey/verify, ES256) vs password-only verify, ${callers} callers`,
        ours: rates.passkey,
        baseline: rates.password,
        unit: 'logins/s',
      },
    ];
  } finally {
    await server.stop();
  }
}
