import { type IncomingMessage, type ServerResponse, validateHeaderName, validateHeaderValue } from 'node:http';
import type { Tracer } from '@opentelemetry/api';
import type { Hono } from 'hono';
import type { Logger } from 'pino';
import type { HeldElsewhere } from '../accounts/user-data.ts';
import type { TrustedProxies } from '../auth/client-address.ts';
import type { AuthFailures } from '../auth/failed-authentications.ts';
import type { TokenInfo, TokenVerifier } from '../auth/tokens.ts';
import type { Validators } from '../contract/validation.ts';
import type { Database } from '../db/client.ts';
import type { Sequencer } from '../events/sequencer.ts';
import type { Wake } from '../events/wake.ts';
import type { AccountHooks } from '../kernel/account-hooks.ts';
import type { KeyRing } from '../kernel/secret-box.ts';
import type { SignInGate } from '../kernel/sign-in-gate.ts';
import type { HeavyReadGate } from '../limits/heavy-reads.ts';
import type { LockoutStore, VerifyLimits } from '../limits/lockout.ts';
import type { LongPollGate } from '../limits/long-polls.ts';
import type { PolicyState, RateLimiter } from '../limits/rate-limit.ts';
import type { TransactionShare } from '../limits/transactions.ts';
/** What the handlers need, handed in by main.ts or a test; nothing is a module-level singleton. */
import type { MessageBudgets } from '../messages/outbox.ts';
import type { Metrics } from '../ops/metrics.ts';
import type { PasswordHasher } from '../passwords/hasher.ts';
import type { BreachedPasswords } from '../passwords/screening.ts';
import type { AccessTokenSigner } from '../sessions/access-tokens.ts';
/** What the handlers need, handed in by main.ts or a test; nothing is a module-level singleton. */
import type { SsoDeps } from '../sso/deps.ts';
import type { Deadline } from './middleware/deadline.ts';
import type { IdempotencyRequest } from './middleware/idempotency.ts';
import type { RequestLog } from './middleware/request-id.ts';
import type { WriteRecord } from './run-write.ts';

export interface AppDeps {
  database: Database;
  tokens: TokenVerifier;
  hasher: PasswordHasher;
  limiter: RateLimiter;
  logger: Logger;
  /** Set when the operator turned metrics on (METRICS_TOKEN); /metrics is 404 otherwise. */
  metrics?: { collector: Metrics; token: string };
  /** Set when tracing is on (OTEL_EXPORTER_OTLP_ENDPOINT): the app then traces each request. */
  tracer?: Tracer;
  /** Browser origins allowed by CORS (CORS_ORIGINS); none by default. */
  corsOrigins?: string[];
  /** How long a request may take before it is answered 503 (and its write, if any, rolled back). */
  requestTimeoutMs?: number;
  /** Failed authentications per client address (AUTH_FAILURE_LIMIT); absent: not limited. */
  authFailures?: AuthFailures;
  /** Peers whose X-Forwarded-For names the client (TRUSTED_PROXIES); absent: nobody's. */
  trustedProxies?: TrustedProxies;
  /** verify's guessing limits (VERIFY_LIMIT, VERIFY_LIMIT_ADDRESS). */
  verifyLimits: VerifyLimits;
  /** Where verify's failure counts live: the database, or Redis (REDIS_URL) falling back to it. */
  lockout: LockoutStore;
  /** Told when events commit (LISTEN): long-polls answer at once rather than at their next poll. */
  wake?: Wake;
  /** Numbers committed events; kicked after each write, so that its event is out at once. */
  sequencer?: Sequencer;
  /** false only in the benchmark (assemble's `outbox` option), to measure what events cost a write. */
  outbox?: boolean;
  /** Bounds the long-polls waiting at once, per token and per site (LONG_POLLS_PER_*); absent: none. */
  longPolls?: LongPollGate;
  /** Bounds a site's lists and person's-data reads running at once (HEAVY_READS_PER_SITE); absent: none. */
  heavyReads?: HeavyReadGate;
  /** The same for its exports, apart: an export holds its place for as long as it streams. */
  heavyExports?: HeavyReadGate;
  /** Bounds a site's transactions at once (a share of DATABASE_POOL_SIZE, limits/transactions.ts); absent: none. */
  transactions?: TransactionShare;
  /** The most accounts a site may hold (MAX_ACCOUNTS_PER_SITE); absent: no limit. */
  maxAccountsPerSite?: number;
  /** Keys sealing second-factor secrets; absent: factor operations answer 503 (FACTOR_ENCRYPTION_KEY unset). */
  factorKeys?: KeyRing;
  /** Breached-password screening (BREACHED_PASSWORDS_URL); absent: off. */
  breachedPasswords?: BreachedPasswords;
  /** Signs sessions' access tokens (sessions/signing-keys.ts). */
  accessTokens: AccessTokenSigner;
  /** What the other domains do when something happens to an account (kernel/account-hooks.ts; assemble.ts joins them). */
  accountHooks: AccountHooks;
  /** Which logins the site's organizations refuse (kernel/sign-in-gate.ts; assemble.ts: sso/enforcement.ts). */
  signInGate?: SignInGate;
  /** What the other domains hold of an account, for its person's data (accounts/user-data.ts; assemble.ts). */
  heldElsewhere: HeldElsewhere;
  /** The message outbox's worker on this server (messages/worker.ts) and `send`'s budgets. */
  messages?: { kick(): void; budgets: MessageBudgets };
  /** Enterprise sign-in (sso/): where our SP metadata is published, and the TXT lookups of domain verification. */
  sso?: SsoDeps;
  /** Set by main.ts on SIGTERM: readiness answers 503 so that a load balancer stops sending here. */
  lifecycle?: { draining: boolean };
}

export interface AppEnv {
  Variables: {
    requestId: string;
    /** The request's logger: every line carries its requestId and, when given, its W3C trace. */
    log: RequestLog;
    deps: AppDeps;
    validators: Validators;
    /** The parsed JSON body, set by the json-body middleware. */
    body: unknown;
    /** The operation's input, as its parse accepted it: what its handler works on. */
    input: unknown;
    /** The request's Idempotency-Key and its fingerprint, set by idempotencyKey() when it has one. */
    idempotency: IdempotencyRequest | undefined;
    /** The token the request was made with, set by requireToken. */
    token: TokenInfo;
    /** Where the token's budgets stand after counting this request; the budget step puts them on the answer. */
    rateLimits: PolicyState[];
    /** How the request's write went, kept by the audit step of every write operation (pipeline.ts). */
    write: WriteRecord;
    /** The request's deadline; runWrite calls its commit() before a write commits. */
    deadline: Deadline;
  };
}

export type App = Hono<AppEnv>;

export type Vars = Partial<AppEnv['Variables']>;

/**
 * The request as a step or handler reads it, whichever transport brought it (Node's server, or a
 * fetch Request in tests): the members of Hono's HonoRequest they use, so that the mock's gate can
 * hand an operation's parse Hono's own context.
 */
export interface RequestLike {
  readonly method: string;
  /** The path as routed (the operation's), without the query. */
  readonly path: string;
  /** The whole URL: scheme, host, path and query. */
  readonly url: string;
  /** The query with its `?` (or ''), when the transport has it at hand without building `url` (Hono's request has not). */
  readonly search?: string;
  header(name: string): string | undefined;
  /** The client's signal: aborted when it goes away before its answer. */
  readonly raw: { readonly signal: AbortSignal };
}

/** What an operation's parse reads: its query or body and the validators (Hono's Context is one too). */
export interface ParseContext {
  get<K extends keyof AppEnv['Variables']>(key: K): AppEnv['Variables'][K];
  readonly req: RequestLike;
}

/** What a step of the pipeline reads and sets (an operation's context, or Hono's in the mock's gate). */
export interface StepContext extends ParseContext {
  set<K extends keyof AppEnv['Variables']>(key: K, value: AppEnv['Variables'][K]): void;
  /** Node's request and response, when Node's server brought the request. */
  readonly env: unknown;
}

/**
 * A header a handler sets is refused where it sets it (an error of the handler, rendered as every
 * other), not later in writeHead, where nothing would catch it.
 */
function checkField(name: string, value: string): void {
  validateHeaderName(name);
  validateHeaderValue(name, value);
}

/** An answer's headers on a plain object (lower-case names): what a handler or step sets and reads. */
export class AnswerHeaders {
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

/** A body an answer carries: text, none, or a stream (an export's lines). */
export type AnswerBody = string | null | ReadableStream<Uint8Array>;

/** What a handler answers: a status, the headers and a body, written once by the transport. */
export class Answer {
  readonly headers = new AnswerHeaders();
  readonly status: number;
  readonly body: AnswerBody;
  constructor(status: number, body: AnswerBody) {
    this.status = status;
    this.body = body;
  }
  /** The body as text (a problem's, a kept answer's); undefined for a stream. */
  text(): string | undefined {
    return typeof this.body === 'string' ? this.body : this.body === null ? '' : undefined;
  }
}

type HeaderInit = Record<string, string> | undefined;

/**
 * The one context every operation's steps, parse and handler receive (http/pipeline.ts): the
 * request, the variables the steps set, and the ways to answer.
 */
export class OpContext implements StepContext {
  readonly vars: Vars = {};
  readonly req: RequestLike & { readonly search: string; readonly routePath: string };
  /** Node's request and response (`incoming`, `outgoing`) when Node's server brought the request. */
  readonly env: { incoming?: IncomingMessage; outgoing?: ServerResponse };
  /** The error the answer renders, when it renders one. */
  error: Error | undefined;
  /** The answer, once made. */
  res: Answer | undefined;
  #prepared: Record<string, string> | undefined;
  constructor(
    req: RequestLike & { readonly search: string; readonly routePath: string },
    env: { incoming?: IncomingMessage; outgoing?: ServerResponse } = {},
  ) {
    this.req = req;
    this.env = env;
  }
  get<K extends keyof AppEnv['Variables']>(key: K): AppEnv['Variables'][K] {
    return this.vars[key] as AppEnv['Variables'][K];
  }
  set<K extends keyof AppEnv['Variables']>(key: K, value: AppEnv['Variables'][K]): void {
    this.vars[key] = value;
  }
  /** A header for the answer the handler makes next. */
  header(name: string, value: string | undefined): void {
    if (value !== undefined) checkField(name, value);
    this.#prepared ??= {};
    if (value === undefined) delete this.#prepared[name.toLowerCase()];
    else this.#prepared[name.toLowerCase()] = value;
  }
  #answer(status: number, body: AnswerBody, contentType: string | undefined, headers: HeaderInit): Answer {
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
  body(body: AnswerBody, status = 200, headers?: HeaderInit): Answer {
    return this.#answer(status, body, undefined, headers);
  }
  text(text: string, status = 200, headers?: HeaderInit): Answer {
    return this.#answer(status, text, 'text/plain; charset=UTF-8', headers);
  }
}
