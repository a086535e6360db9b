// disable and enable: one write, the account's `disabled` set to the value asked for.
import { and, eq, ne, sql } from 'drizzle-orm';
import { users } from '../db/schema.ts';
import { userNotFound } from '../http/errors.ts';
import type { IfMatch } from '../http/etag.ts';
import { matchingIfMatch, notWritten } from './conditions.ts';
import { isUuid } from './ids.ts';
import { inReachOf } from './in-reach.ts';
import { inWrite, type WriteDeps, type WriteScope } from './unit-of-work.ts';

/**
 * Disables (`disabled` true) or enables an account of the scope's site, under If-Match.
 * Idempotent in effect: an account already in that state is left as it is (same version, same
 * updatedAt), with no event, and the write is audited all the same. 404 when it is not in reach,
 * 412 when it is in another version than If-Match lists.
 */
export async function setDisabled(
  scope: WriteScope,
  deps: WriteDeps,
  userId: string,
  ifMatch: IfMatch,
  disabled: boolean,
): Promise<{ version: number }> {
  if (!isUuid(userId)) throw userNotFound();
  const account = and(eq(users.id, userId), inReachOf(scope.site));
  const current = matchingIfMatch(account, ifMatch);
  const outcome = disabled ? 'user disabled' : 'user enabled';
  // An account already in that state is not changed, and so has no event.
  const done = (w: { changed: boolean }) => ({ userId, status: 200, outcome, emits: w.changed });
  scope.report?.({ userId });
  const written = await inWrite(scope, deps, disabled ? 'disable' : 'enable', done, async (tx) => {
    const [changed] = await tx
      .update(users)
      .set({ disabled, updatedAt: sql`now()` })
      .where(and(current, ne(users.disabled, disabled)))
      .returning({ version: users.version });
    if (changed !== undefined) return { ...changed, changed: true };
    const [unchanged] = await tx.select({ version: users.version }).from(users).where(current).limit(1);
    return unchanged === undefined ? undefined : { ...unchanged, changed: false };
  });
  if (written === undefined) throw await notWritten(deps.db, account, ifMatch);
  return written;
}
