import type { components } from '@user-accounts/client';
import type { NewPasswordDeps } from '../../accounts/new-password.ts';
import type { CodeGuard } from '../../accounts/tickets.ts';
import { canonicalAddress } from '../../auth/client-address.ts';
import { type BodySchema, fromQueryText, normalizeFields, toFieldErrors } from '../../contract/validation.ts';
import { invalidRequest } from '../../errors.ts';
import type { HookDeps } from '../../kernel/account-hooks.ts';
import { type DeploymentKeys, deploymentKeysOf } from '../../kernel/deployment-keys.ts';
import { inReachOf } from '../../kernel/in-reach.ts';
import type { WriteDeps } from '../../kernel/unit-of-work.ts';
import type { SessionDeps } from '../../sessions/issue.ts';
import type { SsoDeps } from '../../sso/deps.ts';
import type { OpContext, ParseContext } from '../context.ts';
import { consumeBudget } from '../middleware/rate-limit.ts';
import { writeDepsOf } from '../run-write.ts';

type Schemas = components['schemas'];

/** The parsed body, normalized as the spec says, then checked against the operation's schema. */
export function validBody<K extends BodySchema>(c: ParseContext, schema: K): Schemas[K] {
  const body = c.get('body');
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw invalidRequest('The request body must be a JSON object.', [
      { pointer: '', code: 'invalid_type', message: 'must be an object' },
    ]);
  }
  const fields = body as Record<string, unknown>;
  normalizeFields(fields);
  const validate = c.get('validators').body[schema]!;
  if (!validate(fields)) {
    throw invalidRequest('The request body is not valid.', toFieldErrors(validate.errors));
  }
  return fields as Schemas[K];
}

/**
 * The query, checked against the operation's parameters in the spec: each parameter once, none
 * unknown, normalized as bodies are.
 */
export function validQuery<T extends object>(c: ParseContext, path: string): T {
  // URLSearchParams keeps every parameter, even one with an empty name, which must be refused too.
  // The transport's query text when it has it at hand (the pipeline's do), else the URL's.
  const { search } = c.req;
  const text = queryOf(search ?? c.req.url);
  const query: Record<string, string | number | boolean> = {};
  for (const [name, value] of new URLSearchParams(text)) {
    if (Object.hasOwn(query, name)) throw repeatedParameters(text);
    // A parameter named __proto__ is just a name.
    if (name === '__proto__') Object.defineProperty(query, name, { value, enumerable: true, writable: true });
    else query[name] = value;
  }
  normalizeFields(query);
  const types = c.get('validators').queryTypes[path];
  if (types !== undefined) {
    for (const name in types) {
      const value = query[name];
      if (typeof value === 'string') query[name] = fromQueryText(value, types[name]);
    }
  }
  const validate = c.get('validators').query[path]!;
  if (!validate(query)) throw invalidRequest('The query is not valid.', toFieldErrors(validate.errors));
  return query as T;
}

/** The 400 for a query that names a parameter more than once: each such parameter, in the order first given. */
function repeatedParameters(text: string) {
  const counts = new Map<string, number>();
  for (const [name] of new URLSearchParams(text)) counts.set(name, (counts.get(name) ?? 0) + 1);
  return invalidRequest(
    'A query parameter was given more than once.',
    [...counts]
      .filter(([, n]) => n > 1)
      .map(([name]) => ({ pointer: `/${name}`, code: 'not_allowed', message: 'must be given once' })),
  );
}

/**
 * The query of a request's URL with its `?` (which URLSearchParams drops; only the one: a query
 * `??b=1` names `?b`), as `new URL(url).search` has it, without parsing the
 * whole URL again (a read's cost, issue 33): the URL is an absolute one (the Request's, or
 * @hono/node-server's, whose scheme and host hold neither `?` nor `#`), so its fragment starts
 * at its first `#`, and its query at its first `?` before that.
 */
export function queryOf(url: string): string {
  const hash = url.indexOf('#');
  const start = url.indexOf('?');
  if (start === -1 || (hash !== -1 && hash < start)) return '';
  return url.slice(start, hash === -1 ? undefined : hash);
}

/** The accounts the request's token may see (see kernel/in-reach.ts). */
export const inReach = (c: OpContext) => inReachOf(c.get('token').site);

/**
 * What a handler's new password needs (accounts/new-password.ts), with the request's write deps:
 * each hash counted against the token's "hash" budget (429 over it) just before it is computed.
 */
export function newPasswordDepsOf(c: OpContext): WriteDeps & HookDeps & NewPasswordDeps {
  const { hasher, breachedPasswords } = c.get('deps');
  return {
    ...writeDepsOf(c),
    hasher,
    breachedPasswords,
    beforeHash: () => consumeBudget(c, 'hash'),
    warn: (message) => c.get('log').warn(message),
  };
}

/** What counts an account's wrong login and phone codes: the verify lockout's store, per account (accounts/tickets.ts). */
export function codeGuardOf(c: OpContext): CodeGuard {
  const { lockout, verifyLimits } = c.get('deps');
  return { lockout, policy: verifyLimits.identifier };
}

/** The deployment's HMAC keys (kernel/deployment-keys.ts): FACTOR_ENCRYPTION_KEY's, else the database's own. */
export function deploymentKeysOfRequest(c: OpContext): Promise<DeploymentKeys> {
  const { database, factorKeys } = c.get('deps');
  return deploymentKeysOf(database.db, factorKeys);
}

/**
 * The end user's address, when the caller gave one: an IPv4 or IPv6 address in its canonical form
 * (every spelling of an IPv4 address as IPv6 is the IPv4 address, so none escapes its count), or 400.
 */
export function endUserAddress(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  // A zone id (`fe80::1%eth0`) names an interface of the caller's machine, not an end user.
  const canonical = value.length > 45 || value.includes('%') ? undefined : canonicalAddress(value);
  if (canonical === undefined) {
    throw invalidRequest('The X-End-User-IP header is not an IP address.', [
      { pointer: 'X-End-User-IP', code: 'invalid_format', message: 'must be an IPv4 or IPv6 address' },
    ]);
  }
  return canonical;
}

/** What a session's writes use: the request's write deps and the signer of access tokens. */
export function sessionDepsOf(c: OpContext): SessionDeps {
  return { ...writeDepsOf(c), accessTokens: c.get('deps').accessTokens };
}

/**
 * Whether a body (as parsed, before the schema) asks for a `login` ticket: the one purpose of
 * `ticket` and `ticket/redeem` that the verify scope admits (Operation.alsoScope). Anything else,
 * a body that is no object included, is left to the write scope.
 */
export function isLoginTicket(body: unknown): boolean {
  return (
    body !== null && typeof body === 'object' && !Array.isArray(body) && 'purpose' in body && body.purpose === 'login'
  );
}

/** Enterprise sign-in's deployment parts (sso/deps.ts); assemble.ts always sets them. */
export function ssoDepsOf(c: OpContext): SsoDeps {
  const sso = c.get('deps').sso;
  if (sso === undefined) throw new Error('enterprise sign-in is not assembled (deps.sso)');
  return sso;
}
