import type { MiddlewareHandler } from 'hono';
import type { Logger } from 'pino';
import { uuidv7 } from '../../kernel/ids.ts';
import type { AppEnv } from '../context.ts';

const SANE = /^[A-Za-z0-9._:-]{1,128}$/;
// W3C Trace Context: version-traceid-parentid-flags, lower-case hex; all-zero ids are invalid.
const TRACEPARENT = /^([0-9a-f]{2})-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})(-.*)?$/;

/** The trace and parent span of a valid `traceparent`, or nothing (an invalid one is ignored, as the spec says). */
export function parseTraceparent(header: string | undefined): { traceId: string; parentId: string } | undefined {
  const m = header === undefined ? null : TRACEPARENT.exec(header.trim());
  if (m === null || m[1] === 'ff' || (m[1] === '00' && m[5] !== undefined)) return undefined;
  if (/^0+$/.test(m[2]!) || /^0+$/.test(m[3]!)) return undefined;
  return { traceId: m[2]!, parentId: m[3]! };
}

/** The caller's X-Request-Id when it is sane (no header injection, bounded), else a new one. */
export function requestIdFrom(given: string | undefined): string {
  return given !== undefined && SANE.test(given) ? given : uuidv7();
}

/**
 * Keeps the caller's X-Request-Id when it is sane, else makes one, and gives the request a logger
 * that puts it, and the caller's W3C trace, on every line. Not hono/request-id: it refuses the `.`
 * and `:` the spec allows (its rule is [\w=-], up to 255), and it sets no logger.
 */
export function requestId(): MiddlewareHandler<AppEnv> {
  return async function requestIdMiddleware(c, next) {
    const id = requestIdFrom(c.req.header('x-request-id'));
    c.set('requestId', id);
    c.set('log', requestLog(c.get('deps').logger, { requestId: id, ...parseTraceparent(c.req.header('traceparent')) }));
    await next();
    c.res.headers.set('X-Request-Id', id);
    c.res.headers.set('X-Content-Type-Options', 'nosniff');
  };
}

const LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal'] as const;
type Level = (typeof LEVELS)[number];
/** One line at a level: an object of fields and a message, or a message alone (pino's calls). */
type LogLine = (fieldsOrMessage: unknown, message?: string) => void;
/** What a request logs through: the levels of a pino logger, each line carrying the request's fields. */
export type RequestLog = Record<Level, LogLine>;

/** The fields every line of a request carries, in this order: its id, and the caller's W3C trace. */
export type RequestFields = { requestId: string; traceId?: string; parentId?: string };

/**
 * A request's logger that makes its pino child only when the request logs a line of its own: most
 * never do (the access-log line is written by the base logger with the same fields, see front.ts),
 * and a child per request was a measurable part of a read's cost (issue 33).
 */
class LazyRequestLog {
  #child: Logger | undefined;
  readonly #base: Logger;
  readonly #fields: RequestFields;
  constructor(base: Logger, fields: RequestFields) {
    this.#base = base;
    this.#fields = fields;
  }
  child(): Logger {
    this.#child ??= this.#base.child(this.#fields);
    return this.#child;
  }
}
for (const level of LEVELS) {
  Object.defineProperty(LazyRequestLog.prototype, level, {
    value(this: LazyRequestLog, ...args: unknown[]) {
      const log = this.child();
      (log[level] as (...a: unknown[]) => void).apply(log, args);
    },
  });
}

/** The request's logger: `fields` on every line, the pino child made on the first line. */
export function requestLog(base: Logger, fields: RequestFields): RequestLog {
  return new LazyRequestLog(base, fields) as unknown as RequestLog;
}
