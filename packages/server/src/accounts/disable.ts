// disable and enable: one write, the account's `disabled` set to the value asked for, with a
// timed suspension's end and its reason (issue 30, point 2); housekeeping ends the timed ones.
import { and, eq, sql } from 'drizzle-orm';
import { users } from '../db/schema.ts';
import { userNotFound } from '../errors.ts';
import type { HookDeps } from '../kernel/account-hooks.ts';
import { isUuid } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import type { EventEntry } from '../kernel/outbox.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import type { IfMatch } from './conditions.ts';
import { matchingIfMatch, notWritten } from './conditions.ts';

/** A suspension's end (null: until an enable) and its reason for operators (null: none). */
export interface Suspension {
  until: Date | null;
  reason: string | null;
}

const NO_SUSPENSION: Suspension = { until: null, reason: null };

/**
 * Disables (`disabled` true, with `suspension`'s end and reason) or enables (all cleared) an
 * account of the scope's site, under If-Match. Idempotent in effect: an account already in that
 * state is left as it is (same version, same updatedAt), with no event, and the write is audited
 * all the same. 404 when it is not in reach, 412 when it is in another version than If-Match lists.
 */
export async function setDisabled(
  scope: WriteScope,
  deps: WriteDeps & HookDeps,
  userId: string,
  ifMatch: IfMatch,
  disabled: boolean,
  suspension: Suspension = NO_SUSPENSION,
): Promise<{ version: number }> {
  if (!isUuid(userId)) throw userNotFound();
  const account = and(eq(users.id, userId), inReachOf(scope.site));
  const current = matchingIfMatch(account, ifMatch);
  const outcome = disabled ? 'user disabled' : 'user enabled';
  const { until, reason } = disabled ? suspension : NO_SUSPENSION;
  // An account already in that state is not changed, and so has no event.
  const done = (w: { changed: boolean; ended?: EventEntry[] }) => ({
    userId,
    status: 200,
    outcome,
    emits: w.changed,
    moreEvents: w.ended ?? [],
  });
  scope.report?.({ userId });
  const written = await inWrite(scope, deps, disabled ? 'disable' : 'enable', done, async (tx) => {
    const [changed] = await tx
      .update(users)
      .set({ disabled, disabledUntil: until, disabledReason: reason, updatedAt: sql`now()` })
      .where(
        and(
          current,
          sql`(${users.disabled}, ${users.disabledUntil}, ${users.disabledReason})
            is distinct from (${disabled}, ${until?.toISOString() ?? null}::timestamptz, ${reason}::text)`,
        ),
      )
      .returning({ version: users.version });
    // A disable, timed or not: the other domains' hooks, in this write (its sessions end: sessions/hooks.ts).
    if (changed !== undefined)
      return { ...changed, changed: true, ended: disabled ? await deps.accountHooks.disabled(tx, userId) : [] };
    const [unchanged] = await tx.select({ version: users.version }).from(users).where(current).limit(1);
    return unchanged === undefined ? undefined : { ...unchanged, changed: false };
  });
  if (written === undefined) throw await notWritten(deps.db, account, ifMatch);
  return written;
}
