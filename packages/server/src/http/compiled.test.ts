// The compiled operations (compiled.ts, issue 47) answer exactly as the Hono app does. One service,
// assembled once on embedded PGlite, served twice: with serveApp(app), where each compiled row of
// the table answers without the app, and with serveApp on an object holding only the app's fetch,
// where every request goes through Hono (the reference). For every compiled operation
// (operations.filter(isCompiled)) and a table of requests, good and bad, each request goes to
// both, and the answers (status, headers, body), the log lines of the request (its access line
// with its fields in order) and the metrics label are compared, with only what differs by nature
// set aside: Date, the request id, the duration, each side's own token and client address, and
// a window's seconds that may have ticked between the two (t=, Retry-After, "in N s", by one).
import { mkdtempSync, rmSync } from 'node:fs';
import { Agent, request as httpRequest, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { assemble, type Service } from '../assemble.ts';
import { createToken, type Scope } from '../auth/tokens.ts';
import { loadConfig } from '../config/env.ts';
import { createRateLimiter, type RateLimiter } from '../limits/rate-limit.ts';
import { copyMigratedPglite } from '../testing/templates.ts';
import type { ServiceApp } from './app.ts';
import { isCompiled } from './compiled.ts';
import type { Operation } from './define-operation.ts';
import { operations } from './operations.ts';
import { serveApp } from './serve.ts';

const SEED_TOKEN = 'ua_compiled_test_seed_token_0123456789abcdef';
const REQUEST_TIMEOUT_MS = 1_000;
/** Failed authentications an address may make in the window: the third is refused 429. */
const AUTH_FAILURES = 2;
const compiledOps = operations.filter(isCompiled) as Operation<unknown>[];

type SideName = 'compiled' | 'hono';
type Role = 'all' | 'noScope' | 'limited';

interface Side {
  name: SideName;
  server: Server;
  port: number;
  tokens: Record<Role, { id: string; token: string }>;
  /** The second octet of this side's client addresses (X-Forwarded-For, from the trusted 127.0.0.1). */
  net: number;
}

interface Req {
  method: string;
  /** Path and query. */
  target: string;
  /** The token sent: a side's own by role, a made-up one, a bare `Bearer`, or none. */
  auth?: Role | 'bad' | 'bare' | 'none';
  /** A second Authorization field after the first (Node keeps the first; a Request's Headers joins them). */
  authAgain?: Role | 'bad';
  headers?: Record<string, string | string[]>;
  body?: string | Buffer;
  /** Sent chunked, in two pieces. */
  chunked?: boolean;
  /** No X-Request-Id sent: the server makes one. */
  noRequestId?: boolean;
  /** Client addresses are per request unless a case shares one across its requests. */
  address?: number;
}

interface Answer {
  status: number;
  reason: string;
  headers: [string, string][];
  body: string;
}

interface Seen {
  /** Undefined when no answer came (the client cut the request). */
  answer: Answer | undefined;
  /** The log lines that carry the request's id, as written. */
  lines: string[];
  /** The metrics observed meanwhile: method, route, status. */
  metrics: string[];
  requestId: string;
}

const dir = mkdtempSync(join(tmpdir(), 'ua-compiled-'));
const logs: string[] = [];
const observed: string[] = [];
let service: Service;
let realLimiter: RateLimiter;
const sides = {} as Record<SideName, Side>;
const seed = { userId: '', email: '', sessionToken: '', orgId: '' };
let requestCount = 0;
const compiledSideThroughHono: string[] = [];
let addressCount = 0;

const serve = (app: Parameters<typeof serveApp>[0]) =>
  new Promise<Server>((resolve) => {
    const s = serveApp(app, { port: 0, hostname: '127.0.0.1' }, () => resolve(s));
  });

/** A client address of its own for the next request (or a case's requests), as a number each side spells. */
const nextAddress = () => ++addressCount;
const addressOf = (side: Side, n: number) => `10.${side.net}.${n >> 8}.${n & 255}`;

function headersFor(side: Side, req: Req, requestId: string, address: number): Record<string, string | string[]> {
  const headers: Record<string, string | string[]> = { 'X-Forwarded-For': addressOf(side, address), ...req.headers };
  if (!req.noRequestId) headers['X-Request-Id'] = requestId;
  const field = (auth: Role | 'bad' | 'bare') =>
    auth === 'bad'
      ? 'Bearer ua_not_a_token_of_this_service_0123456789'
      : auth === 'bare'
        ? 'Bearer'
        : `Bearer ${side.tokens[auth].token}`;
  const auth = req.auth ?? 'all';
  if (auth !== 'none') headers.Authorization = field(auth);
  if (req.authAgain !== undefined) headers.Authorization = [field(auth as Role), field(req.authAgain)];
  return headers;
}

/** Sends `req` with node:http on a keep-alive connection of its own, and reads the whole answer. */
function sendHttp(side: Side, req: Req, headers: Record<string, string | string[]>): Promise<Answer> {
  const agent = new Agent({ keepAlive: true });
  return new Promise<Answer>((resolve, reject) => {
    const outgoing = httpRequest(
      { host: '127.0.0.1', port: side.port, method: req.method, path: req.target, headers, agent },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (chunk: Buffer) => chunks.push(chunk));
        res.on('end', () => {
          const pairs: [string, string][] = [];
          for (let i = 0; i < res.rawHeaders.length; i += 2) pairs.push([res.rawHeaders[i]!, res.rawHeaders[i + 1]!]);
          resolve({
            status: res.statusCode!,
            reason: res.statusMessage ?? '',
            headers: pairs,
            body: Buffer.concat(chunks).toString('utf8'),
          });
        });
        res.on('error', reject);
      },
    );
    outgoing.on('error', reject);
    if (req.chunked && req.body !== undefined) {
      const body = Buffer.from(req.body);
      outgoing.setHeader('Transfer-Encoding', 'chunked');
      outgoing.write(body.subarray(0, body.length >> 1));
      outgoing.end(body.subarray(body.length >> 1));
    } else outgoing.end(req.body);
  }).finally(() => agent.destroy());
}

/**
 * A body cut by the client: the head declares `declared` bytes, `sent` of them go, and after
 * `afterMs` the socket is ended (and destroyed soon after). Whatever answer came is read raw.
 */
function sendCut(
  side: Side,
  req: Req,
  headers: Record<string, string | string[]>,
  declared: number,
  sent: string,
  afterMs: number,
): Promise<Answer | undefined> {
  return new Promise((resolve) => {
    const chunks: Buffer[] = [];
    const socket = connect(side.port, '127.0.0.1', () => {
      const head = Object.entries({ Host: `127.0.0.1:${side.port}`, ...headers, 'Content-Length': String(declared) })
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('');
      socket.write(`${req.method} ${req.target} HTTP/1.1\r\n${head}\r\n${sent}`);
      setTimeout(() => socket.end(), afterMs);
    });
    const done = () => {
      socket.destroy();
      resolve(chunks.length === 0 ? undefined : parseRaw(Buffer.concat(chunks).toString('utf8')));
    };
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', done);
    socket.on('close', done);
    setTimeout(done, afterMs + 2_000).unref();
  });
}

function parseRaw(text: string): Answer {
  const split = text.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = text.slice(0, split).split('\r\n');
  const [, status = '0', reason = ''] = /^HTTP\/1\.1 (\d{3}) ?(.*)$/.exec(statusLine) ?? [];
  return {
    status: Number(status),
    reason,
    headers: lines.map((line) => {
      const at = line.indexOf(':');
      return [line.slice(0, at), line.slice(at + 1).trim()] as [string, string];
    }),
    body: text.slice(split + 4),
  };
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** The log lines carrying `requestId`, once its access line is among them (or after `waitMs`). */
async function linesOf(requestId: string, waitMs = 0): Promise<string[]> {
  const mine = () => logs.filter((line) => line.includes(`"requestId":"${requestId}"`));
  for (let waited = 0; waited < waitMs && !mine().some((l) => l.includes('"msg":"request"')); waited += 10) {
    await sleep(10);
  }
  return mine();
}

/** Sends `req` to one side and gathers what it answered, logged and counted. */
async function sendTo(
  side: Side,
  req: Req,
  address: number,
  cut?: { declared: number; sent: string; afterMs: number },
  pair = ++requestCount,
): Promise<Seen> {
  // The same length on both sides, as the answers' Content-Length counts it.
  const id = `cmp-${side.name.slice(0, 1)}-${String(pair).padStart(6, '0')}`;
  const headers = headersFor(side, req, id, address);
  const metricsFrom = observed.length;
  const answer = cut
    ? await sendCut(side, req, headers, cut.declared, cut.sent, cut.afterMs)
    : await sendHttp(side, req, headers);
  const requestId = req.noRequestId
    ? (answer?.headers.find(([name]) => name.toLowerCase() === 'x-request-id')?.[1] ?? id)
    : id;
  const lines = await linesOf(requestId, cut ? 2_000 : 200);
  return { answer, lines, metrics: observed.slice(metricsFrom), requestId };
}

/** What a side's answer and lines say once the side's own values are set aside. */
function normalize(side: Side, seen: Seen): string {
  const own: [string, string][] = [
    [seen.requestId, '<requestId>'],
    ...(Object.entries(side.tokens) as [Role, { id: string; token: string }][]).flatMap(
      ([role, { id, token }]): [string, string][] => [
        [id, `<${role} token id>`],
        [token, `<${role} token>`],
      ],
    ),
    [`127.0.0.1:${side.port}`, '<host>'],
  ];
  const mask = (text: string) => {
    let out = text.replace(new RegExp(`10\\.${side.net}\\.\\d+\\.\\d+`, 'g'), '<address>');
    for (const [value, name] of own) out = out.split(value).join(name);
    return out;
  };
  const answer =
    seen.answer === undefined
      ? 'no answer'
      : {
          status: `${seen.answer.status} ${seen.answer.reason}`,
          headers: seen.answer.headers
            .map(([name, value]) => [name.toLowerCase(), value])
            .filter(([name]) => name !== 'date')
            .map(([name, value]) => `${name}: ${mask(value!)}`)
            .sort(),
          body: mask(seen.answer.body)
            // A passkey ceremony's challenge is new each time.
            .replace(/"challenge":"[^"]*"/g, '"challenge":"<challenge>"'),
        };
  const lines = seen.lines.map((line) => {
    const { time: _time, durationMs, ...fields } = JSON.parse(line) as Record<string, unknown>;
    if (durationMs !== undefined) expect(typeof durationMs).toBe('number');
    // An unexpected error's stack: its frames are each path's own (the route's, or compiled.ts).
    const err = fields.err as { stack?: string } | undefined;
    if (err?.stack !== undefined) err.stack = err.stack.split('\n')[0]!.replace(/\(.*\)$/, '');
    return mask(JSON.stringify({ ...fields, ...(durationMs === undefined ? {} : { durationMs: '<ms>' }) }));
  });
  return JSON.stringify({ answer, lines, metrics: seen.metrics }, null, 1);
}

/** The seconds of a window, which may tick between the two sides' requests: equal within one. */
function withinASecond(compiled: string, hono: string): string {
  const SECONDS = /(t=|try again in |retry-after: |"Retry-After":")(\d+)/gi;
  const theirs = [...hono.matchAll(SECONDS)].map((m) => Number(m[2]));
  let i = 0;
  return compiled.replace(SECONDS, (whole, before: string, n: string) => {
    const other = theirs[i++];
    return other !== undefined && Math.abs(other - Number(n)) <= 1 ? `${before}${other}` : whole;
  });
}

/** Sends `req` to the compiled side, then to the Hono side, and expects the same of both. */
async function same(req: Req, cut?: { declared: number; sent: string; afterMs: number }): Promise<Seen> {
  const address = req.address ?? nextAddress();
  const pair = ++requestCount;
  const compiled = await sendTo(sides.compiled, req, address, cut, pair);
  const hono = await sendTo(sides.hono, req, address, cut, pair);
  const [c, h] = [normalize(sides.compiled, compiled), normalize(sides.hono, hono)];
  expect(withinASecond(c, h), `${req.method} ${req.target}`).toBe(h);
  // Nothing compared in vain: the reference wrote its access line and counted the request.
  expect(hono.lines.filter((line) => line.includes('"msg":"request"'))).toHaveLength(1);
  expect(hono.metrics).toHaveLength(1);
  return hono;
}

const statusOf = (seen: Seen) => seen.answer?.status;
const codeOf = (seen: Seen) => (JSON.parse(seen.answer!.body) as { code?: string }).code;

/** Per operation: a request that succeeds, and what else is worth sending it (its 404s, its own checks). */
interface OpCases {
  good: () => Req;
  /** What the good request answers, when not a success (no webhook endpoint here: the handler's 404). */
  goodStatus?: number;
  others?: () => { req: Req; status: number }[];
}

const uuid = '0190d4a1-7b2c-7d3e-8f40-123456789abc';
const get = (target: string, extra: Partial<Req> = {}): Req => ({ method: 'GET', target, ...extra });
const post = (target: string, body: unknown, extra: Partial<Req> = {}): Req => ({
  method: 'POST',
  target,
  headers: { 'Content-Type': 'application/json' },
  body: JSON.stringify(body),
  ...extra,
});

const CASES: Record<string, OpCases> = {
  getUser: {
    good: () => get(`/api/1/user/get?_userId=${seed.userId}`),
    others: () => [
      { req: get(`/api/1/user/get?_userId=${uuid}`), status: 404 },
      { req: get(`/api/1/user/get?email=${encodeURIComponent(seed.email)}`), status: 200 },
      { req: get('/api/1/user/get?_userId=not-an-id'), status: 404 },
      { req: get(`/api/1/user/get?_userId=${seed.userId}&email=a%40b.c`), status: 400 },
      { req: get('/api/1/user/get'), status: 400 },
    ],
  },
  listUsers: {
    good: () => get('/api/1/user/list?limit=5'),
    others: () => [{ req: get('/api/1/user/list?limit=many'), status: 400 }],
  },
  countUsers: { good: () => get('/api/1/user/count') },
  getAuditTrail: {
    good: () => get(`/api/1/audit?_userId=${seed.userId}`),
    others: () => [
      { req: get('/api/1/audit'), status: 400 },
      { req: get(`/api/1/audit?_userId=${uuid}`), status: 404 },
    ],
  },
  listWebhookEndpoints: { good: () => get('/api/1/webhooks') },
  listWebhookDeliveries: {
    good: () => get(`/api/1/webhooks/deliveries?endpointId=${uuid}`),
    goodStatus: 404,
    others: () => [{ req: get('/api/1/webhooks/deliveries?endpointId=nope'), status: 400 }],
  },
  replayWebhookDelivery: {
    good: () => post('/api/1/webhooks/deliveries/replay', { deliveryId: '1' }),
    goodStatus: 404,
    others: () => [{ req: post('/api/1/webhooks/deliveries/replay', { deliveryId: 'x' }), status: 400 }],
  },
  listFactors: {
    good: () => get(`/api/1/user/factor/list?_userId=${seed.userId}`),
    others: () => [{ req: get(`/api/1/user/factor/list?_userId=${uuid}`), status: 404 }],
  },
  addPasskeyOptions: {
    good: () => post('/api/1/user/factor/passkey/options', { _userId: seed.userId }),
    others: () => [{ req: post('/api/1/user/factor/passkey/options', { _userId: uuid }), status: 404 }],
  },
  passkeyLoginOptions: {
    good: () => post('/api/1/user/passkey/options', { email: seed.email }),
    others: () => [
      { req: post('/api/1/user/passkey/options', {}), status: 200 },
      { req: post('/api/1/user/passkey/options', { email: seed.email, _userId: seed.userId }), status: 400 },
    ],
  },
  verifySession: {
    good: () => post('/api/1/session/verify', { token: seed.sessionToken }),
    others: () => [
      { req: post('/api/1/session/verify', { token: 'uas_not_a_session' }), status: 422 },
      { req: post('/api/1/session/verify', { token: '' }), status: 400 },
    ],
  },
  listSessions: {
    good: () => get(`/api/1/session/list?_userId=${seed.userId}`),
    others: () => [{ req: get(`/api/1/session/list?_userId=${uuid}`), status: 404 }],
  },
  getOrg: {
    good: () => get(`/api/1/org/get?orgId=${seed.orgId}`),
    others: () => [
      { req: get(`/api/1/org/get?orgId=${uuid}`), status: 404 },
      { req: get('/api/1/org/get'), status: 400 },
    ],
  },
  listOrgs: {
    good: () => get('/api/1/org/list?limit=5'),
    others: () => [{ req: get('/api/1/org/list?limit=0'), status: 400 }],
  },
  getOrgRoles: { good: () => get('/api/1/org/roles') },
  listOrgMembers: {
    good: () => get(`/api/1/org/member/list?orgId=${seed.orgId}`),
    others: () => [{ req: get(`/api/1/org/member/list?orgId=${uuid}`), status: 404 }],
  },
  checkOrgMember: {
    good: () => get(`/api/1/org/member/check?orgId=${seed.orgId}&_userId=${seed.userId}&permission=billing:manage`),
    others: () => [
      { req: get(`/api/1/org/member/check?orgId=${seed.orgId}&_userId=${uuid}`), status: 200 },
      { req: get(`/api/1/org/member/check?orgId=${uuid}&_userId=${seed.userId}`), status: 404 },
      { req: get(`/api/1/org/member/check?orgId=${seed.orgId}`), status: 400 },
    ],
  },
  listUserOrgs: {
    good: () => get(`/api/1/user/orgs?_userId=${seed.userId}`),
    others: () => [{ req: get(`/api/1/user/orgs?_userId=${uuid}`), status: 404 }],
  },
  listOrgInvitations: {
    good: () => get(`/api/1/org/invitation/list?orgId=${seed.orgId}`),
    others: () => [{ req: get(`/api/1/org/invitation/list?orgId=${uuid}`), status: 404 }],
  },
};

const hasBody = (op: Operation<unknown>) => 'body' in op.request;

const mint = async (scopes: Scope[], label: string) =>
  createToken(service.database.db, { site: 'default', scopes, label });
/** A side's tokens; the `limited` ones are over their budget (see the stand-in limiter). */
async function tokensOf(name: SideName): Promise<Side['tokens']> {
  const tokens = {
    all: await mint(['read', 'write', 'verify', 'events'], `${name} all`),
    noScope: await mint(['export'], `${name} export only`),
    limited: await mint(['read', 'write', 'verify', 'events'], `${name} over its budget`),
  };
  limited.add(tokens.limited.id);
  return tokens;
}
const limited = new Set<string>();

/**
 * New tokens for both sides, so that each test starts with the same counts on both: a difference
 * found (a request one side counted and the other did not) stays in the test that found it.
 */
async function freshTokens(): Promise<void> {
  [sides.compiled.tokens, sides.hono.tokens] = await Promise.all([tokensOf('compiled'), tokensOf('hono')]);
}

beforeAll(async () => {
  await copyMigratedPglite(dir);
  const config = loadConfig({
    DATA_DIR: dir,
    API_TOKENS: SEED_TOKEN,
    LOG_LEVEL: 'info',
    LOG_FORMAT: 'json',
    RATE_LIMIT: '1000000/60s',
    RATE_LIMIT_HASH: '100000/60s',
    AUTH_FAILURE_LIMIT: `${AUTH_FAILURES}/60s`,
    TRUSTED_PROXIES: '127.0.0.1',
    PASSWORD_HASH_PROFILE: 'test',
    REQUEST_TIMEOUT_MS: String(REQUEST_TIMEOUT_MS),
    METRICS_TOKEN: 'metrics_token_for_the_compiled_test_0123456',
    FACTOR_ENCRYPTION_KEY: `test:${Buffer.alloc(32, 1).toString('base64')}`,
  });
  service = await assemble(config, { logDestination: { write: (line: string) => void logs.push(line) } });
  const { deps } = service;
  const app = service.app as ServiceApp;
  expect(app.compiled, 'createApp compiles the operations (no tracing, no CORS)').toBeDefined();

  // The metrics label of each request, as both paths hand it to the collector.
  const collector = deps.metrics!.collector;
  const observe = collector.observeRequest.bind(collector);
  collector.observeRequest = (method, route, status, seconds) => {
    observed.push(`${method} ${route} ${status}`);
    observe(method, route, status, seconds);
  };

  // serveApp(app), with its fetch counted: the compiled side must answer every request here without it.
  const compiledServer = await serve({
    compiled: app.compiled,
    fetch: (request) => {
      compiledSideThroughHono.push(`${request.method} ${new URL(request.url).pathname}`);
      return app.fetch(request);
    },
  });
  const honoServer = await serve({ fetch: app.fetch });
  sides.compiled = {
    name: 'compiled',
    server: compiledServer,
    port: (compiledServer.address() as AddressInfo).port,
    tokens: await tokensOf('compiled'),
    net: 1,
  };
  sides.hono = {
    name: 'hono',
    server: honoServer,
    port: (honoServer.address() as AddressInfo).port,
    tokens: await tokensOf('hono'),
    net: 2,
  };

  // The `limited` tokens are over an "all" budget of none (a stand-in limiter beside the real one,
  // which counts every other token): each of their requests is refused 429 with its fields.
  realLimiter = deps.limiter;
  const over = createRateLimiter(
    { all: { name: 'all', limit: 0, windowSeconds: 60 }, hash: null, import: null },
    {
      increment: async (_id, policies) => policies.map(() => ({ count: 1, resetMs: 42_000 })),
      close: async () => {},
    },
  );
  deps.limiter = {
    consume: (id, budget) => (limited.has(id) ? over : realLimiter).consume(id, budget),
    consumeNow: (id, budget) => (limited.has(id) ? over : realLimiter).consumeNow?.(id, budget),
    consumeBudget: (id, budget, weight) => (limited.has(id) ? over : realLimiter).consumeBudget(id, budget, weight),
    close: () => realLimiter.close(),
  };

  // The site's passkey relying party, as `cli site set --rp-id --origins` sets it.
  await service.database.sql.unsafe(
    `insert into site_settings (site, rp_id, rp_name, rp_origins) values ('default', 'localhost', 'Example', $1::jsonb)`,
    [JSON.stringify(['http://localhost:3000'])],
  );
  // What the good requests read, made through the API.
  const api = async (path: string, body: unknown) => {
    const response = await fetch(`http://127.0.0.1:${sides.hono.port}${path}`, {
      method: 'POST',
      headers: { Authorization: `Bearer ${SEED_TOKEN}`, 'Content-Type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    expect(response.status, `${path}: ${text}`).toBeLessThan(300);
    return JSON.parse(text) as { result: Record<string, unknown> };
  };
  seed.email = 'compiled@example.com';
  const password = 'a long passphrase 42';
  const created = await api('/api/1/user/create', { email: seed.email, password, name: 'Compiled' });
  seed.userId = (created.result as { _userId: string })._userId;
  const verified = await api('/api/1/user/verify', { email: seed.email, password, session: {} });
  seed.sessionToken = (verified.result as { session: { token: string } }).session.token;
  await api('/api/1/org/roles', { roles: [{ role: 'admin', permissions: ['billing:manage'] }] });
  const org = await api('/api/1/org/create', { name: 'Compiled Ltd' });
  seed.orgId = (org.result as { orgId: string }).orgId;
  await api('/api/1/org/member/add', { orgId: seed.orgId, _userId: seed.userId, roles: ['admin'] });
  await api('/api/1/org/invitation/create', { orgId: seed.orgId, email: 'invited@example.com', roles: ['admin'] });
}, 120_000);

afterAll(async () => {
  for (const side of Object.values(sides)) {
    side.server.closeAllConnections();
    await new Promise((resolve) => side.server.close(resolve));
  }
  if (service !== undefined) {
    if (realLimiter !== undefined) service.deps.limiter = realLimiter;
    await service.close();
  }
  rmSync(dir, { recursive: true, force: true });
});

describe('compiled operations answer as the Hono app', () => {
  it('compiles the read-only rows, each with requests of its own here', () => {
    expect(compiledOps.length).toBeGreaterThan(10);
    expect(compiledOps.map((op) => op.name).filter((name) => !(name in CASES))).toEqual([]);
  });

  it.each(compiledOps.map((op) => [`${op.method} ${op.path}`, op] as const))(
    '%s: its good requests, 404s and checks; tokens missing, bad, unscoped and over budget',
    async (_, op) => {
      await freshTokens();
      const cases = CASES[op.name]!;
      const good = cases.good();
      const goodStatus = statusOf(await same(good));
      if (cases.goodStatus === undefined) expect(goodStatus, 'the good request succeeds').toBeLessThan(300);
      else expect(goodStatus).toBe(cases.goodStatus);
      // The server's own request id; a W3C trace on the request's lines.
      await same({ ...good, noRequestId: true });
      await same({
        ...good,
        headers: { ...good.headers, traceparent: '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01' },
      });
      for (const { req, status } of cases.others?.() ?? []) expect(statusOf(await same(req))).toBe(status);

      const refused = async (req: Req, status: number, code: string) => {
        const seen = await same(req);
        expect(statusOf(seen)).toBe(status);
        expect(codeOf(seen)).toBe(code);
        return seen;
      };
      await refused({ ...good, auth: 'none' }, 401, 'unauthorized');
      await refused({ ...good, auth: 'bare' }, 401, 'unauthorized');
      await refused({ ...good, auth: 'bad' }, 401, 'unauthorized');
      await refused({ ...good, auth: 'noScope' }, 403, 'forbidden');
      await refused({ ...good, auth: 'limited' }, 429, 'rate_limited');
      // An address past its failed authentications: refused before its token is looked up.
      const address = nextAddress();
      for (let i = 0; i < AUTH_FAILURES; i++) await refused({ ...good, auth: 'bad', address }, 401, 'unauthorized');
      await refused({ ...good, auth: 'bad', address }, 429, 'rate_limited');
      // Refused whatever the token, while the window lasts; a good token still passes (remembered).
      await refused({ ...good, auth: 'none', address }, 429, 'rate_limited');

      if (!hasBody(op)) {
        // The query as validQuery reads it from each path's URL: unknown, nameless, repeated, odd.
        const [path, query = ''] = good.target.split('?');
        const withQuery = (extra: string) => ({
          ...good,
          target: `${path}?${query}${query === '' ? '' : '&'}${extra}`,
        });
        expect(statusOf(await same(withQuery('bogus=1')))).toBe(400);
        expect(statusOf(await same(withQuery('=1')))).toBe(400);
        expect(statusOf(await same(withQuery('__proto__=1')))).toBe(400);
        if (query !== '') expect(statusOf(await same(withQuery(query)))).toBe(400);
        await same({ ...good, target: `${path}??${query}` });
        await same({ ...good, target: `${path}?${query.replace(/=/g, '=%20')}` });
        await same({ ...good, target: `${path}?${query}&limit=%E2%82%AC` });
      }
    },
  );

  const bodyOps = compiledOps.filter(hasBody);
  it.each(bodyOps.map((op) => [`${op.method} ${op.path}`, op] as const))(
    '%s: its body refused as the app refuses it (415, 413, empty, not JSON, too deep, cut)',
    async (_, op) => {
      await freshTokens();
      const good = CASES[op.name]!.good();
      const json = { 'Content-Type': 'application/json' };
      const expectProblem = async (req: Req, status: number, code: string) => {
        const seen = await same(req);
        expect(statusOf(seen), `${req.method} ${req.target}: ${seen.answer?.body}`).toBe(status);
        expect(codeOf(seen)).toBe(code);
      };
      await expectProblem({ ...good, body: '{"bogus":1}' }, 400, 'invalid_request');
      await expectProblem({ ...good, headers: {} }, 415, 'unsupported_media_type');
      await expectProblem(
        { ...good, headers: {}, target: `${good.target}?deliveryId=1` },
        415,
        'unsupported_media_type',
      );
      await expectProblem({ ...good, headers: { 'Content-Type': 'text/plain' } }, 415, 'unsupported_media_type');
      await expectProblem(
        { ...good, headers: { 'Content-Type': 'application/json; charset=latin1' } },
        415,
        'unsupported_media_type',
      );
      // A quoted charset is the same charset: the good answer.
      expect(statusOf(await same({ ...good, headers: { 'Content-Type': 'application/json; charset="utf-8"' } }))).toBe(
        statusOf(await same(good)),
      );
      // Past the limit: declared, and counted as it comes (chunked).
      const big = JSON.stringify({ pad: 'x'.repeat(70 * 1024) });
      await expectProblem({ ...good, headers: json, body: big }, 413, 'payload_too_large');
      await expectProblem({ ...good, headers: json, body: big, chunked: true }, 413, 'payload_too_large');
      await expectProblem({ ...good, headers: { ...json, 'Content-Length': '0' }, body: '' }, 400, 'invalid_json');
      await expectProblem({ ...good, headers: json, body: '   ' }, 400, 'invalid_json');
      await expectProblem({ ...good, headers: json, body: '{"token":' }, 400, 'invalid_json');
      await expectProblem({ ...good, headers: json, body: Buffer.from([0x7b, 0xff, 0x7d]) }, 400, 'invalid_json');
      await expectProblem(
        { ...good, headers: json, body: `${'['.repeat(40)}${']'.repeat(40)}` },
        400,
        'invalid_request',
      );
      await expectProblem({ ...good, headers: json, body: '[]' }, 400, 'invalid_request');
      await expectProblem({ ...good, headers: json, body: '{"a":1}', chunked: true }, 400, 'invalid_request');
      // A refusal before the body is read, the body then left unread.
      await expectProblem({ ...good, auth: 'noScope', headers: json, body: big }, 403, 'forbidden');

      // The client hangs up mid-body: at once, and once the server waits for the rest.
      for (const afterMs of [0, 100]) {
        const seen = await same({ ...good, headers: json }, { declared: 100, sent: '{"token":"', afterMs });
        expect(seen.lines.map((line) => JSON.parse(line).status)).toContain(400);
      }
    },
  );

  it('a body sent whole, the client gone while its budget is counted: answered and logged as the app does', async () => {
    await freshTokens();
    const good = CASES.verifySession!.good();
    const body = String(good.body);
    const { deps } = service;
    const limiter = deps.limiter;
    // Every request waits 200 ms for its count (as for a lease), and the client hangs up after 20.
    deps.limiter = {
      ...limiter,
      consumeNow: undefined,
      consume: async (id, budget) => {
        await new Promise((resolve) => setTimeout(resolve, 200));
        return limiter.consume(id, budget);
      },
    };
    try {
      const seen = await same(
        { ...good, headers: { 'Content-Type': 'application/json' } },
        { declared: Buffer.byteLength(body), sent: body, afterMs: 20 },
      );
      // The app reads the body as it comes and answers; so does the compiled path (it waited for
      // the deadline and answered 503 when it first read the body only after the count).
      expect(seen.lines.map((line) => JSON.parse(line).status)).toContain(200);
    } finally {
      deps.limiter = limiter;
    }
  });

  it('a header a handler sets that Node refuses: 500 and its log line on both paths, the process unharmed', async () => {
    await freshTokens();
    const op = compiledOps.find((o) => o.name === 'getUser')!;
    const handle = op.handle;
    op.handle = async (c) => {
      c.header('ETag', 'a\u0100b');
      return c.json({ result: {} }, 200);
    };
    try {
      // The same answer and lines, but for the error's own words (undici's Headers, Node's check).
      const ownWords = (text: string) =>
        text.replace(/"err":\{[^}]*\}/g, '"err":{…}').replace(/\\"err\\":\{[^}]*\}/g, '"err":{…}');
      const address = nextAddress();
      const compiled = await sendTo(sides.compiled, CASES.getUser!.good(), address);
      const hono = await sendTo(sides.hono, CASES.getUser!.good(), address);
      const [c, h] = [normalize(sides.compiled, compiled), normalize(sides.hono, hono)];
      expect(ownWords(withinASecond(c, h))).toBe(ownWords(h));
      expect(statusOf(compiled)).toBe(500);
      expect(compiled.lines.some((line) => JSON.parse(line).msg === 'unhandled error')).toBe(true);
    } finally {
      op.handle = handle;
    }
  });

  it.each(compiledOps.map((op) => [`${op.method} ${op.path}`, op] as const))(
    '%s: X-Request-Id, traceparent and Content-Type (not JSON first) sent twice',
    async (_, op) => {
      await freshTokens();
      const good = CASES[op.name]!.good();
      await same({ ...good, headers: { ...good.headers, 'X-Request-Id': ['one', 'two'] }, noRequestId: true });
      const trace = (span: string) => `00-0af7651916cd43dd8448eb211c80319c-${span}-01`;
      await same({
        ...good,
        headers: { ...good.headers, traceparent: [trace('b7ad6b7169203331'), trace('b7ad6b7169203332')] },
      });
      if (hasBody(op)) await same({ ...good, headers: { 'Content-Type': ['text/plain', 'application/json'] } });
    },
  );

  // A field that Node keeps once (the first of Authorization, of Content-Type) is read by the app's
  // Request (@hono/node-server) as every one sent, joined ("Bearer a, Bearer b"): the compiled
  // operations read it so too (this found that they first did not).
  const twice: [string, (good: Req) => Req, (op: Operation<unknown>) => boolean][] = [
    ['Authorization twice, the same token', (good) => ({ ...good, authAgain: 'all' }), () => true],
    ['Authorization twice, a good token then a bad one', (good) => ({ ...good, authAgain: 'bad' }), () => true],
    [
      'Authorization twice, an unscoped token then a good one',
      (good) => ({ ...good, auth: 'noScope', authAgain: 'all' }),
      () => true,
    ],
    [
      'Content-Type twice, JSON then text/plain',
      (good) => ({ ...good, headers: { 'Content-Type': ['application/json', 'text/plain'] } }),
      hasBody,
    ],
  ];
  it.each(twice)('answers alike: %s (both read every field sent)', async (_, make, applies) => {
    await freshTokens();
    for (const op of compiledOps.filter(applies)) await same(make(CASES[op.name]!.good()));
  });

  it('answers 503 at the deadline when a handler hangs, and 500 with its log line when one throws', async () => {
    await freshTokens();
    const handles = compiledOps.map((op) => op.handle);
    const released = Promise.withResolvers<void>();
    try {
      for (const op of compiledOps) {
        op.handle = async () => {
          await released.promise;
          throw new Error('released after the test');
        };
      }
      // Every operation at once, on both sides: one deadline's wait for all.
      const goods = compiledOps.map((op) => CASES[op.name]!.good());
      const pairs = await Promise.all(
        goods.map(async (req) => {
          const address = nextAddress();
          const pair = ++requestCount;
          return Promise.all([
            sendTo(sides.compiled, req, address, undefined, pair),
            sendTo(sides.hono, req, address, undefined, pair),
          ]);
        }),
      );
      for (const [i, [compiled, hono]] of pairs.entries()) {
        expect(statusOf(hono), `${goods[i]!.target}`).toBe(503);
        // Sent side by side: each side's own metrics are not told apart here, only the answers and lines.
        const [c, h] = [
          normalize(sides.compiled, { ...compiled, metrics: [] }),
          normalize(sides.hono, { ...hono, metrics: [] }),
        ];
        expect(withinASecond(c, h), goods[i]!.target).toBe(h);
      }

      for (const op of compiledOps) {
        op.handle = async () => {
          throw new TypeError('compiled.test: an unexpected failure');
        };
      }
      for (const op of compiledOps) {
        const seen = await same(CASES[op.name]!.good());
        expect(statusOf(seen)).toBe(500);
        expect(seen.lines.some((line) => line.includes('unhandled error'))).toBe(true);
      }
    } finally {
      compiledOps.forEach((op, i) => {
        op.handle = handles[i]!;
      });
      released.resolve();
    }
  });

  it('answered every request of the compiled side without the app', () => {
    expect(requestCount, 'request pairs sent').toBeGreaterThan(300);
    expect(compiledSideThroughHono).toEqual([]);
  });
});
