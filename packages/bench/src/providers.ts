// Sign-in with a provider (issue 59, "Done when"): ours' CPU per provider/callback with the
// provider's own time excluded, provider/start's throughput, and another site's login while either
// runs flat out (a victim check, as the heavy reads' of issue 41).
//
// The provider is a stub OpenID Connect issuer in the bench's own process (startStub: discovery,
// JWKS, a token endpoint answering an RS256 ID token, as Google's): its work (an RSA signature a
// callback) is on the bench's CPU, never on the server's, whose CPU time is read from
// /proc/<pid>/stat around each measured phase; what a phase's CPU divided by its requests says is
// ours alone (the server's background, the sequencer and the workers' looks, included: they are
// small against a phase). The stub's code is the ID token's subject and nonce, read back at the
// token endpoint: no state kept there, and no browser step.
//
// Every callback is a real one: its state made by a provider/start a moment before (single use),
// the code exchanged with PKCE by openid-client, the ID token's signature, issuer, audience, nonce,
// expiry checked, then the identity's outcome. The timed callbacks are logins of identities that
// exist (200, a session issued: `session: {}`), the usual case; the first callback of each of the
// identities, which creates its account (201), is timed apart once.
//
// Each round: (1) shop's victim alone: site `victim`'s user/verify with the right password
// (argon2id at the server's own parameters), 2 connections; (2) provider/start at 16 connections
// (autocannon), its req/s, latency and CPU per request; (3) the victim again while (2) runs; (4)
// states made, then as many callbacks at 16 connections, their req/s, latency (the stub's time
// included) and CPU per callback; (5) the victim while callbacks run. The rate limits are lifted,
// as in the rest of the bench: the victim figures are what a site's sign-ins do to another's login
// with nothing but the CPU between them.
import { createSign, generateKeyPairSync, randomBytes } from 'node:crypto';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { loadavg } from 'node:os';
import { openPostgres } from '@user-accounts/server/db';
import { checkProvider } from '@user-accounts/server/providers/options';
import { setProvider } from '@user-accounts/server/providers/providers';
import { createToken } from '@user-accounts/server/tokens';
import postgres from 'postgres';
import type { LoadResult, Make } from './load-types.ts';
import { cpuMs } from './proc.ts';
import { median, type Row } from './report.ts';

export interface ProvidersBench {
  db: { url: string };
  /** `password` hashed as the server hashes it: the victim's accounts. */
  password: string;
  passwordHash: string;
  ours(): Promise<{ url: string; pid: number; stop(): Promise<void> }>;
  load(url: string, connections: number, seconds: number, make: Make): Promise<LoadResult>;
  log(line: string): void;
  rounds: number;
  seconds: number;
  /** The bench's token (site `default`, scopes read, write, verify, events). */
  token: string;
}

const CALLBACK = 'https://shop.example.com/auth/callback';
/** The stub's client: the `aud` of its ID tokens (sso.ts's connection names it too). */
export const CLIENT_ID = 'bench-client';
const CONNECTIONS = 16;
const VICTIM_CONNECTIONS = 2;
/** Identities that sign in again and again (each created by its first callback). */
const PEOPLE = 400;
const VICTIM_ACCOUNTS = 200;
const VICTIM_P50_TARGET = 3;

const b64u = (data: Buffer | string) => Buffer.from(data).toString('base64url');

/**
 * The stub issuer (see the top): answers as a provider does, keeps nothing, counts its tokens. Its
 * people's emails are `{sub}@{emailDomain}` (sso.ts names an organization's verified domain).
 */
export async function startStub(options: { emailDomain?: string } = {}) {
  const emailDomain = options.emailDomain ?? 'people.bench.example.org';
  const { privateKey, publicKey } = generateKeyPairSync('rsa', { modulusLength: 2048 });
  const jwk = { ...publicKey.export({ format: 'jwk' }), kid: 'bench-1', alg: 'RS256', use: 'sig' };
  let issuer = '';
  let tokens = 0;
  const sign = (payload: Record<string, unknown>) => {
    const data = `${b64u(JSON.stringify({ alg: 'RS256', kid: 'bench-1', typ: 'JWT' }))}.${b64u(JSON.stringify(payload))}`;
    return `${data}.${b64u(createSign('RSA-SHA256').update(data).sign(privateKey))}`;
  };
  const server = createServer((req, res) => {
    const json = (status: number, body: unknown) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const path = new URL(req.url ?? '/', issuer).pathname;
      if (path === '/.well-known/openid-configuration')
        return json(200, {
          issuer,
          authorization_endpoint: `${issuer}/authorize`,
          token_endpoint: `${issuer}/token`,
          jwks_uri: `${issuer}/jwks`,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
          code_challenge_methods_supported: ['S256'],
          authorization_response_iss_parameter_supported: true,
        });
      if (path === '/jwks') return json(200, { keys: [jwk] });
      if (path === '/token') {
        const code = new URLSearchParams(Buffer.concat(chunks).toString('utf8')).get('code') ?? '';
        let who: { sub: string; nonce: string };
        try {
          who = JSON.parse(Buffer.from(code.split('.')[0]!, 'base64url').toString('utf8'));
        } catch {
          return json(400, { error: 'invalid_grant' });
        }
        tokens++;
        const now = Math.floor(Date.now() / 1000);
        return json(200, {
          access_token: b64u(randomBytes(24)),
          token_type: 'Bearer',
          expires_in: 3600,
          id_token: sign({
            iss: issuer,
            aud: CLIENT_ID,
            sub: who.sub,
            nonce: who.nonce,
            iat: now,
            exp: now + 300,
            email: `${who.sub}@${emailDomain}`,
            email_verified: true,
            name: `Person ${who.sub}`,
          }),
        });
      }
      json(404, { error: 'not_found' });
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  issuer = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    issuer,
    tokens: () => tokens,
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

interface Started {
  state: string;
  nonce: string;
}

/** A phase of callbacks (or starts) run by `workers` loops over `items`: what each took, and how long in all. */
export async function closedLoop<T>(
  items: T[],
  workers: number,
  one: (item: T) => Promise<boolean>,
): Promise<{ ms: number; latencies: number[]; bad: number }> {
  const latencies: number[] = [];
  let bad = 0;
  let next = 0;
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: workers }, async () => {
      while (next < items.length) {
        const item = items[next++]!;
        const t = performance.now();
        if (!(await one(item))) bad++;
        latencies.push(performance.now() - t);
      }
    }),
  );
  return { ms: performance.now() - t0, latencies, bad };
}

export const percentile = (xs: number[], p: number) => {
  const sorted = [...xs].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor((sorted.length * p) / 100))] ?? 0;
};

export async function providerRows(b: ProvidersBench): Promise<{ rows: Row[]; notes: string[] }> {
  const loadBefore = loadavg();
  const stub = await startStub();
  // The provider, as `cli provider set` keeps it (its client secret sealed under the database's own
  // key, as on a server without FACTOR_ENCRYPTION_KEY); the victim site's token and accounts.
  const database = await openPostgres(b.db.url);
  let victimToken: string;
  try {
    const config = checkProvider({
      site: 'default',
      name: 'bench',
      issuer: stub.issuer,
      clientId: CLIENT_ID,
      scopes: 'openid,email,profile',
      redirectUris: CALLBACK,
      onNewPerson: 'create',
    });
    await setProvider(database.db, config, 'bench-client-secret-0123456789', undefined);
    ({ token: victimToken } = await createToken(database.db, { site: 'victim', scopes: ['verify'], label: 'victim' }));
  } finally {
    await database.close();
  }
  const sql = postgres(b.db.url, { max: 1, onnotice: () => {} });
  await sql`insert into users (id, site, email, name, password_hash, origin)
    select gen_random_uuid(), 'victim', 'victim' || i || '@victim.example.com', 'Victim ' || i, ${b.passwordHash}, 'api'
    from generate_series(1, ${VICTIM_ACCOUNTS}) as i`;
  await sql.end();

  const server = await b.ours();
  const auth = { authorization: `Bearer ${b.token}`, 'content-type': 'application/json' };
  const startBody = JSON.stringify({ provider: 'bench', redirectUri: CALLBACK });
  const startOne = async (): Promise<Started> => {
    const res = await fetch(`${server.url}/api/1/provider/start`, { method: 'POST', headers: auth, body: startBody });
    const body = (await res.json()) as { result?: { authorizationUrl: string } };
    if (res.status !== 200 || body.result === undefined) throw new Error(`provider/start: ${res.status}`);
    const url = new URL(body.result.authorizationUrl);
    return { state: url.searchParams.get('state')!, nonce: url.searchParams.get('nonce')! };
  };
  /** `n` states, made 8 at a time (not timed). */
  const states = async (n: number) => {
    const made: Started[] = [];
    await closedLoop(Array.from({ length: n }), 8, async () => {
      made.push(await startOne());
      return true;
    });
    return made;
  };
  let seq = 0;
  const callbackOne = async ({ state, nonce, sub }: Started & { sub: string }) => {
    const code = `${b64u(JSON.stringify({ sub, nonce }))}.${seq++}`;
    const callbackUrl = `${CALLBACK}?code=${code}&state=${state}&iss=${encodeURIComponent(stub.issuer)}`;
    const res = await fetch(`${server.url}/api/1/provider/callback`, {
      method: 'POST',
      headers: auth,
      body: JSON.stringify({ callbackUrl, session: {} }),
    });
    await res.arrayBuffer();
    return res.status === 200 || res.status === 201;
  };
  const person = (i: number) => `p${i % PEOPLE}`;
  const victim: Make = (i) => ({
    method: 'POST',
    path: '/api/1/user/verify',
    body: JSON.stringify({ email: `victim${(i % VICTIM_ACCOUNTS) + 1}@victim.example.com`, password: b.password }),
    headers: { authorization: `Bearer ${victimToken}` },
  });

  const notes: string[] = [];
  const quiet: LoadResult[] = [];
  const duringStarts: LoadResult[] = [];
  const duringCallbacks: LoadResult[] = [];
  const starts: { rps: number; p50: number; p99: number; cpu: number }[] = [];
  const callbacks: { rps: number; p50: number; p99: number; cpu: number; bad: number }[] = [];
  let createCpu = 0;
  try {
    // Warm-up, and the accounts: each person's first callback creates it (201), timed apart.
    const first = await states(PEOPLE);
    const cpu0 = cpuMs(server.pid);
    const made = await closedLoop(
      first.map((s, i) => ({ ...s, sub: person(i) })),
      CONNECTIONS,
      callbackOne,
    );
    createCpu = (cpuMs(server.pid) - cpu0) / PEOPLE;
    if (made.bad > 0) throw new Error(`${made.bad} of the first callbacks failed`);
    b.log(`  ${PEOPLE} accounts created by their first callback, ${createCpu.toFixed(2)} ms CPU each`);
    let callbackRate = 200;
    for (let r = 0; r < b.rounds; r++) {
      quiet.push(await b.load(server.url, VICTIM_CONNECTIONS, b.seconds, victim));

      let c0 = cpuMs(server.pid);
      const started = await b.load(server.url, CONNECTIONS, b.seconds, () => ({
        method: 'POST',
        path: '/api/1/provider/start',
        body: startBody,
      }));
      starts.push({
        rps: started.rps,
        p50: started.p50,
        p99: started.p99,
        cpu: (cpuMs(server.pid) - c0) / Math.max(1, started.requests),
      });
      const startLoad = b.load(server.url, CONNECTIONS, b.seconds + 2, () => ({
        method: 'POST',
        path: '/api/1/provider/start',
        body: startBody,
      }));
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      duringStarts.push(await b.load(server.url, VICTIM_CONNECTIONS, b.seconds, victim));
      await startLoad;

      const n = Math.max(200, Math.round(callbackRate * b.seconds));
      const pool = (await states(n)).map((s, i) => ({ ...s, sub: person(i + r) }));
      c0 = cpuMs(server.pid);
      const run = await closedLoop(pool, CONNECTIONS, callbackOne);
      const cpu = (cpuMs(server.pid) - c0) / n;
      callbackRate = (n * 1000) / run.ms;
      callbacks.push({
        rps: callbackRate,
        p50: percentile(run.latencies, 50),
        p99: percentile(run.latencies, 99),
        cpu,
        bad: run.bad,
      });
      // Enough states for the callbacks to outlast the victim's measurement.
      const more = (await states(Math.round(callbackRate * (b.seconds + 3)))).map((s, i) => ({
        ...s,
        sub: person(i + r + 7),
      }));
      const busy = closedLoop(more, CONNECTIONS, callbackOne);
      await new Promise((resolve) => setTimeout(resolve, 1_000));
      duringCallbacks.push(await b.load(server.url, VICTIM_CONNECTIONS, b.seconds, victim));
      await busy;
      b.log(
        `  round ${r + 1}: start ${started.rps.toFixed(0)} req/s, ${starts.at(-1)!.cpu.toFixed(2)} ms CPU; callback ${callbackRate.toFixed(0)} req/s, ${cpu.toFixed(2)} ms CPU; victim verify p50 ${quiet.at(-1)!.p50} / ${duringStarts.at(-1)!.p50} / ${duringCallbacks.at(-1)!.p50} ms (quiet / starts / callbacks)`,
      );
    }
  } finally {
    await server.stop();
    await stub.close();
  }
  const loadAfter = loadavg();

  const quietP50 = quiet.map((q) => q.p50);
  const quietP99 = quiet.map((q) => q.p99);
  const ratioOk = (during: LoadResult[]) => median(during.map((d) => d.p50)) / median(quietP50) <= VICTIM_P50_TARGET;
  const okShare = (loads: LoadResult[]) => loads.map((l) => (100 * (l.requests - l.bad)) / Math.max(1, l.requests));
  const rows: Row[] = [
    {
      group: 'providers',
      name: `provider/start @${CONNECTIONS}: req/s`,
      ours: starts.map((s) => s.rps),
      unit: 'req/s',
      lowerIsBetter: false,
    },
    { group: 'providers', name: 'provider/start p50', ours: starts.map((s) => s.p50), unit: 'ms' },
    { group: 'providers', name: 'provider/start p99', ours: starts.map((s) => s.p99), unit: 'ms' },
    {
      group: 'providers',
      name: 'provider/start: server CPU per request',
      ours: starts.map((s) => s.cpu),
      unit: 'ms',
    },
    {
      group: 'providers',
      name: `provider/callback @${CONNECTIONS} (a login, a session issued): req/s`,
      ours: callbacks.map((c) => c.rps),
      unit: 'req/s',
      lowerIsBetter: false,
    },
    {
      group: 'providers',
      name: "provider/callback p50 (the stub provider's time included)",
      ours: callbacks.map((c) => c.p50),
      unit: 'ms',
    },
    { group: 'providers', name: 'provider/callback p99', ours: callbacks.map((c) => c.p99), unit: 'ms' },
    {
      group: 'providers',
      name: "provider/callback: server CPU per callback (the provider's time excluded)",
      ours: callbacks.map((c) => c.cpu),
      unit: 'ms',
    },
    {
      group: 'providers',
      name: `provider/callback creating the account (201), server CPU per callback (${PEOPLE}, once)`,
      ours: [createCpu],
      unit: 'ms',
    },
    {
      group: 'providers',
      name: 'provider/callback answers other than 200 (of every round)',
      ours: callbacks.map((c) => c.bad),
      unit: 'count',
      target: '0',
      ok: callbacks.every((c) => c.bad === 0),
    },
    {
      group: 'providers',
      name: `victim site's verify p50 during provider/start @${CONNECTIONS} vs quiet`,
      ours: duringStarts.map((d) => d.p50),
      baseline: quietP50,
      unit: 'ms',
      target: `≤ ${VICTIM_P50_TARGET}×`,
      ok: ratioOk(duringStarts),
    },
    {
      group: 'providers',
      name: `victim site's verify p99 during provider/start vs quiet`,
      ours: duringStarts.map((d) => d.p99),
      baseline: quietP99,
      unit: 'ms',
    },
    {
      group: 'providers',
      name: `victim site's verify p50 during provider/callback @${CONNECTIONS} vs quiet`,
      ours: duringCallbacks.map((d) => d.p50),
      baseline: quietP50,
      unit: 'ms',
      target: `≤ ${VICTIM_P50_TARGET}×`,
      ok: ratioOk(duringCallbacks),
    },
    {
      group: 'providers',
      name: `victim site's verify p99 during provider/callback vs quiet`,
      ours: duringCallbacks.map((d) => d.p99),
      baseline: quietP99,
      unit: 'ms',
    },
    {
      group: 'providers',
      name: "victim site's verifies answered 200, during starts and callbacks",
      ours: [...okShare(duringStarts), ...okShare(duringCallbacks)],
      baseline: okShare(quiet),
      unit: '%',
      lowerIsBetter: false,
      target: '100%',
      ok: [...duringStarts, ...duringCallbacks].every((l) => l.bad === 0),
    },
  ];
  notes.push(
    '## Sign-in with a provider (issue 59)',
    "`./pnpmw bench --only providers` (providers.ts). One server (the built one, the rate limits lifted as in the rest of the bench) on the local PostgreSQL with 100,000 accounts of site `default`; a provider `bench` of that site (`--on-new-person create`) at a stub OpenID Connect issuer in the bench's process (discovery, JWKS, a token endpoint answering an RS256 ID token with the email, its verification and the name, so that no userinfo call is needed, as Google's). The stub's RSA signature and the load generator run on the bench's CPU; the server's CPU per request is its process's user + system time (/proc) over a phase, divided by the phase's requests: ours alone, the provider's time excluded.",
    `Each callback is a whole one: a state made by provider/start (single use), the code exchanged with PKCE by openid-client, the ID token checked (signature by the JWKS, iss, aud, nonce, exp, iat, the RFC 9207 iss parameter), the identity's outcome, and a session issued (\`session: {}\`). The timed callbacks are logins (200) of ${PEOPLE} identities whose first callback created their account (201; that CPU is its own row). Latencies of the callbacks include the stub's answer (a local RSA signature, about 1–2 ms).`,
    `The victim is site \`victim\` (${VICTIM_ACCOUNTS} accounts, argon2id at the server's own parameters): user/verify with the right password at ${VICTIM_CONNECTIONS} connections for ${b.seconds} s, quiet and while provider/start or provider/callback run at ${CONNECTIONS} connections (started 1 s before, stopped after). The ratios are of medians over the rounds, to the quiet phases of the same rounds.`,
    `**The machine was loaded** (2 cores shared with other agents' work): load average (1, 5, 15 min) before ${loadBefore.map((l) => l.toFixed(2)).join(', ')}; after ${loadAfter.map((l) => l.toFixed(2)).join(', ')}. The absolute figures are those of a busy machine; the CPU per request is the steadier figure.`,
  );
  return { rows, notes };
}
