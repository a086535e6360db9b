import type { Context } from 'hono';
import { type Logger, pino } from 'pino';
import type { TokenInfo } from '../../auth/tokens.ts';
import type { AppEnv } from '../context.ts';
import { problemCode } from '../errors.ts';
import type { RequestFields } from './request-id.ts';

/** What a balancer or orchestrator asks every replica every few seconds. */
const HEALTH_ROUTES = new Set(['/healthz', '/readyz']);

/**
 * One log line per request, with what an operator needs to find the caller (the token's id and
 * site, as in the audit trail) and why it failed (the problem `code`). Never the body, the query,
 * a header value or the token's digest: they may hold secrets, or stand in for one. Written by the
 * base logger with the request's fields first, as its child would write them (the front step,
 * front.ts, calls it once the answer is made; `started` is performance.now() at its start).
 */
export async function logAccess(
  c: Context<AppEnv>,
  started: number,
  fields: RequestFields,
  route = c.req.routePath,
  logger: Logger = c.get('deps').logger,
): Promise<void> {
  const durationMs = Math.round((performance.now() - started) * 100) / 100;
  const { status } = c.res;
  // A health check that succeeds is noise at info (two a second per replica behind HAProxy);
  // one that fails is news.
  const level = status < 400 && HEALTH_ROUTES.has(route) ? 'debug' : 'info';
  if (!logger.isLevelEnabled(level)) return;
  // Set by the token check, which runs after the front step: absent when the request never got that far.
  const token = c.get('token') as TokenInfo | undefined;
  const code = status >= 400 ? await problemCode(c) : undefined;
  writeAccessLine(logger, level, fields, c.req.method, route, status, durationMs, token, code);
}

/** What an access line says: the request's fields, then these, in this order. */
export type AccessLineArgs = [
  fields: RequestFields,
  method: string,
  route: string,
  status: number,
  durationMs: number,
  token: TokenInfo | undefined,
  code: string | undefined,
];

/** The access line's object, its fields in the order the line has them. */
const accessFields = (...[fields, method, route, status, durationMs, token, code]: AccessLineArgs) => ({
  ...fields,
  method,
  route,
  status,
  durationMs,
  ...(token === undefined ? {} : { tokenId: token.id, site: token.site }),
  ...(code === undefined ? {} : { code }),
});

/** The access line itself (logAccess's, and the pipeline's in pipeline.ts). */
export function writeAccessLine(logger: Logger, level: 'info' | 'debug', ...args: AccessLineArgs): void {
  logger[level](accessFields(...args), 'request');
}

/**
 * The base logger without redaction, for the access line alone: its fields are fixed above and none
 * of them is a redacted path (REDACT in assemble.ts), so the line is the same, at a quarter less
 * of its cost (pino's redaction walks every line's fields; issue 33).
 */
export const accessLogger = (base: Logger): Logger => base.child({}, { redact: { paths: [] } });

/** The access line's writer: writeAccessLine's arguments, at info. */
export type AccessLineWriter = (...args: AccessLineArgs) => void;

type PinoInternals = Record<symbol, unknown> & Logger;

/**
 * The access line at info built as one template and written to `logger`'s stream (issue 47,
 * point 2: an operation's line without pino's generic object walk), or undefined when
 * this logger would not write the same bytes: at start it builds two sample lines both ways and
 * keeps the template only if pino's own serialisation (its formatters, time, bindings) agrees.
 */
export function directAccessLine(logger: Logger): AccessLineWriter | undefined {
  const internals = logger as PinoInternals;
  const { streamSym, asJsonSym, chindingsSym, mixinSym, hooksSym, timeSym } = pino.symbols;
  const now = internals[timeSym] as (() => string) | undefined;
  const stream = internals[streamSym] as { write?: (line: string) => unknown } | undefined;
  const asJson = internals[asJsonSym] as ((obj: object, msg: string, num: number, time: string) => string) | undefined;
  const bindings = internals[chindingsSym];
  const hooks = internals[hooksSym] as { streamWrite?: unknown } | undefined;
  if (
    typeof stream?.write !== 'function' ||
    typeof asJson !== 'function' ||
    typeof bindings !== 'string' ||
    typeof now !== 'function'
  ) {
    return undefined;
  }
  if (internals[mixinSym] || hooks?.streamWrite) return undefined;
  const line = (time: string, ...[fields, method, route, status, durationMs, token, code]: AccessLineArgs) =>
    `{"level":"info"${time}${bindings},"requestId":${JSON.stringify(fields.requestId)}${
      fields.traceId === undefined ? '' : `,"traceId":${JSON.stringify(fields.traceId)}`
    }${fields.parentId === undefined ? '' : `,"parentId":${JSON.stringify(fields.parentId)}`},"method":${JSON.stringify(
      method,
    )},"route":${JSON.stringify(route)},"status":${status},"durationMs":${durationMs}${
      token === undefined ? '' : `,"tokenId":${JSON.stringify(token.id)},"site":${JSON.stringify(token.site)}`
    }${code === undefined ? '' : `,"code":${JSON.stringify(code)}`},"msg":"request"}\n`;
  const sampleTime = ',"time":"2026-01-01T00:00:00.000Z"';
  const samples: Parameters<AccessLineWriter>[] = [
    [{ requestId: 'a-1' }, 'GET', '/api/1/user/get', 200, 1.25, { id: 't"1', site: 's\\é', scopes: [] }, undefined],
    [{ requestId: 'b', traceId: 'c', parentId: 'd' }, 'POST', '/api/1/x', 401, 0, undefined, 'unauthorized'],
  ];
  for (const sample of samples) {
    if (asJson.call(logger, accessFields(...sample), 'request', 30, sampleTime) !== line(sampleTime, ...sample)) {
      return undefined;
    }
  }
  const write = stream.write.bind(stream);
  const time = now.bind(logger);
  // The logger's own time (its `timestamp` option), as pino's line has it.
  return (...args) => void write(line(time(), ...args));
}
