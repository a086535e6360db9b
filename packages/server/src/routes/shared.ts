import type { Context } from 'hono';
import { and, eq, inArray, type SQL } from 'drizzle-orm';
import type { components } from '@user-accounts/client';
import type { AppEnv } from '../context.ts';
import { users } from '../db/schema.ts';
import type { Db } from '../db/client.ts';
import { ApiError, userNotFound } from '../errors.ts';
import type { IfMatch } from '../etag.ts';
import { assertWellFormedStrings, invalidRequest, toFieldErrors, type BodySchema } from '../validation.ts';

type Schemas = components['schemas'];

/**
 * The parsed body, checked against the operation's schema from the spec. Before the check, as the
 * spec says: `email` and `name` are trimmed, `password` is normalized to NFC.
 */
export function validBody<K extends BodySchema>(c: Context<AppEnv>, schema: K): Schemas[K] {
  const body = c.get('body');
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw invalidRequest('The request body must be a JSON object.', [
      { pointer: '', code: 'invalid_type', message: 'must be an object' },
    ]);
  }
  const fields = body as Record<string, unknown>;
  for (const key of ['email', 'name'] as const) {
    if (typeof fields[key] === 'string') fields[key] = fields[key].trim();
  }
  if (typeof fields.password === 'string') fields.password = fields.password.normalize('NFC');
  assertWellFormedStrings(fields);
  const validate = c.get('validators').body[schema];
  if (!validate(fields)) {
    throw invalidRequest('The request body is not valid.', toFieldErrors(validate.errors));
  }
  return fields as Schemas[K];
}

/** `email` in an update body is refused by name, before the (closed) schema would call it unknown. */
export function refuseEmailChange(c: Context<AppEnv>): void {
  const body = c.get('body');
  if (body !== null && typeof body === 'object' && Object.hasOwn(body, 'email')) {
    throw new ApiError(400, 'field_not_updatable', 'The email of an account cannot be changed.', {
      errors: [{ pointer: '/email', code: 'not_updatable', message: 'cannot be changed' }],
    });
  }
}

export function weakPassword(reason: string): ApiError {
  return new ApiError(400, 'weak_password', "The password is too common or too close to the account's details.", {
    errors: [{ pointer: '/password', code: 'weak_password', message: reason }],
  });
}

export function toUser(row: typeof users.$inferSelect): Schemas['User'] {
  return {
    _userId: row.id,
    email: row.email,
    name: row.name,
    phone: row.phone,
    address: row.address,
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

/**
 * The accounts a request may see: created through this interface, and of the token's own site.
 * Every other row answers exactly as a row that does not exist.
 */
export function inReach(c: Context<AppEnv>) {
  return and(eq(users.origin, 'api'), eq(users.site, c.get('token').site));
}

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
