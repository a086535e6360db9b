// The fuzzer: sends generated requests to a real server, one at a time, and holds every answer to
// the spec. Its checks, on every response: never a 5xx; a status documented for the operation, a
// body of the documented schema; a 4xx problem whenever the spec says the request is invalid; a
// failed request (or any read) changes nothing in the accounts table; no password, hash or token
// in any response. Then stateful sequences through the typed client (stateful.ts).

import { operations } from '@user-accounts/server/operations';
import fc from 'fast-check';
import { createSpecChecker } from '../spec-check.ts';
import type { Target } from '../targets.ts';
import { createOracle, type Sent } from './oracle.ts';
import { type FuzzRequest, isLive, requests, type Value } from './requests.ts';
import { runSequences } from './stateful.ts';

export interface FuzzOptions {
  /** Single generated requests. */
  runs: number;
  /** Stateful sequences of create/get/update/delete. */
  sequences: number;
  seed?: number;
  log?: (line: string) => void;
}

export interface FuzzReport {
  seed: number;
  cases: number;
  sequences: number;
  /** "POST /api/1/user/create 400 invalid_request" → how many times it was seen. */
  outcomes: Map<string, number>;
}

/** A well-formed id that names no account. */
const GHOST = '0193a1e4-0000-7000-8000-000000000000';
const WRONG_TOKEN = 'ua_not_a_token_of_this_server_0000000000';

interface LivePool {
  ids: string[];
  emails: string[];
}

function resolveLive(value: Value, pool: LivePool): Value {
  if (isLive(value)) {
    const list = value.live === 'id' ? pool.ids : pool.emails;
    const picked =
      list.length === 0 ? (value.live === 'id' ? GHOST : 'nobody@example.com') : list[value.index % list.length]!;
    return value.upper ? picked.toUpperCase() : picked;
  }
  if (Array.isArray(value)) return value.map((v) => resolveLive(v, pool));
  if (value !== null && typeof value === 'object') {
    const out: { [key: string]: Value } = {};
    for (const key of Object.keys(value)) {
      Object.defineProperty(out, key, {
        value: resolveLive(value[key]!, pool),
        enumerable: true,
        writable: true,
        configurable: true,
      });
    }
    return out;
  }
  return value;
}

const asQueryValue = (v: Value) => (typeof v === 'string' ? v : JSON.stringify(v));

/** The request as bytes on the wire, and what the oracle needs to know of it. */
function materialize(
  request: FuzzRequest,
  pool: LivePool,
  target: Target,
  tokenFor: (path: string) => string = () => target.token,
): { url: string; init: RequestInit; sent: Sent } | undefined {
  const url = new URL(request.path, target.baseUrl);
  for (const [name, value] of request.query) url.searchParams.append(name, asQueryValue(resolveLive(value, pool)));
  let text: string | undefined;
  if (request.body.kind === 'json') {
    const value = resolveLive(request.body.value, pool);
    text = JSON.stringify(value);
    const dup = request.body.duplicate;
    if (dup && value !== null && typeof value === 'object' && !Array.isArray(value)) {
      const pair = `${JSON.stringify(dup.key)}:${JSON.stringify(resolveLive(dup.value, pool))}`;
      text = text === '{}' ? `{${pair}}` : `${text.slice(0, -1)},${pair}}`;
    }
  } else if (request.body.kind === 'text') {
    text = request.body.text;
  }
  if (request.method === 'GET' || request.method === 'HEAD') text = undefined;
  let headers: Headers;
  try {
    headers = new Headers(request.headers);
  } catch {
    return undefined; // a header value no HTTP client can send
  }
  if (request.auth === 'token') headers.set('Authorization', tokenFor(request.path));
  if (request.auth === 'wrong') headers.set('Authorization', WRONG_TOKEN);
  const sentHeaders: Record<string, string> = {};
  for (const name of ['Content-Type', 'Idempotency-Key', 'If-Match']) {
    const v = headers.get(name);
    if (v !== null) sentHeaders[name] = v;
  }
  // A string body goes out as UTF-8, lone surrogates replaced; the query comes back decoded.
  const wire = text?.toWellFormed();
  const sent: Sent = {
    method: request.method,
    path: url.pathname,
    query: [...url.searchParams.entries()],
    headers: sentHeaders,
    text: wire,
    auth: request.auth,
  };
  return { url: url.toString(), init: { method: request.method, headers, body: wire }, sent };
}

/** Long strings, shortened for a readable failure. */
const clip = (s: string) => (s.length > 300 ? `${s.slice(0, 300)}… (${s.length} characters)` : s);

/** The passwords a body carried, to be sure no response ever repeats one. */
function passwordsIn(text: string | undefined): string[] {
  if (text === undefined) return [];
  try {
    const v = JSON.parse(text.replace(/^\ufeff/, '')) as { password?: unknown };
    return typeof v?.password === 'string' && v.password.trim().length >= 8
      ? [v.password, v.password.normalize('NFC')]
      : [];
  } catch {
    return [];
  }
}

export async function fuzz(target: Target, options: FuzzOptions): Promise<FuzzReport> {
  const log = options.log ?? ((line: string) => process.stdout.write(`${line}\n`));
  const seed = options.seed ?? Math.floor(Math.random() * 2 ** 31);
  log(`fuzz: seed ${seed}, ${options.runs} requests and ${options.sequences} sequences (replay: FUZZ_SEED=${seed})`);
  const checker = createSpecChecker();
  const verdict = createOracle(checker);
  const outcomes = new Map<string, number>();
  const pool: LivePool = { ids: [], emails: [] };

  // An account written outside the API: no request may ever reach or change it.
  await target.sql(
    `insert into users (email, name, password_hash) values ('outside.fuzz.${seed}@example.com', 'Outside', '$argon2id$v=19$m=19456,t=2,p=1$x$y')`,
  );
  const [outside] = await target.sql(`select id from users where email = 'outside.fuzz.${seed}@example.com'`);
  pool.ids.push(String(outside!.id));
  pool.emails.push(`outside.fuzz.${seed}@example.com`);

  const digest = async () =>
    String(
      (await target.sql(`select md5(coalesce(string_agg(u::text, '|' order by id), '')) as d from users u`))[0]!.d,
    );

  // The operations of the export scope, which API_TOKENS' token lacks, whose answer never holds a
  // hash (the data answer): fuzzed with a token that has it, so that their 200s and 404s are
  // checked too. export itself hands out hashes by design: it keeps the 403.
  const exportToken = (await target.createToken({ scopes: ['read', 'export'], label: 'fuzz: export' })).token;
  const hashless = new Set(
    operations.filter((op) => op.scope === 'export' && op.name !== 'exportUsers').map((op) => op.path),
  );
  const tokenFor = (path: string) => (hashless.has(path) ? exportToken : target.token);

  let cases = 0;
  const property = fc.asyncProperty(requests(checker.spec), async (request) => {
    const wire = materialize(request, pool, target, tokenFor);
    fc.pre(wire !== undefined);
    const { url, init, sent } = wire!;
    const before = await digest();
    const response = await fetch(url, init);
    const violations = await checker.check(sent.method, sent.path, response);
    const text = await response.text();
    const status = response.status;
    let code = '';
    try {
      code = (JSON.parse(text) as { code?: string }).code ?? '';
    } catch {}
    cases++;
    const key =
      `${sent.method} ${OPERATION_PATHS.has(sent.path) ? sent.path : '(other path)'} ${status} ${code}`.trim();
    outcomes.set(key, (outcomes.get(key) ?? 0) + 1);

    const problems = [...violations];
    const { invalid } = verdict(sent);
    if (status >= 500) problems.push(`answered ${status}`);
    if (invalid !== undefined && status < 400)
      problems.push(`answered ${status} although the spec requires a 4xx (${invalid})`);
    if (
      invalid === undefined &&
      status === 400 &&
      !('Idempotency-Key' in sent.headers) &&
      !('If-Match' in sent.headers) &&
      code !== 'weak_password' &&
      // Only the server knows which cursors it gave.
      !(code === 'invalid_cursor' && sent.query.some(([name]) => name === 'after')) &&
      // Only the server knows whether the account has a phone to verify (update's phoneVerified).
      !(code === 'invalid_request' && sent.path === '/api/1/user/update' && sent.text?.includes('"phoneVerified"')) &&
      // Only the server knows the site's roles: a role it has not defined is 400 at /roles/N.
      !(code === 'invalid_request' && sent.path.startsWith('/api/1/org/') && /\/roles\/\d+"/.test(text)) &&
      // Only the server knows a site's last event: an events `after` past it is 400 (the spec says so).
      !(code === 'invalid_request' && sent.path === '/api/1/events' && sent.query.some(([name]) => name === 'after'))
    ) {
      problems.push(`answered 400 ${code} to a request the spec allows`);
    }
    if (status >= 400 || sent.method === 'GET') {
      if ((await digest()) !== before) problems.push(`answered ${status} yet the accounts table changed`);
    }
    const everything = `${text}\n${[...response.headers.entries()].join('\n')}`;
    for (const secret of [...passwordsIn(sent.text), target.token, exportToken]) {
      if (everything.includes(secret)) problems.push('a password or token came back in the response');
    }
    if (everything.includes('$argon2')) problems.push('a password hash came back in the response');
    if (problems.length > 0) {
      const shown = JSON.stringify(sent, (_k, v: unknown) => (typeof v === 'string' ? clip(v) : v), 1);
      throw new Error(`${sent.method} ${clip(url)}\n${shown}\n→ ${status} ${clip(text)}\n${problems.join('\n')}`);
    }

    if (sent.path === '/api/1/user/create' && status === 201) {
      pool.ids.push((JSON.parse(text) as { result: { _userId: string } }).result._userId);
      pool.emails.push((JSON.parse(sent.text!) as { email: string }).email.trim());
    }
    if (sent.path === '/api/1/user/delete' && status === 200) {
      const id = (JSON.parse(sent.text!) as { _userId: string })._userId;
      pool.ids = pool.ids.filter((i) => i.toLowerCase() !== id.toLowerCase());
    }
  });
  // No shrinking: the server keeps state between runs, so a shrunk case would not be the same case.
  const details = await fc.check(property, { seed, numRuns: options.runs, endOnFailure: true, maxSkipsPerRun: 1000 });
  if (details.failed) {
    throw new Error(
      `fuzz: failed after ${details.numRuns} requests (seed ${seed}, path "${details.counterexamplePath}"):\n${(details.errorInstance as Error | undefined)?.message ?? 'no error recorded'}`,
    );
  }
  // The account from outside is exactly as it was written.
  const [after] = await target.sql(`select name, version from users where id = $1`, [outside!.id]);
  if (after?.name !== 'Outside' || after?.version !== 1)
    throw new Error('the account written outside the API was changed');

  await runSequences(target, { runs: options.sequences, seed });
  return { seed, cases, sequences: options.sequences, outcomes };
}

const OPERATION_PATHS = new Set(operations.map((op) => op.path));

/** The outcomes as lines, most frequent first, for the log. */
export function describeOutcomes(report: FuzzReport): string[] {
  return [...report.outcomes.entries()].sort((a, b) => b[1] - a[1]).map(([k, n]) => `${String(n).padStart(6)}  ${k}`);
}
