// The one pipeline (issue 58): every row of the operation table, whatever the configuration
// (tracing, CORS, metrics, Redis), is served by the steps below, in this order, each a plain
// function, each skipped at start where its row or the configuration does not need it:
//
//   1. trace span            (tracing on)           the request's SERVER span, around the rest
//   2. request id and log                           X-Request-Id (or a new one), the request's logger
//   3. deadline                                     503 once the row's time is up (import's longer, a long-poll's wait on top)
//   4. token                                        401, or 429 for an address over its failed authentications
//   5. budgets                                      429 over a budget; from here every answer carries the rate-limit fields
//   6. audit                 (a write)              every outcome but a success (runWrite records that) gets its row
//   7. scope                                        403 (a row with alsoScope: judged again after the body)
//   8. body or query                                415, 413, 400; the body read from Node's stream (bulk bounds: import's)
//   9. scope for the body    (alsoScope)            403 unless the body is one the other scope admits
//  10. idempotency key       (idempotent)           400 when malformed; the body's fingerprint
//  11. parse                                        the operation's own checks of its input
//  12. idempotency claim     (idempotent, a key)    the kept answer replayed, or the key claimed and the answer kept
//  13. the handler
//  14. rate-limit fields, CORS fields (CORS_ORIGINS), fixed headers (no-store, X-Request-Id, nosniff)
//  15. metrics (METRICS_TOKEN), the access line, the span's end
//
// An error a step throws becomes the answer at the nearest of three guards, as Hono's compose
// renders a middleware's error where it is thrown: the budget's (so that a refusal after the count
// carries the rate-limit fields), the audit's (so that the refusal is recorded) and the claim's
// (so that the key is freed or the answer kept). Two transports bring requests to it: Node's
// server (serve.ts: looked up by method and path before Hono's router, the answer written once
// with writeHead and end) and a fetch Request (the app's fetch: tests, and a target the server's
// lookup leaves to Hono's URL parsing). Hono stays the router of what lies outside the table
// (health, readiness, JWKS, metrics, docs, console, 404, 405 and CORS preflights).
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { context, type Span, type TextMapGetter, type Tracer } from '@opentelemetry/api';
import type { TokenInfo } from '../auth/tokens.ts';
import type { Validators } from '../contract/validation.ts';
import { describeError } from '../errors.ts';
import type { Metrics } from '../ops/metrics.ts';
import { type Answer, type AppDeps, OpContext, type RequestLike } from './context.ts';
import type { Operation } from './define-operation.ts';
import { answerCode, asApiError, problemAnswer } from './errors.ts';
import { type AccessLineWriter, accessLogger, directAccessLine, writeAccessLine } from './middleware/access-log.ts';
import { auditOutcome } from './middleware/audit.ts';
import { authenticate, checkScope, checkScopeForBody } from './middleware/auth.ts';
import { deadlinePassed, RequestDeadline } from './middleware/deadline.ts';
import { idempotentWrites, MAX_STORED_BODY, readIdempotencyKey } from './middleware/idempotency.ts';
import { BODY_LIMIT, checkJsonRequest, parseJsonBytes, readIncoming, readLimited } from './middleware/json-body.ts';
import { addRateLimitHeaders, judgeCount } from './middleware/rate-limit.ts';
import { parseTraceparent, type RequestFields, requestIdFrom, requestLog } from './middleware/request-id.ts';
import { endServerSpan, incomingGetter, startServerSpan } from './middleware/trace-requests.ts';
import type { WriteRecord } from './run-write.ts';

/** CORS for the listed origins (CORS_ORIGINS) on an answer of the table; preflights are the app's (cors.ts). */
export interface CorsFields {
  origins: ReadonlySet<string>;
  exposeHeaders: readonly string[];
}

export interface PipelineOptions {
  deps: AppDeps;
  validators: Validators;
  metrics?: Metrics;
  /** The deadline of a request on `path` (see deadline.ts). */
  timeoutFor: (path: string) => number;
  cors?: CorsFields;
  tracer?: Tracer;
}

/** Node's server's way in: true when a row of the table answered the request, false to leave it to the app. */
export type NodeRoutes = (incoming: IncomingMessage, outgoing: ServerResponse) => boolean;
/** A fetch Request's way in: the answer of a row of the table, or undefined when none has its method and path. */
export type FetchRoutes = (request: Request) => Promise<Response> | undefined;

/** How a request came and how its answer leaves. */
interface Transport {
  readonly req: RequestLike & { readonly search: string; readonly routePath: string };
  readonly env: { incoming?: IncomingMessage; outgoing?: ServerResponse };
  /** The body, counted as it comes: 413 past `limit`, 400 when the client hangs up mid-body. */
  readBody(limit: number): Promise<Uint8Array>;
  /** The request's headers for the span's propagator. */
  traceHeaders(): { headers: unknown; getter: TextMapGetter<unknown> };
  /** Writes `answer` with `fixed` (the headers every answer carries) once; may throw (a header Node refuses). */
  write(answer: Answer, fixed: Record<string, string>, head: boolean): void;
  /** Writing threw: a 500 (its error logged) when nothing was written yet, else the connection closed. */
  failed(answer: () => Answer, fixed: Record<string, string>): void;
}

type Serve = (transport: Transport) => void;

const ABSOLUTE = /^https?:\/\/[^/?]*/i;

/** The pipeline of every row of `table`, behind its two ways in. */
export function compileTable(
  table: readonly Operation<unknown>[],
  options: PipelineOptions,
): { node: NodeRoutes; fetch: FetchRoutes } {
  const accessLog = accessLogger(options.deps.logger);
  const direct = directAccessLine(accessLog);
  const routes = new Map<string, Map<string, Serve>>();
  for (const op of table) {
    const serve = compileRow(op, options, accessLog, direct);
    // HEAD: a GET's pipeline, its answer's headers without the body (as Hono answers HEAD).
    for (const method of op.method === 'GET' ? ['GET', 'HEAD'] : [op.method]) {
      let byPath = routes.get(method);
      if (byPath === undefined) {
        byPath = new Map();
        routes.set(method, byPath);
      }
      byPath.set(op.path, serve);
    }
  }

  function node(incoming: IncomingMessage, outgoing: ServerResponse): boolean {
    const byPath = routes.get(incoming.method ?? '');
    if (byPath === undefined) return false;
    let target = incoming.url ?? '';
    // An absolute-form target (`GET http://host/api/1/user/get`, serve.ts checked its path): its
    // path, so that it is served here too, with its connection's address (failed authentications
    // are counted per address); the asterisk form and the rest are the app's.
    if (target.charCodeAt(0) !== 0x2f) {
      const authority = ABSOLUTE.exec(target);
      if (authority === null) return false;
      target = target.slice(authority[0].length);
    }
    const at = target.indexOf('?');
    const path = at === -1 ? target : target.slice(0, at);
    const serve = byPath.get(path);
    // A path of the table, as sent; any other is the app's to route.
    if (serve === undefined) return false;
    serve(new NodeTransport(incoming, outgoing, path, at === -1 ? '' : target.slice(at)));
    return true;
  }

  function fetch(request: Request): Promise<Response> | undefined {
    const byPath = routes.get(request.method);
    if (byPath === undefined) return undefined;
    const url = new URL(request.url);
    const serve = byPath.get(url.pathname);
    if (serve === undefined) return undefined;
    return new Promise((resolve) => serve(new FetchTransport(request, url, resolve)));
  }

  return { node, fetch };
}

/** One row's pipeline: the steps of the header, in their order. */
function compileRow(
  op: Operation<unknown>,
  options: PipelineOptions,
  accessLog: AppDeps['logger'],
  direct: AccessLineWriter | undefined,
): Serve {
  const { deps, validators, metrics, cors, tracer } = options;
  const { limiter } = deps;
  const exposed = cors?.exposeHeaders.join(',') ?? '';
  const timeoutMs = options.timeoutFor(op.path);
  const hasBody = 'body' in op.request;
  const bodyLimit = op.bulk?.bodyBytes ?? BODY_LIMIT;
  // A body within the usual bound is read from the start (and judged only after the token and
  // the scope), so that a client that sent it whole and hung up while its token was looked up
  // still gets its answer; a bulk body only once its sender is known to have the scope.
  const readEarly = hasBody && op.bulk === undefined;
  const writes = op.writes;
  const also = op.alsoScope;
  const idempotency = op.idempotent
    ? idempotentWrites(op.bulk?.keptAnswerBytes ?? MAX_STORED_BODY, Math.max(60_000, op.bulk?.timeoutMs ?? 0))
    : undefined;

  /** An error as the answer it is (the guards' rendering). */
  const render = (error: unknown, c: OpContext): Answer => {
    if (!(error instanceof Error)) throw error;
    c.error = error;
    return problemAnswer(c, asApiError(error, c.get('log') ?? deps.logger));
  };

  /** 4–5 and 14's rate-limit fields: the token, the budgets; everything after them under the budget's guard. */
  async function counted(
    c: OpContext,
    transport: Transport,
    reading: Promise<Uint8Array> | undefined,
  ): Promise<Answer> {
    // Neither waits when the token is known and its budgets leased (the usual case): no promise then.
    const authenticating = authenticate(c);
    if (authenticating !== undefined) await authenticating;
    const tokenId = c.vars.token!.id;
    const states = limiter.consumeNow?.(tokenId, op.budget) ?? (await limiter.consume(tokenId, op.budget));
    const refused = judgeCount(c, states);
    if (refused !== undefined) return refused;
    let answer: Answer;
    try {
      answer = writes === undefined ? await checked(c, transport, reading) : await audited(c, transport, reading);
    } catch (error) {
      answer = render(error, c);
    }
    addRateLimitHeaders(c, answer);
    return answer;
  }

  /** 6: the audit of a write's every outcome but its success. */
  async function audited(
    c: OpContext,
    transport: Transport,
    reading: Promise<Uint8Array> | undefined,
  ): Promise<Answer> {
    const record: WriteRecord = { operation: writes!, userId: undefined, committed: false };
    c.vars.write = record;
    let answer: Answer;
    try {
      answer = await checked(c, transport, reading);
    } catch (error) {
      answer = render(error, c);
    }
    await auditOutcome(c, record, answer, op.unaudited);
    return answer;
  }

  /** 7–13: scope, body or query, the body's scope, the key, parse, the claim, the handler. */
  async function checked(
    c: OpContext,
    transport: Transport,
    reading: Promise<Uint8Array> | undefined,
  ): Promise<Answer> {
    if (also === undefined || !c.vars.token!.scopes.includes(also.scope)) checkScope(c, op.scope);
    if (hasBody) {
      const { req } = c;
      checkJsonRequest(req.header('content-type'), req.header('content-length'), bodyLimit, () => req.search !== '');
      c.vars.body = parseJsonBytes(await (reading ?? transport.readBody(bodyLimit)));
    }
    if (also !== undefined) checkScopeForBody(c, op.scope, also);
    if (idempotency !== undefined) await readIdempotencyKey(c);
    const input = op.parse(c);
    c.vars.input = input;
    if (idempotency === undefined || c.vars.idempotency === undefined) return op.handle(c, input);
    const replayed = await idempotency.claim(c);
    if (replayed !== undefined) return replayed;
    let answer: Answer;
    try {
      answer = await op.handle(c, input);
    } catch (error) {
      answer = render(error, c);
    }
    await idempotency.keep(c, answer);
    return answer;
  }

  return function serve(transport) {
    const started = performance.now();
    const c = new OpContext(transport.req, transport.env);
    // The body being read since the request came (readEarly), handed down to the body step.
    let reading: Promise<Uint8Array> | undefined;
    if (readEarly) {
      reading = transport.readBody(bodyLimit);
      reading.catch(() => {}); // judged (and answered) where it is awaited, if ever
    }
    // 1. The span, when tracing is on.
    let span: { span: Span; context: ReturnType<typeof context.active>; method: string } | undefined;
    if (tracer !== undefined) {
      const { headers, getter } = transport.traceHeaders();
      span = startServerSpan(tracer, c.req.method, c.req.url.startsWith('https:'), headers, getter);
    }
    // 2. The request id and its logger.
    const requestId = requestIdFrom(c.req.header('x-request-id'));
    const trace = parseTraceparent(c.req.header('traceparent'));
    const fields: RequestFields = trace === undefined ? { requestId } : { requestId, ...trace };
    const { vars } = c;
    vars.deps = deps;
    vars.validators = validators;
    vars.requestId = requestId;
    vars.log = requestLog(deps.logger, fields);

    // 3. The deadline (deadline.ts): a 503 once `timeoutMs` passed, unless the request is
    // committing its write; the work goes on in the background, its answer dropped.
    const deadline = new RequestDeadline(() => c.req.raw.signal);
    vars.deadline = deadline;

    let answered = false;
    const finish = (answer: Answer) => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      c.res = answer;
      try {
        send(c, transport, answer, started, fields);
      } catch (error) {
        transport.failed(() => render(error, c), fixedHeaders(requestId));
      }
      if (span !== undefined) endServerSpan(span.span, span.method, op.path, answer.status, requestId);
    };
    const timer = setTimeout(function onDeadline() {
      if (deadline.committing || answered) return;
      deadline.expire();
      finish(render(deadlinePassed(timeoutMs), c));
    }, timeoutMs);
    const run = () => counted(c, transport, reading);
    const working = span === undefined ? run() : context.with(span.context, run);
    working.then(finish, (error: unknown) => {
      if (answered) return;
      finish(render(error instanceof Error ? error : new Error(String(error)), c));
    });
  };

  /** 14–15: the answer with the headers every API answer carries; then the metrics and the access line. */
  function send(c: OpContext, transport: Transport, answer: Answer, started: number, fields: RequestFields): void {
    if (cors !== undefined) addCorsFields(answer, c.req.header('origin'), cors, exposed);
    transport.write(answer, fixedHeaders(fields.requestId), c.req.method === 'HEAD');
    const { method } = c.req;
    metrics?.observeRequest(method, op.path, answer.status, (performance.now() - started) / 1000);
    if (!accessLog.isLevelEnabled('info')) return;
    const durationMs = Math.round((performance.now() - started) * 100) / 100;
    const token = c.vars.token as TokenInfo | undefined;
    const code = answerCode(c, answer);
    if (direct !== undefined) direct(fields, method, op.path, answer.status, durationMs, token, code);
    else writeAccessLine(accessLog, 'info', fields, method, op.path, answer.status, durationMs, token, code);
  }
}

/** The headers every API answer carries. */
const fixedHeaders = (requestId: string) => ({
  'cache-control': 'no-store',
  'x-request-id': requestId,
  'x-content-type-options': 'nosniff',
});

/**
 * CORS on an answer (hono/cors's, for a request that is not a preflight): the origin allowed when
 * listed, what the page may read, and `Vary: Origin` (the answer depends on it).
 */
function addCorsFields(answer: Answer, origin: string | undefined, cors: CorsFields, expose: string): void {
  // Straight onto the fields: each value is the configuration's (an origin is echoed only when it
  // is one of the listed ones), checked once at start, not per answer.
  const { fields } = answer.headers;
  if (origin !== undefined && cors.origins.has(origin)) fields['access-control-allow-origin'] = origin;
  if (expose !== '') fields['access-control-expose-headers'] = expose;
  const vary = fields.vary;
  fields.vary = vary === undefined ? 'Origin' : `${vary}, Origin`;
}

/** The fields of which Node's `headers` keeps only the first (IncomingMessage, matchKnownFields). */
const FIRST_ONLY = new Set([
  'age',
  'authorization',
  'content-length',
  'content-type',
  'etag',
  'expires',
  'from',
  'host',
  'if-modified-since',
  'if-unmodified-since',
  'last-modified',
  'location',
  'max-forwards',
  'proxy-authorization',
  'referer',
  'retry-after',
  'server',
  'user-agent',
]);

/** A request from Node's server, answered on its ServerResponse. */
class NodeTransport implements Transport {
  readonly req: NodeRequest;
  readonly env: { incoming: IncomingMessage; outgoing: ServerResponse };
  constructor(incoming: IncomingMessage, outgoing: ServerResponse, path: string, search: string) {
    this.req = new NodeRequest(incoming, outgoing, path, search);
    this.env = { incoming, outgoing };
  }
  readBody(limit: number): Promise<Uint8Array> {
    return readIncoming(this.env.incoming, limit);
  }
  traceHeaders() {
    return { headers: this.env.incoming.headers, getter: incomingGetter as TextMapGetter<unknown> };
  }
  write(answer: Answer, fixed: Record<string, string>, head: boolean): void {
    const { outgoing } = this.env;
    const headers = answer.headers.fields as OutgoingHttpHeaders;
    Object.assign(headers, fixed);
    const { body } = answer;
    if (body === null || head) {
      outgoing.writeHead(answer.status, headers).end();
      if (body instanceof ReadableStream) void body.cancel().catch(() => {});
    } else if (typeof body === 'string') {
      headers['Content-Length'] = Buffer.byteLength(body);
      outgoing.writeHead(answer.status, headers).end(body);
    } else {
      outgoing.writeHead(answer.status, headers);
      void pump(body, outgoing);
    }
  }
  failed(answer: () => Answer, fixed: Record<string, string>): void {
    const { outgoing } = this.env;
    try {
      const rendered = answer(); // logs the error
      if (outgoing.headersSent) outgoing.destroy();
      else this.write(rendered, fixed, false);
    } catch {
      outgoing.destroy();
    }
  }
}

/**
 * A streamed body (an export's lines) written as the client takes it: the next chunk is pulled
 * only once the last was taken, and a client that goes away cancels the stream.
 */
async function pump(body: ReadableStream<Uint8Array>, outgoing: ServerResponse): Promise<void> {
  const reader = body.getReader();
  const gone = () => void reader.cancel().catch(() => {});
  outgoing.once('close', gone);
  try {
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      if (outgoing.destroyed) return;
      if (!outgoing.write(value)) {
        await new Promise<void>((resolve) => {
          const settle = () => {
            outgoing.off('drain', settle);
            outgoing.off('close', settle);
            resolve();
          };
          outgoing.once('drain', settle);
          outgoing.once('close', settle);
        });
      }
    }
    outgoing.end();
  } catch {
    // The stream failed (its own code logged why): the client sees its answer cut short.
    outgoing.destroy();
  } finally {
    outgoing.off('close', gone);
  }
}

/** The request as steps and handlers read it, from Node's IncomingMessage (HonoRequest's members they use). */
class NodeRequest implements RequestLike {
  #signal: AbortSignal | undefined;
  readonly incoming: IncomingMessage;
  readonly outgoing: ServerResponse;
  readonly method: string;
  readonly path: string;
  /** The query with its `?`, or ''. */
  readonly search: string;
  readonly routePath: string;
  constructor(incoming: IncomingMessage, outgoing: ServerResponse, path: string, search: string) {
    this.incoming = incoming;
    this.outgoing = outgoing;
    this.method = incoming.method!;
    this.path = path;
    this.search = search;
    this.routePath = path;
  }
  header(name: string): string | undefined {
    const lower = name.toLowerCase();
    const value = this.incoming.headers[lower];
    if (value === undefined || !FIRST_ONLY.has(lower)) return Array.isArray(value) ? value.join(', ') : value;
    // Node keeps the first of these fields; every one is seen here, joined (as @hono/node-server
    // reads them), so that two Authorization fields are refused.
    const raw = this.incoming.rawHeaders;
    let joined: string | undefined;
    for (let i = 0; i < raw.length; i += 2) {
      const field = raw[i]!;
      if (field.length === lower.length && field.toLowerCase() === lower) {
        joined = joined === undefined ? raw[i + 1]! : `${joined}, ${raw[i + 1]!}`;
      }
    }
    return joined;
  }
  get url(): string {
    return `http://${this.incoming.headers.host ?? 'localhost'}${this.path}${this.search}`;
  }
  /** Its signal: aborted when the client goes away before its answer. */
  get raw(): { signal: AbortSignal } {
    if (this.#signal === undefined) {
      const controller = new AbortController();
      this.#signal = controller.signal;
      if (this.outgoing.destroyed) controller.abort(new Error('Client connection prematurely closed.'));
      else {
        this.outgoing.once('close', () => {
          if (!this.outgoing.writableFinished) controller.abort(new Error('Client connection prematurely closed.'));
        });
      }
    }
    return { signal: this.#signal };
  }
}

const headersGetter: TextMapGetter<Headers> = {
  get: (headers, key) => headers.get(key) ?? undefined,
  keys: (headers) => [...headers.keys()],
};

/** A fetch Request (the app's fetch), answered with a Response. */
class FetchTransport implements Transport {
  readonly req: RequestLike & { readonly search: string; readonly routePath: string };
  readonly env = {};
  readonly #request: Request;
  readonly #resolve: (response: Response) => void;
  constructor(request: Request, url: URL, resolve: (response: Response) => void) {
    this.#request = request;
    this.#resolve = resolve;
    this.req = {
      method: request.method,
      path: url.pathname,
      search: url.search,
      routePath: url.pathname,
      url: request.url,
      raw: request,
      header: (name) => request.headers.get(name) ?? undefined,
    };
  }
  readBody(limit: number): Promise<Uint8Array> {
    return readLimited(this.#request.body, limit);
  }
  traceHeaders() {
    return { headers: this.#request.headers, getter: headersGetter as TextMapGetter<unknown> };
  }
  write(answer: Answer, fixed: Record<string, string>, head: boolean): void {
    const headers = { ...answer.headers.fields, ...fixed };
    const body = head ? null : answer.body;
    if (head && answer.body instanceof ReadableStream) void answer.body.cancel().catch(() => {});
    this.#resolve(new Response(body, { status: answer.status, headers }));
  }
  failed(answer: () => Answer, fixed: Record<string, string>): void {
    try {
      this.write(answer(), fixed, false);
    } catch (error) {
      this.#resolve(Response.json({ detail: describeError(error) }, { status: 500 }));
    }
  }
}
