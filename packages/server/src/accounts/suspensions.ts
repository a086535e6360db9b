// The end of timed suspensions (issue 30, point 2): housekeeping enables each account whose
// `disabled_until` has come, with its audit row (actor `job`) and its user.enabled event, through
// the unit of work as every write. Every replica runs it: FOR UPDATE SKIP LOCKED lets each claim
// rows no other holds, and a claimed row leaves the search when its claim commits (its end is
// cleared), so each suspension ends exactly once however many servers look at once.
import { randomUUID } from 'node:crypto';
import { and, asc, inArray, isNotNull, lte, sql } from 'drizzle-orm';
import { rows } from '../db/client.ts';
import { users } from '../db/schema.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import { inWrite, type WriteDeps } from '../kernel/unit-of-work.ts';
import { bySiteInTurn } from './in-turn.ts';

/** Accounts enabled per transaction: a large backlog is worked through in short transactions. */
export const SUSPENSIONS_BATCH = 100;

const due = sql`${users.disabledUntil} <= now()`;

/**
 * Enables every account of every site whose suspension has ended, the sites in turn a batch each
 * (bySiteInTurn); returns how many this call enabled. `afterClaim` (tests only) runs inside each
 * batch's transaction once its rows are claimed and enabled, before it commits: a test holds one
 * replica there.
 */
export async function endDueSuspensions(
  deps: WriteDeps,
  options: { batch?: number; afterClaim?: (userIds: string[]) => Promise<void> } = {},
): Promise<number> {
  const batch = options.batch ?? SUSPENSIONS_BATCH;
  // By the partial index on disabled_until: only timed suspensions are in it.
  const sites = await rows<{ site: string }>(
    deps.db,
    sql`select distinct ${users.site} as site from ${users} where ${isNotNull(users.disabledUntil)} and ${due}`,
  );
  return bySiteInTurn(
    sites.map((s) => s.site),
    batch,
    async (site) => {
      const scope = { site, actor: 'job', requestId: randomUUID() };
      const done = (ids: string[]) => ({ userId: undefined, userIds: ids, status: 200, outcome: 'user enabled' });
      const ended = await inWrite(scope, deps, 'enable', done, async (tx) => {
        const claim = tx
          .select({ id: users.id })
          .from(users)
          .where(and(inReachOf(site), isNotNull(users.disabledUntil), lte(users.disabledUntil, sql`now()`)))
          .orderBy(asc(users.disabledUntil))
          .limit(batch)
          .for('update', { skipLocked: true });
        const enabled = await tx
          .update(users)
          .set({ disabled: false, disabledUntil: null, disabledReason: null, updatedAt: sql`now()` })
          .where(inArray(users.id, claim))
          .returning({ id: users.id });
        if (enabled.length === 0) return undefined;
        const ids = enabled.map((r) => r.id);
        await options.afterClaim?.(ids);
        return ids;
      });
      return ended?.length ?? 0;
    },
  );
}
