// The service's errors, as the domain throws them (issue 42, point 3; issue 58, point 3): a closed
// set of codes from the spec, each with its HTTP status and title in one table (ERRORS), and a
// factory for each code built in more than one place. Any floor may throw them: the
// domain, the CLI, a background job; `http/errors.ts` renders them as RFC 9457 problem+json, the
// CLI and the admin socket print them. Also what tells an outage from a bug (isDatabaseUnavailable),
// a database error's SQLSTATE, and an error described safely for a log.
import type { components } from '@user-accounts/client';
// A type only (no runtime import): the statuses a response with a body may have.
import type { ContentfulStatusCode } from 'hono/utils/http-status';

export type ErrorCode = components['schemas']['ErrorCode'];
export type FieldError = components['schemas']['FieldError'];

/**
 * Every code's HTTP status and default title (the problem's `title`): the one place a status is
 * written. Each literal, so that `ERRORS.user_not_found.status` is `404`; the spec's responses
 * list the same pairs (errors.test.ts holds them together).
 */
export const ERRORS = {
  invalid_json: { status: 400, title: 'Invalid JSON' },
  invalid_request: { status: 400, title: 'Invalid request' },
  weak_password: { status: 400, title: 'Weak password' },
  // No longer answered (update changes email since November 2026); its status was 400.
  field_not_updatable: { status: 400, title: 'Field not updatable' },
  unauthorized: { status: 401, title: 'Unauthorized' },
  forbidden: { status: 403, title: 'Forbidden' },
  user_not_found: { status: 404, title: 'User not found' },
  factor_not_found: { status: 404, title: 'Factor not found' },
  webhook_not_found: { status: 404, title: 'Webhook not found' },
  invalid_code: { status: 422, title: 'Invalid code' },
  second_factor_required: { status: 403, title: 'Second factor required' },
  not_found: { status: 404, title: 'Not found' },
  method_not_allowed: { status: 405, title: 'Method not allowed' },
  email_taken: { status: 409, title: 'Email taken' },
  idempotency_key_in_use: { status: 409, title: 'Idempotency key in use' },
  precondition_failed: { status: 412, title: 'Precondition failed' },
  idempotency_key_reused: { status: 422, title: 'Idempotency key reused' },
  payload_too_large: { status: 413, title: 'Payload too large' },
  headers_too_large: { status: 431, title: 'Request headers too large' },
  unsupported_media_type: { status: 415, title: 'Unsupported media type' },
  rate_limited: { status: 429, title: 'Too many requests' },
  service_unavailable: { status: 503, title: 'Service unavailable' },
  internal_error: { status: 500, title: 'Internal error' },
  invalid_credentials: { status: 422, title: 'Invalid credentials' },
  account_disabled: { status: 403, title: 'Account disabled' },
  too_many_attempts: { status: 429, title: 'Too many attempts' },
  invalid_cursor: { status: 400, title: 'Invalid cursor' },
  // A row's error of import (in its 200), never a problem of its own: 400 were it one.
  invalid_password_hash: { status: 400, title: 'Invalid password hash' },
  events_expired: { status: 410, title: 'Events expired' },
  too_many_long_polls: { status: 429, title: 'Too many long-polls' },
  too_many_deliveries_pending: { status: 409, title: 'Too many deliveries pending' },
  account_limit_reached: { status: 403, title: 'Account limit reached' },
  invalid_metadata: { status: 400, title: 'Invalid metadata' },
  invalid_ticket: { status: 422, title: 'Invalid ticket' },
  passkeys_not_configured: { status: 409, title: 'Passkeys not configured' },
  user_verification_required: { status: 422, title: 'User verification required' },
  factors_not_configured: { status: 503, title: 'Second factors not configured' },
  no_phone: { status: 409, title: 'No phone' },
  breached: { status: 400, title: 'Breached password' },
  breach_check_unavailable: { status: 503, title: 'Breach check unavailable' },
  conflict: { status: 409, title: 'Conflict' },
  invalid_session: { status: 422, title: 'Invalid session' },
  session_not_found: { status: 404, title: 'Session not found' },
  identity_taken: { status: 409, title: 'Identity taken' },
  identity_not_found: { status: 404, title: 'Identity not found' },
  identity_limit_reached: { status: 409, title: 'Identity limit reached' },
  last_sign_in_method: { status: 409, title: 'Last sign-in method' },
  password_reset_required: { status: 403, title: 'Password reset required' },
  org_not_found: { status: 404, title: 'Organization not found' },
  member_not_found: { status: 404, title: 'Member not found' },
  invitation_not_found: { status: 404, title: 'Invitation not found' },
  slug_taken: { status: 409, title: 'Slug taken' },
  already_member: { status: 409, title: 'Already a member' },
  org_limit_reached: { status: 409, title: 'Organization limit reached' },
  too_many_invitations: { status: 409, title: 'Too many invitations' },
  role_in_use: { status: 409, title: 'Role in use' },
  email_mismatch: { status: 409, title: 'Email mismatch' },
  email_unverified: { status: 409, title: 'Email unverified' },
  invalid_state: { status: 422, title: 'Invalid state' },
  provider_error: { status: 422, title: 'Provider error' },
  identity_unlinked: { status: 409, title: 'Identity unlinked' },
  provider_unavailable: { status: 502, title: 'Provider unavailable' },
  provider_timeout: { status: 504, title: 'Provider timeout' },
  provider_not_found: { status: 404, title: 'Provider not found' },
  no_transport: { status: 409, title: 'No transport' },
  sms_limit_reached: { status: 429, title: 'SMS limit reached' },
  message_limit_reached: { status: 429, title: 'Message limit reached' },
  domain_not_found: { status: 404, title: 'Domain not found' },
  domain_taken: { status: 409, title: 'Domain taken' },
  domain_not_verified: { status: 422, title: 'Domain not verified' },
  connection_not_found: { status: 404, title: 'Connection not found' },
  idp_metadata_invalid: { status: 422, title: 'IdP metadata invalid' },
  sso_response_invalid: { status: 422, title: 'SSO response invalid' },
  sso_required: { status: 403, title: 'SSO required' },
  // Only the mock's (packages/mock/src/prefer.ts): a Prefer naming an answer the operation lacks.
  unknown_example: { status: 400, title: 'Unknown example' },
} as const satisfies Record<ErrorCode, { status: ContentfulStatusCode; title: string }>;

/** The statuses an ApiError may have: those of the table. */
export type ErrorStatus = (typeof ERRORS)[ErrorCode]['status'];

/**
 * An error of the service, with its code (its status and title come from ERRORS): throw it from
 * anywhere; http/ renders it as problem+json. A code built in more than one place has its
 * factory below; use it rather than writing the code's text again.
 */
export class ApiError extends Error {
  readonly status: ErrorStatus;
  readonly code: ErrorCode;
  readonly errors: FieldError[] | undefined;
  readonly headers: Record<string, string>;
  /** Problem members of this code beyond the standard ones (second_factor_required's ticket and factors). */
  readonly members: Record<string, unknown> | undefined;

  constructor(
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
    this.status = ERRORS[code].status;
    this.code = code;
    this.errors = options.errors;
    this.headers = options.headers ?? {};
    this.members = options.members;
  }
}

// The factories: one for each code built in more than one place. A code has one text, unless the
// text tells the caller something to act on (then the factory takes it, or the facts it names).

export const userNotFound = () => new ApiError('user_not_found', 'No account matches the given _userId or email.');

/** A disabled account, whichever way in it tried (verify, a passkey, an identity, a login ticket, a session). */
export const accountDisabled = () => new ApiError('account_disabled', 'This account is disabled.');

/** What a sign-in checked, for the texts of its refusals. */
const WRONG_CREDENTIALS = {
  password: 'The email or id and password do not match an account.',
  passkey: "The passkey's answer is not accepted.",
  identity: 'No account of this site has this identity.',
} as const;

/** Every miss of a sign-in by `means`, whatever it was: one answer for each means. */
export const invalidCredentials = (means: keyof typeof WRONG_CREDENTIALS) =>
  new ApiError('invalid_credentials', WRONG_CREDENTIALS[means]);

/**
 * The right first step of an account with a second factor: never a 200, so that a site that
 * forgets the second step fails closed. `ticket` goes to factor/verify; `factors` says which kinds it takes.
 */
export const secondFactorRequired = (
  step: 'password' | 'login ticket' | 'identity',
  ticket: string,
  factors: string[],
) =>
  new ApiError('second_factor_required', `The ${step} is right; this account also needs its second factor.`, {
    members: { ticket, factors },
  });

const UNUSABLE_TICKETS = {
  // A ticket the site asked for (verify_email, reset_password, login, an invitation's): it asks again.
  issued: 'This ticket cannot be used; ask for a new one.',
  // The ticket of verify's 403 for factor/verify: only a new sign-in gives another.
  'second factor': 'The ticket is not one of ours, or it is used or expired: sign in again.',
} as const;

/** Every miss of a ticket, whatever it was (unknown, used, expired, another site's): one answer for each kind. */
export const invalidTicket = (kind: keyof typeof UNUSABLE_TICKETS = 'issued') =>
  new ApiError('invalid_ticket', UNUSABLE_TICKETS[kind]);

/** A bound with the RateLimit fields of the draft (draft-ietf-httpapi-ratelimit-headers): its name, quota and window. */
export interface RateLimitPolicy {
  name: string;
  limit: number;
  windowSeconds: number;
}

/**
 * Retry-After, and the RateLimit fields of the one bound at fault when it is named: its reset is
 * the moment Retry-After names (the draft: the two should agree).
 */
const retryHeaders = (seconds: number, policy?: RateLimitPolicy): Record<string, string> =>
  policy === undefined
    ? { 'Retry-After': String(seconds) }
    : {
        'Retry-After': String(seconds),
        'RateLimit-Policy': `"${policy.name}";q=${policy.limit};w=${policy.windowSeconds}`,
        RateLimit: `"${policy.name}";r=0;t=${seconds}`,
      };

/** A 429 of a bound (a token's budgets, failed authentications, heavy reads, writes, refreshes): `detail` says which and when to come back. */
export const rateLimited = (detail: string, retryAfterSeconds: number, policy?: RateLimitPolicy) =>
  new ApiError('rate_limited', detail, { headers: retryHeaders(retryAfterSeconds, policy) });

/**
 * A lockout's 429 (verify's, the second factor's, an account's wrong codes). Its RateLimit fields
 * name that lock only, not the token's budgets, which are not exhausted and would tell a client to
 * come back before the lock ends.
 */
export const tooManyAttempts = (retryAfterSeconds: number, lock: RateLimitPolicy) =>
  new ApiError('too_many_attempts', `Too many failed attempts; try again in ${retryAfterSeconds} s.`, {
    headers: retryHeaders(retryAfterSeconds, lock),
  });

/** 401 with the challenge (WWW-Authenticate) of the token it wants; `detail` names that token. */
export const unauthorized = (
  challenge: string,
  detail = 'A valid API token is required in the Authorization header.',
) => new ApiError('unauthorized', detail, { headers: { 'WWW-Authenticate': challenge } });

/** A request that is not what the operation takes: `detail` (and `errors`) say what to fix. */
export const invalidRequest = (
  detail: string,
  errors?: FieldError[],
  options?: { headers?: Record<string, string>; cause?: unknown },
) => new ApiError('invalid_request', detail, { ...options, errors });

export const notFound = (path: string) => new ApiError('not_found', `There is nothing at ${path}.`);

export const internalError = () =>
  new ApiError('internal_error', 'An unexpected error occurred. Quote the requestId when reporting it.');

/** Events (of the feed, of a delivery) past the retention: `detail` says which, and where to start again. */
export const eventsExpired = (detail: string) => new ApiError('events_expired', detail);

/**
 * A write the database rolled back for colliding with concurrent writes, still after the unit of
 * work ran it again (kernel/unit-of-work.ts): nothing changed, and a retry may well pass.
 */
export const writeConflict = (cause?: unknown) =>
  new ApiError(
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
    'conflict',
    'The write waited too long for concurrent writes of the same data to finish; nothing was changed. Retry the request.',
    { headers: { 'Retry-After': '1' }, cause },
  );

export const serviceUnavailable = (detail: string, cause?: unknown) =>
  new ApiError('service_unavailable', detail, { headers: { 'Retry-After': '1' }, cause });

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
