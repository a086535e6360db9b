// RFC 9457 problem+json: how the domain's errors (../errors.ts) leave the service over HTTP.
import type { components } from '@user-accounts/client';
import type { Context } from 'hono';
import type { Logger } from 'pino';
import {
  ApiError,
  describeError,
  ERRORS,
  internalError,
  isDatabaseUnavailable,
  serviceUnavailable,
  writeConflict,
} from '../errors.ts';
import { isWriteCollision } from '../kernel/unit-of-work.ts';
import type { Answer, OpContext } from './context.ts';

export type Problem = components['schemas']['Problem'];

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
    title: ERRORS[error.code].title,
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
  return internalError();
}

/**
 * The problem `code` of an error answer: the ApiError's when one was rendered, else the body's
 * (a 429 the rate limit answered itself, a replay, a 500 of Hono's).
 */
function codeOf(error: unknown, status: number, contentType: string | null, body: () => string | undefined) {
  if (status < 400) return undefined;
  if (error instanceof ApiError) return error.code;
  const text = contentType === 'application/problem+json' ? body() : undefined;
  if (text === undefined) return undefined;
  try {
    return (JSON.parse(text) as { code?: string }).code;
  } catch {
    return undefined;
  }
}

/** The problem `code` of an operation's answer (the pipeline's access line and audit step). */
export const answerCode = (c: OpContext, answer: Answer): string | undefined =>
  codeOf(c.error, answer.status, answer.headers.get('content-type'), () => answer.text());

/** The same of an answer of Hono's, for a path outside the table (the front step's access line). */
export async function problemCode(c: Context): Promise<string | undefined> {
  const text = c.res.headers.get('content-type') === 'application/problem+json' ? await c.res.clone().text() : '';
  return codeOf(c.error, c.res.status, c.res.headers.get('content-type'), () => text);
}
