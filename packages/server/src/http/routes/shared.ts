import type { components } from '@user-accounts/client';
import { and, eq, inArray, ne, type SQL, sql } from 'drizzle-orm';
import type { Context } from 'hono';
import { isUuid } from '../../accounts/ids.ts';
import { inReachOf } from '../../accounts/in-reach.ts';
import type { Db } from '../../db/client.ts';
import { users } from '../../db/schema.ts';
import type { AppEnv } from '../context.ts';
import { ApiError, userNotFound } from '../errors.ts';
import type { IfMatch } from '../etag.ts';
import { consumeBudget } from '../middleware/rate-limit.ts';
import { runWrite } from '../run-write.ts';
import { type BodySchema, fromQueryText, invalidRequest, normalizeFields, toFieldErrors } from '../validation.ts';

type Schemas = components['schemas'];

/** The parsed body, normalized as the spec says, then checked against the operation's schema. */
export function validBody<K extends BodySchema>(c: Context<AppEnv>, schema: K): Schemas[K] {
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
export function validQuery<T extends object>(c: Context<AppEnv>, path: string): T {
  // URLSearchParams keeps every parameter, even one with an empty name, which must be refused too.
  // A Map, so that a parameter named __proto__ is just a name.
  const raw = new Map<string, string[]>();
  for (const [name, value] of new URL(c.req.url).searchParams) raw.set(name, [...(raw.get(name) ?? []), value]);
  const repeated = [...raw].filter(([, values]) => values.length > 1);
  if (repeated.length > 0) {
    throw invalidRequest(
      'A query parameter was given more than once.',
      repeated.map(([name]) => ({ pointer: `/${name}`, code: 'not_allowed', message: 'must be given once' })),
    );
  }
  const query: Record<string, string> = Object.fromEntries([...raw].map(([name, values]) => [name, values[0]!]));
  normalizeFields(query);
  const types = c.get('validators').queryTypes[path] ?? {};
  const typed = Object.fromEntries(
    Object.entries(query).map(([name, text]) => [name, fromQueryText(text, types[name])]),
  );
  const validate = c.get('validators').query[path]!;
  if (!validate(typed)) throw invalidRequest('The query is not valid.', toFieldErrors(validate.errors));
  return typed as T;
}

/** `email` in an update body is refused by name, before the (closed) schema would call it unknown. */
export function refuseEmailChange(c: Context<AppEnv>): void {
  const body = c.get('body');
  if (body !== null && typeof body === 'object' && Object.hasOwn(body, 'email')) {
    const detail =
      'An account is identified by _userId on update, and its email cannot be changed: take the _userId ' +
      "from create's answer, or from get?email=.";
    throw new ApiError(400, 'field_not_updatable', detail, {
      errors: [{ pointer: '/email', code: 'not_updatable', message: 'cannot be changed' }],
    });
  }
}

export function weakPassword(reason: string): ApiError {
  return new ApiError(400, 'weak_password', "The password is too common or too close to the account's details.", {
    errors: [{ pointer: '/password', code: 'weak_password', message: reason }],
  });
}

export function toUser(
  row: Pick<
    typeof users.$inferSelect,
    'id' | 'email' | 'name' | 'phone' | 'address' | 'disabled' | 'metadata' | 'createdAt' | 'updatedAt'
  >,
): Schemas['User'] {
  return {
    _userId: row.id,
    email: row.email,
    name: row.name,
    phone: row.phone,
    address: row.address,
    disabled: row.disabled,
    metadata: row.metadata,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/** The accounts the request's token may see (see accounts/in-reach.ts). */
export const inReach = (c: Context<AppEnv>) => inReachOf(c.get('token').site);

export const preconditionFailed = () =>
  new ApiError(412, 'precondition_failed', 'The account has changed since the given ETag; read it again.');

/** The account's condition, narrowed to the versions `If-Match` lists (`*` and no header: any). */
export function matchingIfMatch(account: SQL | undefined, ifMatch: IfMatch): SQL | undefined {
  return ifMatch === undefined || ifMatch.any ? account : and(account, inArray(users.version, ifMatch.versions));
}

/**
 * Why a conditional write touched no row: the account is not in reach (404, which wins whatever
 * If-Match says), or it is there in another version (412).
 */
export async function notWritten(db: Db, account: SQL | undefined, ifMatch: IfMatch): Promise<ApiError> {
  if (ifMatch === undefined || ifMatch.any) return userNotFound();
  const [exists] = await db.select({ id: users.id }).from(users).where(account).limit(1);
  return exists === undefined ? userNotFound() : preconditionFailed();
}

/**
 * The one way a handler hashes a password: counted against the token's "hash" budget (429 over
 * it), then computed in the token's site's turn (503 when the site may not wait).
 */
export async function hashPassword(c: Context<AppEnv>, password: string): Promise<string> {
  await consumeBudget(c, 'hash');
  return c.get('deps').hasher.hash(password, c.get('token').site, c.get('deadline').signal);
}

/**
 * Disables or enables an account (disable and enable). Idempotent in effect: an account already
 * in that state is answered 200 and left as it is (same version, same updatedAt), and audited.
 */
export async function switchAccount(
  c: Context<AppEnv>,
  input: { _userId: string },
  ifMatch: IfMatch,
  disabled: boolean,
): Promise<{ version: number }> {
  if (!isUuid(input._userId)) throw userNotFound();
  const account = and(eq(users.id, input._userId), inReach(c));
  const current = matchingIfMatch(account, ifMatch);
  const outcome = disabled ? 'user disabled' : 'user enabled';
  // An account already in that state is not changed, and so has no event.
  const done = (w: { changed: boolean }) => ({ userId: input._userId, status: 200, outcome, emits: w.changed });
  c.get('write').userId = input._userId;
  const written = await runWrite(c, done, async (tx) => {
    const [changed] = await tx
      .update(users)
      .set({ disabled, updatedAt: sql`now()` })
      .where(and(current, ne(users.disabled, disabled)))
      .returning({ version: users.version });
    if (changed !== undefined) return { ...changed, changed: true };
    const [unchanged] = await tx.select({ version: users.version }).from(users).where(current).limit(1);
    return unchanged === undefined ? undefined : { ...unchanged, changed: false };
  });
  if (written === undefined) throw await notWritten(c.get('deps').database.db, account, ifMatch);
  return written;
}
