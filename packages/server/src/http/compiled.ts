// The compiled operations (issue 47): each row of the operation table with no audited write, no
// Idempotency-Key, no bulk bounds and no long-poll (the reads and checks; two of them store
// something in passing, a passkey challenge and a replayed delivery, as on the app) becomes at
// start one function on Node's own request and response, doing in order and inline what the Hono route and the front step do for
// it: the request id and its logger, the deadline, the token, the budgets, the scope, the body or
// the query, the handler, the rate-limit fields, the headers every answer carries, the metrics and
// the access line. No Request, Response or Headers object is made, no middleware frame runs, the
// answer is written once with writeHead and end. Everything else (writes, the paths outside the
// table, HEAD, a preflight, any request while tracing or CORS is on, a target that is not a plain
// path) goes to the Hono app as before, which stays the reference: the answers, headers and log
// lines are the same (the contract suites run through both).
import {
  type IncomingMessage,
  type OutgoingHttpHeaders,
  type ServerResponse,
  validateHeaderName,
  validateHeaderValue,
} from 'node:http';
import type { Context, ErrorHandler } from 'hono';
import type { TokenInfo } from '../auth/tokens.ts';
import type { Validators } from '../contract/validation.ts';
import { ApiError, describeError } from '../errors.ts';
import type { Metrics } from '../ops/metrics.ts';
import type { AppDeps, AppEnv } from './context.ts';
import type { Operation } from './define-operation.ts';
import { type AccessLineWriter, accessLogger, directAccessLine, writeAccessLine } from './middleware/access-log.ts';
import { authenticate, checkScope } from './middleware/auth.ts';
import { deadlinePassed, RequestDeadline } from './middleware/deadline.ts';
import { BODY_LIMIT, checkJsonRequest, parseJsonBytes, readIncoming } from './middleware/json-body.ts';
import { addRateLimitHeaders, judgeCount } from './middleware/rate-limit.ts';
import { parseTraceparent, type RequestFields, requestIdFrom, requestLog } from './middleware/request-id.ts';

/** Whether a row is compiled: no audited write, and nothing of Hono's that the compiled context lacks. */
export const isCompiled = (op: Operation<unknown>): boolean =>
  op.writes === undefined &&
  !op.idempotent &&
  op.bulk === undefined &&
  op.waitsMs === undefined &&
  op.alsoScope === undefined &&
  op.method !== 'DELETE';

/**
 * A header a handler sets is refused where the app's Headers refuses it (in the handler, a 500),
 * not later in writeHead, where nothing would catch it.
 */
function checkField(name: string, value: string): void {
  validateHeaderName(name);
  validateHeaderValue(name, value);
}

/** An answer's headers: what a handler sets and reads of them, on a plain object (lower-case names). */
class AnswerHeaders {
  readonly fields: Record<string, string> = {};
  get(name: string): string | null {
    return this.fields[name.toLowerCase()] ?? null;
  }
  has(name: string): boolean {
    return name.toLowerCase() in this.fields;
  }
  set(name: string, value: string): void {
    checkField(name, value);
    this.fields[name.toLowerCase()] = value;
  }
  append(name: string, value: string): void {
    checkField(name, value);
    const key = name.toLowerCase();
    const had = this.fields[key];
    this.fields[key] = had === undefined ? value : `${had}, ${value}`;
  }
  delete(name: string): void {
    delete this.fields[name.toLowerCase()];
  }
}

/** What a compiled handler answers in place of a Response: a status, the headers and a text body. */
export class Answer {
  readonly headers = new AnswerHeaders();
  readonly status: number;
  readonly body: string | null;
  constructor(status: number, body: string | null) {
    this.status = status;
    this.body = body;
  }
}

type Vars = Partial<AppEnv['Variables']>;
type HeaderInit = Record<string, string> | undefined;

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

/** The request as the handlers read it (HonoRequest's members they use). */
export class CompiledRequest {
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
    // Node keeps the first of these fields; the app sees every one, joined (as @hono/node-server
    // reads them), so that two Authorization fields are refused alike.
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
  query(name: string): string | undefined {
    return new URLSearchParams(this.search).get(name) ?? undefined;
  }
  get url(): string {
    return `http://${this.incoming.headers.host ?? 'localhost'}${this.path}${this.search}`;
  }
  /** The Request's members read here: its signal (aborted when the client goes away before its answer). */
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

/**
 * The context a compiled operation hands its parse and handle: the members of Hono's Context they
 * use (get, set, req, json, body, text, header, env, error, res), answering with an Answer.
 */
class CompiledContext {
  readonly vars: Vars = {};
  readonly env: { incoming: IncomingMessage; outgoing: ServerResponse };
  error: Error | undefined;
  res: Answer | undefined;
  /** The body being read (an operation with a body). */
  reading: Promise<Uint8Array> | undefined;
  #prepared: Record<string, string> | undefined;
  readonly req: CompiledRequest;
  constructor(req: CompiledRequest) {
    this.req = req;
    this.env = { incoming: req.incoming, outgoing: req.outgoing };
  }
  get<K extends keyof Vars>(key: K): Vars[K] {
    return this.vars[key];
  }
  set<K extends keyof Vars>(key: K, value: Vars[K]): void {
    this.vars[key] = value;
  }
  header(name: string, value: string | undefined): void {
    if (value !== undefined) checkField(name, value);
    this.#prepared ??= {};
    if (value === undefined) delete this.#prepared[name.toLowerCase()];
    else this.#prepared[name.toLowerCase()] = value;
  }
  #answer(status: number, body: string | null, contentType: string | undefined, headers: HeaderInit): Answer {
    const answer = new Answer(status, body);
    const fields = answer.headers.fields;
    if (this.#prepared !== undefined) Object.assign(fields, this.#prepared);
    if (contentType !== undefined) fields['content-type'] = contentType;
    if (headers !== undefined) {
      for (const name in headers) {
        checkField(name, headers[name]!);
        fields[name.toLowerCase()] = headers[name]!;
      }
    }
    return answer;
  }
  json(object: unknown, status = 200, headers?: HeaderInit): Answer {
    return this.#answer(status, JSON.stringify(object), 'application/json', headers);
  }
  body(body: string | null, status = 200, headers?: HeaderInit): Answer {
    return this.#answer(status, body, undefined, headers);
  }
  text(text: string, status = 200, headers?: HeaderInit): Answer {
    return this.#answer(status, text, 'text/plain; charset=UTF-8', headers);
  }
}

export interface CompileOptions {
  deps: AppDeps;
  validators: Validators;
  metrics?: Metrics;
  /** The deadline of a request on `path` (see deadline.ts). */
  timeoutFor: (path: string) => number;
  /** How the app renders an error (app.ts, errorRenderer). */
  renderError: ErrorHandler<AppEnv>;
}

/** Routes a request to its compiled operation: true when it answered it, false to leave it to the app. */
export type CompiledRoutes = (incoming: IncomingMessage, outgoing: ServerResponse) => boolean;

/** The compiled operations of `table` (those isCompiled admits), keyed by method and path. */
export function compileOperations(table: readonly Operation<unknown>[], options: CompileOptions): CompiledRoutes {
  const accessLog = accessLogger(options.deps.logger);
  const direct = directAccessLine(accessLog);
  const routes = new Map<string, Map<string, Compiled>>();
  for (const op of table) {
    if (!isCompiled(op)) continue;
    let byPath = routes.get(op.method);
    if (byPath === undefined) {
      byPath = new Map();
      routes.set(op.method, byPath);
    }
    byPath.set(op.path, compileOperation(op, options, accessLog, direct));
  }
  return function compiledRoute(incoming, outgoing) {
    const byPath = routes.get(incoming.method ?? '');
    if (byPath === undefined) return false;
    const target = incoming.url ?? '';
    const at = target.indexOf('?');
    const path = at === -1 ? target : target.slice(0, at);
    const run = byPath.get(path);
    // An origin-form target of the table's paths, as sent (a path to decode, an absolute form:
    // the app's routing decides).
    if (run === undefined) return false;
    run(new CompiledRequest(incoming, outgoing, path, at === -1 ? '' : target.slice(at)));
    return true;
  };
}

type Compiled = (req: CompiledRequest) => void;

/** One operation's function: the front step's and the route's work in their order (see app.ts). */
function compileOperation(
  op: Operation<unknown>,
  options: CompileOptions,
  accessLog: AppDeps['logger'],
  direct: AccessLineWriter | undefined,
): Compiled {
  const { deps, validators, metrics, renderError } = options;
  const timeoutMs = options.timeoutFor(op.path);
  const body = 'body' in op.request;
  const bodyLimit = op.bulk?.bodyBytes ?? BODY_LIMIT;
  const render = (error: Error, c: CompiledContext): Answer => {
    c.error = error;
    return renderError(error, c as unknown as Context<AppEnv>) as unknown as Answer;
  };

  /** The route's part: token, budgets, scope, body, parse, handle; the rate-limit fields on the answer. */
  async function work(c: CompiledContext): Promise<Answer> {
    const hc = c as unknown as Context<AppEnv>;
    // Neither waits when the token is known and its budgets leased (the usual case): no promise then.
    const authenticating = authenticate(hc);
    if (authenticating !== undefined) await authenticating;
    const tokenId = c.vars.token!.id;
    const { limiter } = deps;
    const states = limiter.consumeNow?.(tokenId, op.budget) ?? (await limiter.consume(tokenId, op.budget));
    const refused = judgeCount(hc, states);
    if (refused !== undefined) return refused as unknown as Answer;
    let answer: Answer;
    try {
      checkScope(hc, op.scope);
      if (c.reading !== undefined) {
        const { req } = c;
        checkJsonRequest(req.header('content-type'), req.header('content-length'), bodyLimit, () => req.search !== '');
        c.vars.body = parseJsonBytes(await c.reading);
      }
      const input = op.parse(hc);
      c.vars.input = input;
      answer = (await op.handle(hc, input)) as unknown as Answer;
    } catch (error) {
      if (!(error instanceof Error)) throw error;
      answer = render(error, c);
    }
    addRateLimitHeaders(hc, answer as unknown as Response);
    return answer;
  }

  return function compiledOperation(req) {
    const started = performance.now();
    const c = new CompiledContext(req);
    // The body is read from the start (judged only after the token and the scope, as the app
    // does): a client that sent it whole and hung up while the token was looked up still gets
    // its answer, as from the app, whose adapter reads it as it comes.
    if (body) {
      c.reading = readIncoming(req.incoming, bodyLimit);
      c.reading.catch(() => {}); // judged (and answered) where it is awaited, if ever
    }
    const requestId = requestIdFrom(req.header('x-request-id'));
    const trace = parseTraceparent(req.header('traceparent'));
    const fields: RequestFields = trace === undefined ? { requestId } : { requestId, ...trace };
    const { vars } = c;
    vars.deps = deps;
    vars.validators = validators;
    vars.requestId = requestId;
    vars.log = requestLog(deps.logger, fields);

    // The deadline (deadline.ts, withDeadline): a 503 once `timeoutMs` passed, unless the request
    // is committing its write; the work goes on in the background, its answer dropped.
    const deadline = new RequestDeadline(() => req.raw.signal);
    vars.deadline = deadline;

    let answered = false;
    const finish = (answer: Answer) => {
      if (answered) return;
      answered = true;
      clearTimeout(timer);
      c.res = answer;
      try {
        send(c, answer, started, fields);
      } catch (error) {
        sendFailed(c, error);
      }
    };
    const timer = setTimeout(function onDeadline() {
      if (deadline.committing || answered) return;
      deadline.expire();
      finish(render(deadlinePassed(timeoutMs), c));
    }, timeoutMs);
    work(c).then(finish, (error: unknown) => {
      if (answered) return;
      finish(render(error instanceof Error ? error : new Error(String(error)), c));
    });
  };

  /**
   * Writing the answer threw (a header Node refuses, a metrics or log failure): logged, and the
   * client answered 500 when nothing was written yet, else its connection closed; never thrown on,
   * where it would end the process.
   */
  function sendFailed(c: CompiledContext, error: unknown): void {
    const { outgoing } = c.req;
    if (outgoing.headersSent) {
      (c.vars.log ?? deps.logger).error({ err: describeError(error) }, 'unhandled error');
      outgoing.destroy();
      return;
    }
    try {
      // The app's rendering of an unexpected error: its log line and its 500.
      writeAnswer(
        outgoing,
        render(error instanceof Error ? error : new Error(String(error)), c),
        c.vars.requestId ?? '',
      );
    } catch {
      outgoing.destroy();
    }
  }

  /** The answer, with the headers every API answer carries; then the metrics and the access line. */
  function send(c: CompiledContext, answer: Answer, started: number, fields: RequestFields): void {
    writeAnswer(c.req.outgoing, answer, fields.requestId);
    metrics?.observeRequest(op.method, op.path, answer.status, (performance.now() - started) / 1000);
    if (!accessLog.isLevelEnabled('info')) return;
    const durationMs = Math.round((performance.now() - started) * 100) / 100;
    const token = c.vars.token as TokenInfo | undefined;
    const code = problemCode(c, answer);
    if (direct !== undefined) direct(fields, op.method, op.path, answer.status, durationMs, token, code);
    else writeAccessLine(accessLog, 'info', fields, op.method, op.path, answer.status, durationMs, token, code);
  }
}

/** `answer` written once, with the headers every API answer carries. */
function writeAnswer(outgoing: ServerResponse, answer: Answer, requestId: string): void {
  const headers = answer.headers.fields as OutgoingHttpHeaders;
  headers['cache-control'] = 'no-store';
  headers['x-request-id'] = requestId;
  headers['x-content-type-options'] = 'nosniff';
  if (answer.body === null) outgoing.writeHead(answer.status, headers).end();
  else {
    headers['Content-Length'] = Buffer.byteLength(answer.body);
    outgoing.writeHead(answer.status, headers).end(answer.body);
  }
}

/** The problem `code` of an error answer, as problemCode (errors.ts) reads it. */
function problemCode(c: CompiledContext, answer: Answer): string | undefined {
  if (answer.status < 400) return undefined;
  if (c.error instanceof ApiError) return c.error.code;
  if (answer.headers.fields['content-type'] !== 'application/problem+json' || answer.body === null) return undefined;
  try {
    return (JSON.parse(answer.body) as { code?: string }).code;
  } catch {
    return undefined;
  }
}
