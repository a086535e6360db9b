// RFC 9457 problem+json: how the domain's errors (../errors.ts) leave the service over HTTP.
import type { components } from '@user-accounts/client';
import type { Context } from 'hono';
import type { Logger } from 'pino';
import {
  ApiError,
  describeError,
  type ErrorCode,
  isDatabaseUnavailable,
  serviceUnavailable,
  writeConflict,
} from '../errors.ts';
import { isWriteCollision } from '../kernel/unit-of-work.ts';
import type { Answer, OpContext } from './context.ts';

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
  user_verification_required: 'User verification required',
  factors_not_configured: 'Second factors not configured',
  no_phone: 'No phone',
  breached: 'Breached password',
  breach_check_unavailable: 'Breach check unavailable',
  conflict: 'Conflict',
  invalid_session: 'Invalid session',
  session_not_found: 'Session not found',
  identity_taken: 'Identity taken',
  identity_not_found: 'Identity not found',
  identity_limit_reached: 'Identity limit reached',
  last_sign_in_method: 'Last sign-in method',
  password_reset_required: 'Password reset required',
  org_not_found: 'Organization not found',
  member_not_found: 'Member not found',
  invitation_not_found: 'Invitation not found',
  slug_taken: 'Slug taken',
  already_member: 'Already a member',
  org_limit_reached: 'Organization limit reached',
  too_many_invitations: 'Too many invitations',
  role_in_use: 'Role in use',
  email_mismatch: 'Email mismatch',
  email_unverified: 'Email unverified',
  unknown_example: 'Unknown example',
};

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
  // One shape per code in the spec (Problem is a union): a code's own members (second_factor_required's
  // ticket and factors) come from whoever threw it, untyped here; the tests' response checks hold them to the spec.
  return {
    type: `https://user-accounts.dev/problems/${error.code}`,
    title: TITLES[error.code],
    status: error.status,
    detail: error.message,
    code: error.code,
    requestId,
    ...(errors && errors.length > 0 ? { errors } : {}),
    ...error.members,
  } as Problem;
}

export function renderProblem(c: Context, error: ApiError): Response {
  const requestId = (c.get('requestId') as string | undefined) ?? '';
  return c.body(JSON.stringify(problemBody(error, requestId)), error.status, {
    ...error.headers,
    'Content-Type': 'application/problem+json',
  });
}

/** An operation's problem answer (http/pipeline.ts), as renderProblem makes Hono's. */
export function problemAnswer(c: OpContext, error: ApiError): Answer {
  return c.body(JSON.stringify(problemBody(error, c.get('requestId') ?? '')), error.status, {
    ...error.headers,
    'Content-Type': 'application/problem+json',
  });
}

/**
 * What the service answers for an error: an ApiError as it is; a write that collided with others
 * (the unit of work's retries did not get past it), 409; the database gone, 503; anything else,
 * 500 — each but the first logged on `log`.
 */
export function asApiError(error: Error, log: Pick<Logger, 'warn' | 'error'>): ApiError {
  if (error instanceof ApiError) return error;
  // A deadlock or serialization failure the unit of work's retries did not get past (or one in
  // a write outside it): the transaction was rolled back, so a 409 the client may retry.
  if (isWriteCollision(error)) {
    log.warn({ err: describeError(error) }, 'write collided with concurrent writes');
    return writeConflict(error);
  }
  if (isDatabaseUnavailable(error)) {
    log.warn({ err: describeError(error) }, 'database unavailable');
    return serviceUnavailable('The database is unavailable; try again shortly.');
  }
  log.error({ err: describeError(error) }, 'unhandled error');
  return new ApiError(500, 'internal_error', 'An unexpected error occurred. Quote the requestId when reporting it.');
}

/**
 * The problem `code` of an error answer: the ApiError's when one was rendered, else the answer's
 * body's (a 429 the rate limit answered itself, a replay).
 */
export function answerCode(c: OpContext, answer: Answer): string | undefined {
  if (answer.status < 400) return undefined;
  if (c.error instanceof ApiError) return c.error.code;
  const text = answer.text();
  if (answer.headers.get('content-type') !== 'application/problem+json' || text === undefined) return undefined;
  try {
    return (JSON.parse(text) as { code?: string }).code;
  } catch {
    return undefined;
  }
}

/**
 * The problem `code` of an error answer of Hono's (a path outside the table): the ApiError's when
 * one was thrown, else the rendered body's.
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
