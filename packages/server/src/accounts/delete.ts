// delete: the account removed for good, under If-Match; its event carries only its id.
import { and, eq } from 'drizzle-orm';
import { users } from '../db/schema.ts';
import { userNotFound } from '../http/errors.ts';
import type { IfMatch } from '../http/etag.ts';
import { matchingIfMatch, notWritten } from './conditions.ts';
import { isUuid } from './ids.ts';
import { inReachOf } from './in-reach.ts';
import { inWrite, type WriteDeps, type WriteScope } from './unit-of-work.ts';

/** Deletes an account of the scope's site: 404 when it is not in reach, 412 when If-Match lists another version. */
export async function deleteAccount(
  scope: WriteScope,
  deps: WriteDeps,
  userId: string,
  ifMatch: IfMatch,
): Promise<void> {
  if (!isUuid(userId)) throw userNotFound();
  const account = and(eq(users.id, userId), inReachOf(scope.site));
  const deleted = await inWrite(scope, deps, 'delete', { userId, status: 200, outcome: 'user removed' }, async (tx) => {
    const [row] = await tx.delete(users).where(matchingIfMatch(account, ifMatch)).returning({ id: users.id });
    return row;
  });
  if (deleted === undefined) throw await notWritten(deps.db, account, ifMatch);
}
