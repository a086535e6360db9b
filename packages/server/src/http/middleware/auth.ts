import type { IncomingMessage } from 'node:http';
import type { MiddlewareHandler } from 'hono';
import { clientAddress, TRUST_NOBODY } from '../../auth/client-address.ts';
import type { AuthAttempt, AuthFailureLimit } from '../../auth/failed-authentications.ts';
import type { Scope, TokenInfo } from '../../auth/tokens.ts';
import { ApiError, rateLimited, unauthorized } from '../../errors.ts';
import type { AppEnv, StepContext } from '../context.ts';

/** The Bearer challenge (RFC 6750 §3): with `error="invalid_token"` when a token was sent and refused. */
export const bearerChallenge = (tokenSent: boolean): string =>
  tokenSent ? 'Bearer realm="user-accounts", error="invalid_token"' : 'Bearer realm="user-accounts"';

/**
 * Whether the request carries a credential to judge: not when Authorization is absent, a bare
 * `Bearer`, or another scheme's (`Basic …`: our tokens have no spaces). RFC 6750 §3.1: no error
 * code then; for any other value (unknown, revoked, expired, malformed) `invalid_token`.
 */
export function credentialSent(header: string | undefined): boolean {
  const value = header?.trim() ?? '';
  if (value === '' || /^bearer$/i.test(value)) return false;
  return /^bearer\s/i.test(value) || !/\s/.test(value);
}

const tooManyFailures = (limit: AuthFailureLimit, wait: number) =>
  rateLimited(`Too many failed authentications from this address; try again in ${wait} s.`, wait, {
    ...limit,
    name: 'failed_auth',
  });

/**
 * The client's address: the connection's peer, or what a trusted proxy (TRUSTED_PROXIES) says in
 * X-Forwarded-For; never a forwarded header from anyone else, which any client can write.
 */
function requestAddress(c: StepContext): string | undefined {
  // Node's request, as @hono/node-server's bindings and the pipeline's both carry it.
  const incoming = (c.env as { incoming?: IncomingMessage } | undefined)?.incoming;
  if (incoming === undefined) return undefined; // a fetch Request made in-process (tests)
  const peer = incoming.socket.remoteAddress;
  return clientAddress(peer, c.req.header('x-forwarded-for'), c.get('deps').trustedProxies ?? TRUST_NOBODY);
}

/**
 * `Authorization: <token>` (as in the original interface) or `Authorization: Bearer <token>`.
 * An address over its limit of failed authentications is refused before its token is looked up.
 */
export function requireToken(): MiddlewareHandler<AppEnv> {
  return async function requireTokenMiddleware(c, next) {
    await authenticate(c);
    await next();
  };
}

/**
 * requireToken() as a function (a read's route runs it without a middleware frame): sets `token`,
 * or throws 401 or 429. Synchronous (undefined) when the token is known without the database (a
 * configured one, or one cached: see TokenVerifier.verifyKnown), so that the pipeline
 * awaits nothing then (issue 47); else a promise of the same outcome.
 */
export function authenticate(c: StepContext): Promise<void> | undefined {
  const header = c.req.header('authorization')?.trim() ?? '';
  const token = header.replace(/^bearer\s+/i, '');
  const { tokens, authFailures } = c.get('deps');
  const address = authFailures && requestAddress(c);
  const attempt = authFailures?.attempt(address, token);
  if (authFailures && attempt && attempt.retryAfter > 0) throw tooManyFailures(authFailures.limit, attempt.retryAfter);
  // Missing, malformed, unknown, expired, revoked: one answer, so a caller learns nothing more.
  const sent = token !== '' && token.length <= 512;
  const known = sent ? tokens.verifyKnown?.(token) : undefined;
  if (!sent || known !== undefined) {
    settle(c, header, known, attempt, address);
    return undefined;
  }
  return tokens.verify(token).then(
    (info) => settle(c, header, info, attempt, address),
    (error: unknown) => {
      attempt?.done('abandoned');
      throw error;
    },
  );
}

/** The token check's outcome: `token` set, or the 401 (the failure counted against the address). */
function settle(
  c: StepContext,
  header: string,
  info: TokenInfo | undefined,
  attempt: AuthAttempt | undefined,
  address: string | undefined,
): void {
  if (info === undefined) {
    if (attempt?.done('failed')) {
      c.get('log').warn(
        { address, limit: c.get('deps').authFailures?.limit },
        'failed authentications over the limit: refusing this address until its window ends',
      );
    }
    throw unauthorized(bearerChallenge(credentialSent(header)));
  }
  attempt?.done('accepted', info.digest);
  c.set('token', info);
}

/**
 * 403 for a valid token without the scope (or without any of the scopes, where an operation takes
 * one of several: org/member/check takes read or verify); runs after the rate limit, so refusals
 * count too. With `also` (an operation some of whose bodies another scope admits: see
 * Operation.alsoScope), a token with either passes here, and requireScopeForBody decides once the
 * body is read.
 */
export function requireScope(scope: Scope | readonly Scope[], also?: Scope): MiddlewareHandler<AppEnv> {
  return async function requireScopeMiddleware(c, next) {
    if (also === undefined || !c.get('token').scopes.includes(also)) checkScope(c, scope);
    await next();
  };
}

/**
 * After the body is read: a token without `scope` passes only for a body `also` admits (a
 * `login` ticket, for a token with the verify scope alone); else the 403 of `scope`.
 */
export function requireScopeForBody(
  scope: Scope | readonly Scope[],
  also: { scope: Scope; admits(body: unknown): boolean },
): MiddlewareHandler<AppEnv> {
  return async function requireScopeForBodyMiddleware(c, next) {
    checkScopeForBody(c, scope, also);
    await next();
  };
}

/** requireScopeForBody() as a function: the 403 of `scope` unless the token holds it or `also` admits the body. */
export function checkScopeForBody(
  c: StepContext,
  scope: Scope | readonly Scope[],
  also: { scope: Scope; admits(body: unknown): boolean },
): void {
  if (!holdsAny(c, scope) && !also.admits(c.get('body'))) checkScope(c, scope);
}

const holdsAny = (c: StepContext, scope: Scope | readonly Scope[]) =>
  typeof scope === 'string'
    ? c.get('token').scopes.includes(scope)
    : scope.some((s) => c.get('token').scopes.includes(s));

/** requireScope() as a function: throws 403 when the request's token lacks `scope` (every one of them). */
export function checkScope(c: StepContext, scope: Scope | readonly Scope[]): void {
  const wanted: readonly Scope[] = typeof scope === 'string' ? [scope] : scope;
  const held = c.get('token').scopes;
  if (!wanted.some((s) => held.includes(s))) {
    throw new ApiError('forbidden', `This token does not have the ${wanted.join(' or ')} scope.`);
  }
}
