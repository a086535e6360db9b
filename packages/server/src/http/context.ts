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
import type { HeavyReadGate } from '../limits/heavy-reads.ts';
import type { LockoutStore, VerifyLimits } from '../limits/lockout.ts';
import type { LongPollGate } from '../limits/long-polls.ts';
import type { PolicyState, RateLimiter } from '../limits/rate-limit.ts';
import type { TransactionShare } from '../limits/transactions.ts';
import type { Metrics } from '../ops/metrics.ts';
import type { PasswordHasher } from '../passwords/hasher.ts';
import type { BreachedPasswords } from '../passwords/screening.ts';
import type { AccessTokenSigner } from '../sessions/access-tokens.ts';
import type { Deadline } from './middleware/deadline.ts';
import type { IdempotencyRequest } from './middleware/idempotency.ts';
import type { RequestLog } from './middleware/request-id.ts';
import type { WriteRecord } from './run-write.ts';

/** What the handlers need, handed in by main.ts or a test; nothing is a module-level singleton. */
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
  /** What the other domains hold of an account, for its person's data (accounts/user-data.ts; assemble.ts). */
  heldElsewhere: HeldElsewhere;
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
    /** Where the token's budgets stand after counting this request; rateLimit() puts them on the answer. */
    rateLimits: PolicyState[];
    /** How the request's write went, kept by the audit middleware of every write operation. */
    write: WriteRecord;
    /** The request's deadline; runWrite calls its commit() before a write commits. */
    deadline: Deadline;
  };
}

export type App = Hono<AppEnv>;
