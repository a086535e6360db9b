import type { Hono } from 'hono';
import type { Logger } from 'pino';
import type { Database } from './db/client.ts';
import type { Deadline } from './middleware/deadline.ts';
import type { Metrics } from './metrics.ts';
import type { PasswordHasher } from './passwords.ts';
import type { RateLimiter } from './rate-limit.ts';
import type { TokenInfo, TokenVerifier } from './tokens.ts';
import type { Validators } from './validation.ts';

/** What the handlers need, handed in by main.ts or a test; nothing is a module-level singleton. */
export interface AppDeps {
  database: Database;
  tokens: TokenVerifier;
  hasher: PasswordHasher;
  limiter: RateLimiter;
  logger: Logger;
  /** Set when the operator turned metrics on (METRICS_TOKEN); /metrics is 404 otherwise. */
  metrics?: { collector: Metrics; token: string };
  /** Browser origins allowed by CORS (CORS_ORIGINS); none by default. */
  corsOrigins?: string[];
  /** How long a request may take before it is answered 503 (and its write, if any, rolled back). */
  requestTimeoutMs?: number;
}

export interface AppEnv {
  Variables: {
    requestId: string;
    /** The request's logger: every line carries its requestId and, when given, its W3C trace. */
    log: Logger;
    deps: AppDeps;
    validators: Validators;
    /** The parsed JSON body, set by the json-body middleware. */
    body: unknown;
    /** The token the request was made with, set by requireToken. */
    token: TokenInfo;
    /** The account a write was about, for its audit row. */
    auditUserId: string | undefined;
    /** Set when the handler wrote the audit row itself, in the transaction of the write. */
    audited: boolean;
    /** The request's deadline; writes call its commit() before they commit. */
    deadline: Deadline;
    /** The canonical body of the request, for the idempotency fingerprint. */
    rawBody: string;
  };
}

export type App = Hono<AppEnv>;
