import type { components } from '@user-accounts/client';
import type { Context } from 'hono';
import type { ContentfulStatusCode } from 'hono/utils/http-status';

export type ErrorCode = components['schemas']['ErrorCode'];
export type FieldError = components['schemas']['FieldError'];
export type Problem = components['schemas']['Problem'];

const TITLES: Record<ErrorCode, string> = {
  invalid_json: 'Invalid JSON',
  invalid_request: 'Invalid request',
  weak_password: 'Weak password',
  field_not_updatable: 'Field not updatable',
  unauthorized: 'Unauthorized',
  forbidden: 'Forbidden',
  user_not_found: 'User not found',
  factor_not_found: 'Factor not found',
  webhook_not_found: 'Webhook not found',
  invalid_code: 'Invalid code',
  second_factor_required: 'Second factor required',
  not_found: 'Not found',
  method_not_allowed: 'Method not allowed',
  email_taken: 'Email taken',
  idempotency_key_in_use: 'Idempotency key in use',
  precondition_failed: 'Precondition failed',
  idempotency_key_reused: 'Idempotency key reused',
  payload_too_large: 'Payload too large',
  headers_too_large: 'Request headers too large',
  unsupported_media_type: 'Unsupported media type',
  rate_limited: 'Too many requests',
  service_unavailable: 'Service unavailable',
  internal_error: 'Internal error',
  invalid_credentials: 'Invalid credentials',
  account_disabled: 'Account disabled',
  too_many_attempts: 'Too many attempts',
  invalid_cursor: 'Invalid cursor',
  invalid_password_hash: 'Invalid password hash',
  events_expired: 'Events expired',
  too_many_long_polls: 'Too many long-polls',
  too_many_deliveries_pending: 'Too many deliveries pending',
  account_limit_reached: 'Account limit reached',
  invalid_metadata: 'Invalid metadata',
  invalid_ticket: 'Invalid ticket',
  passkeys_not_configured: 'Passkeys not configured',
  factors_not_configured: 'Second factors not configured',
  no_phone: 'No phone',
  breached: 'Breached password',
  breach_check_unavailable: 'Breach check unavailable',
  unknown_example: 'Unknown example',
};

/** An error that leaves the service as a problem+json response; throw it from anywhere. */
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

export const serviceUnavailable = (detail: string, cause?: unknown) =>
  new ApiError(503, 'service_unavailable', detail, { headers: { 'Retry-After': '1' }, cause });

/** At most this many field errors in a problem: enough to fix a request, too few to amplify one. */
export const MAX_FIELD_ERRORS = 20;
/** A pointer names the caller's field, which may be an unknown one of any length. */
export const MAX_POINTER_LENGTH = 64;

/** `text` cut to `max` UTF-16 units, the last being `…`, without splitting a surrogate pair. */
export function clip(text: string, max: number): string {
  if (text.length <= max) return text;
  let end = max - 1;
  if (/[\uD800-\uDBFF]/.test(text.charAt(end - 1))) end--;
  return `${text.slice(0, end)}…`;
}

export function problemBody(error: ApiError, requestId: string): Problem {
  // The spec's bounds, however many fields were wrong and however long their names: a problem
  // never echoes unbounded request text (it may be kept under an Idempotency-Key, and logged).
  const errors = error.errors
    ?.slice(0, MAX_FIELD_ERRORS)
    .map((e) => ({ ...e, pointer: clip(e.pointer, MAX_POINTER_LENGTH) }));
  return {
    type: `https://user-accounts.dev/problems/${error.code}`,
    title: TITLES[error.code],
    status: error.status,
    detail: error.message,
    code: error.code,
    requestId,
    ...(errors && errors.length > 0 ? { errors } : {}),
    ...error.members,
  };
}

export function renderProblem(c: Context, error: ApiError): Response {
  const requestId = (c.get('requestId') as string | undefined) ?? '';
  return c.body(JSON.stringify(problemBody(error, requestId)), error.status, {
    ...error.headers,
    'Content-Type': 'application/problem+json',
  });
}

/**
 * The problem `code` of an error answer: the ApiError's when one was thrown, else the rendered
 * body's (a 429 the rate limit answered itself, the 500 of an unexpected error, a replay).
 */
export async function problemCode(c: Context): Promise<string | undefined> {
  if (c.error instanceof ApiError) return c.error.code;
  if (c.res.headers.get('content-type') !== 'application/problem+json') return undefined;
  try {
    return ((await c.res.clone().json()) as { code?: string }).code;
  } catch {
    return undefined;
  }
}

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
