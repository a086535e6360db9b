import type { Context } from 'hono';
import type { Logger } from 'pino';
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

/** The access line itself (logAccess's, and the compiled operations' in compiled.ts): the fields in this order. */
export function writeAccessLine(
  logger: Logger,
  level: 'info' | 'debug',
  fields: RequestFields,
  method: string,
  route: string,
  status: number,
  durationMs: number,
  token: TokenInfo | undefined,
  code: string | undefined,
): void {
  logger[level](
    {
      ...fields,
      method,
      route,
      status,
      durationMs,
      ...(token === undefined ? {} : { tokenId: token.id, site: token.site }),
      ...(code === undefined ? {} : { code }),
    },
    'request',
  );
}

/**
 * The base logger without redaction, for the access line alone: its fields are fixed above and none
 * of them is a redacted path (REDACT in assemble.ts), so the line is the same, at a quarter less
 * of its cost (pino's redaction walks every line's fields; issue 33).
 */
export const accessLogger = (base: Logger): Logger => base.child({}, { redact: { paths: [] } });
