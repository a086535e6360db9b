// A conditional write (If-Match): the account's condition narrowed to the versions the caller
// read, and why a write under it touched no row.
import { and, inArray, type SQL } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { users } from '../db/schema.ts';
import { ApiError, userNotFound } from '../errors.ts';

/**
 * What `If-Match` asks for: any current account (`*`), one of these versions, or nothing at all
 * (http/etag.ts reads it from the header).
 */
export type IfMatch = { any: true } | { any: false; versions: number[] } | undefined;

export const preconditionFailed = () =>
  new ApiError('precondition_failed', 'The account has changed since the given ETag; read it again.');

/** The account's condition, narrowed to the versions `If-Match` lists (`*` and no header: any). */
export function matchingIfMatch(account: SQL | undefined, ifMatch: IfMatch): SQL | undefined {
  return ifMatch === undefined || ifMatch.any ? account : and(account, inArray(users.version, ifMatch.versions));
}

/**
 * Whether matchingIfMatch's condition has a fixed text (no If-Match, or `*`): a statement on it may
 * be prepared once per connection. A list of versions is as long as the client makes it: each
 * length would be one more statement kept for the connection's life.
 */
export const plainTarget = (ifMatch: IfMatch): boolean => ifMatch === undefined || ifMatch.any;

/**
 * Why a conditional write touched no row: the account is not in reach (404, which wins whatever
 * If-Match says), or it is there in another version (412).
 */
export async function notWritten(db: Db, account: SQL | undefined, ifMatch: IfMatch): Promise<ApiError> {
  if (ifMatch === undefined || ifMatch.any) return userNotFound();
  const [exists] = await db.select({ id: users.id }).from(users).where(account).limit(1);
  return exists === undefined ? userNotFound() : preconditionFailed();
}
