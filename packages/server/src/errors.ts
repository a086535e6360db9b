// The service's errors, as the domain throws them (issue 42, point 3): a closed set of codes from
// the spec, each with its HTTP status and the words for the caller. Any floor may throw them: the
// domain, the CLI, a background job; `http/errors.ts` renders them as RFC 9457 problem+json, the
// CLI and the admin socket print them. Also what tells an outage from a bug (isDatabaseUnavailable),
// a database error's SQLSTATE, and an error described safely for a log.
import type { components } from '@user-accounts/client';
// A type only (no runtime import): the statuses a response with a body may have.
import type { ContentfulStatusCode } from 'hono/utils/http-status';

export type ErrorCode = components['schemas']['ErrorCode'];
export type FieldError = components['schemas']['FieldError'];

/** An error of the service, with its code and HTTP status: throw it from anywhere; http/ renders it as problem+json. */
export class ApiError extends Error {
  readonly status: ContentfulStatusCode;
  readonly code: ErrorCode;
  readonly errors: FieldError[] | undefined;
  readonly headers: Record<string, string>;
  /** Problem members of this code beyond the standard ones (second_factor_required's ticket and factors). */
  readonly members: Record<string, unknown> | undefined;

  constructor(
    status: ContentfulStatusCode,
    code: ErrorCode,
    detail: string,
    options: {
      errors?: FieldError[];
      headers?: Record<string, string>;
      cause?: unknown;
      members?: Record<string, unknown>;
    } = {},
  ) {
    super(detail, { cause: options.cause });
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
    this.errors = options.errors;
    this.headers = options.headers ?? {};
    this.members = options.members;
  }
}

export const userNotFound = () => new ApiError(404, 'user_not_found', 'No account matches the given _userId or email.');

/**
 * A write the database rolled back for colliding with concurrent writes, still after the unit of
 * work ran it again (kernel/unit-of-work.ts): nothing changed, and a retry may well pass.
 */
export const writeConflict = (cause?: unknown) =>
  new ApiError(
    409,
    'conflict',
    'The write collided with concurrent writes of the same accounts, also when run again; nothing was changed. Retry the request.',
    { headers: { 'Retry-After': '1' }, cause },
  );

/**
 * A write whose statement waited on another write's lock past the connection's lock_timeout
 * (db/client.ts): rolled back whole, not run again (it would queue on the same lock).
 */
export const lockWaitConflict = (cause?: unknown) =>
  new ApiError(
    409,
    'conflict',
    'The write waited too long for concurrent writes of the same data to finish; nothing was changed. Retry the request.',
    { headers: { 'Retry-After': '1' }, cause },
  );

export const serviceUnavailable = (detail: string, cause?: unknown) =>
  new ApiError(503, 'service_unavailable', detail, { headers: { 'Retry-After': '1' }, cause });

// SQLSTATE classes and socket errors that mean "the database is not there right now", not a bug.
const UNAVAILABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'ENOTFOUND',
  'CONNECT_TIMEOUT',
  'CONNECTION_CLOSED',
  'CONNECTION_ENDED',
  'CONNECTION_DESTROYED',
  '57P01', // admin_shutdown
  '57P02', // crash_shutdown
  '57P03', // cannot_connect_now
  '57P04', // database_dropped
  '3D000', // invalid_catalog_name: the database was dropped or renamed under us
  '53300', // too_many_connections
  '57014', // query_canceled (statement_timeout)
  // lock_not_available outside a write (a read behind a migration's lock, a background job): the
  // lock_timeout of db/client.ts; a write's own is its 409 (kernel/unit-of-work.ts).
  '55P03',
  // A standby during a failover (a connection made before the promotion, or a URL without
  // target_session_attrs=read-write): the write is refused, nothing was done.
  '25006', // read_only_sql_transaction
  // postgres.js 3.4.9 raises this at a transaction's BEGIN when the connection it had reserved
  // failed under it (seen only while PostgreSQL stops, in the fault tests): the transaction ran
  // none of its statements, so it is an outage, not a bug of ours.
  'UNSAFE_TRANSACTION',
]);

type ErrorLike = { name?: string; code?: unknown; message?: string; cause?: unknown };

/** The error and its causes (drizzle wraps the driver's error), at most five deep. */
function causeChain(error: unknown): ErrorLike[] {
  const chain: ErrorLike[] = [];
  for (let e = error as ErrorLike | undefined; e && chain.length < 5; e = e.cause as ErrorLike | undefined) {
    chain.push(e);
  }
  return chain;
}

const codes = (error: unknown) =>
  causeChain(error)
    .map((e) => e.code)
    .filter((c): c is string => typeof c === 'string');

export function isDatabaseUnavailable(error: unknown): boolean {
  return codes(error).some((code) => UNAVAILABLE_CODES.has(code) || code.startsWith('08'));
}

/** The SQLSTATE of a database error, looking through drizzle's wrapper. */
export function sqlState(error: unknown): string | undefined {
  // Five digits or capitals; no SQLSTATE class starts with E, which tells them from EPIPE and the like.
  return codes(error).find((code) => /^[0-9A-DF-Z][0-9A-Z]{4}$/.test(code));
}

/**
 * An error, safe to log: drizzle's wrapper puts the query parameters (a password hash, an email)
 * in its message, so only the causes' names, codes and messages are kept, with the stack frames.
 */
export function describeError(error: unknown): Record<string, unknown> {
  const chain = causeChain(error).map((e) => ({
    name: e.name,
    code: e.code,
    message: String(e.message ?? e).split('\nparams:')[0],
  }));
  const frames = String((error as Error)?.stack ?? '')
    .split('\n')
    .filter((line) => line.startsWith('    at '))
    .join('\n');
  return { ...chain[0], stack: frames, causes: chain.slice(1) };
}
