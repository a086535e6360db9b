// delete, restore and purge (issue 30, point 1). A delete with a grace period (the request's
// graceDays, else the site's default of `cli site set --deletion-grace`) only marks the account:
// it is then out of reach of every operation as a missing one (kernel/in-reach.ts) except
// restore, its email stays taken (a restore never collides), and housekeeping purges it at the
// period's end. A delete with none removes it at once, as before.
import { randomUUID } from 'node:crypto';
import { and, asc, eq, inArray, isNotNull, lte, sql } from 'drizzle-orm';
import { type Db, rows } from '../db/client.ts';
import {
  auditLog,
  eventQueue,
  events,
  idempotencyKeys,
  passkeyChallenges,
  siteSettings,
  users,
  verifyFailures,
  webhookDeliveries,
} from '../db/schema.ts';
import { userNotFound } from '../errors.ts';
import { secondFactorLockoutKey } from '../factors/factors.ts';
import type { HookDeps } from '../kernel/account-hooks.ts';
import { isUuid } from '../kernel/ids.ts';
import { inGraceOf, inReachOf } from '../kernel/in-reach.ts';
import type { EventEntry } from '../kernel/outbox.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { lockoutKey } from '../limits/lockout.ts';
import type { IfMatch } from './conditions.ts';
import { matchingIfMatch, notWritten, plainTarget } from './conditions.ts';
import { bySiteInTurn } from './in-turn.ts';

/** The site's default grace period in days (0: none). */
export async function siteDeletionGrace(db: Db, site: string): Promise<number> {
  const [row] = await db
    .select({ days: siteSettings.deletionGraceDays })
    .from(siteSettings)
    .where(eq(siteSettings.site, site));
  return row?.days ?? 0;
}

/**
 * Deletes an account of the scope's site: for good with no grace period, else restorable for
 * `graceDays` (undefined: the site's default). 404 when it is not in reach, 412 when If-Match
 * lists another version. Returns the grace period applied.
 */
export async function deleteAccount(
  scope: WriteScope,
  deps: WriteDeps & HookDeps,
  userId: string,
  ifMatch: IfMatch,
  graceDays?: number,
): Promise<{ graceDays: number }> {
  if (!isUuid(userId)) throw userNotFound();
  const account = and(eq(users.id, userId), inReachOf(scope.site));
  // The grace applied: the request's, else the site's default, read with the row's lock (below).
  let grace = graceDays;
  const done = (w: { ended: EventEntry[] }) => ({
    userId,
    status: 200,
    outcome: 'user removed',
    moreEvents: w.ended,
  });
  const deleted = await inWrite(scope, deps, 'delete', done, async (tx) => {
    const target = matchingIfMatch(account, ifMatch);
    // The account locked until the commit, and (unless the request said) the site's default grace
    // read in the same statement: a round trip less than reading it first (issue 63). Only once the
    // account is known to be the one to delete do the other domains' hooks run (kernel/account-hooks.ts:
    // its sessions end, with or without a grace period). Deleted for good, what they hold goes with
    // its row (its memberships too): the hooks run first, so that it has its events. With a grace
    // the request gave, the UPDATE below is the lock.
    if (grace === undefined || grace === 0) {
      const locking = tx
        .select({
          id: users.id,
          grace: sql<number>`coalesce((select ${siteSettings.deletionGraceDays} from ${siteSettings} where ${siteSettings.site} = ${scope.site}), 0)`,
        })
        .from(users)
        .where(target)
        .for('update');
      // Parsed once per connection (with If-Match's list of versions, anew: its length is the client's).
      const [locked] = plainTarget(ifMatch) ? await locking.prepare('delete_lock').execute() : await locking;
      if (locked === undefined) return undefined;
      grace ??= Number(locked.grace);
      if (grace === 0) {
        const ended = await deps.accountHooks.deleted(tx, userId, { forGood: true });
        const [row] = await tx
          .delete(users)
          .where(eq(users.id, userId))
          .returning({ id: users.id })
          .prepare('delete_row')
          .execute();
        return row === undefined ? undefined : { ended };
      }
    }
    const [row] = await tx
      .update(users)
      .set({ deletedAt: sql`now()`, purgeAt: sql`now() + make_interval(days => ${grace})` })
      .where(target)
      .returning({ id: users.id });
    if (row === undefined) return undefined;
    return { ended: await deps.accountHooks.deleted(tx, userId, { forGood: false }) };
  });
  if (deleted === undefined) throw await notWritten(deps.db, account, ifMatch);
  return { graceDays: grace ?? 0 };
}

/** Brings back an account of the scope's site in its grace period, as it was; 404 when none is. */
export async function restoreAccount(scope: WriteScope, deps: WriteDeps, userId: string): Promise<void> {
  if (!isUuid(userId)) throw userNotFound();
  const done = { userId, status: 200, outcome: 'user restored' };
  const restored = await inWrite(scope, deps, 'restore', done, async (tx) => {
    const [row] = await tx
      .update(users)
      .set({ deletedAt: null, purgeAt: null })
      .where(and(eq(users.id, userId), inGraceOf(scope.site)))
      .returning({ id: users.id });
    return row;
  });
  if (restored === undefined) throw userNotFound();
}

/** Accounts purged per transaction. */
export const PURGE_BATCH = 100;

/**
 * Purges every account whose grace period is over, on every site (the sites in turn, a batch each:
 * bySiteInTurn): the row (its tickets and factors go with it, by their foreign keys), the audit
 * rows and the events about it, their webhook deliveries, and its verify lockout counters, so
 * that nothing kept names the person. What stays is the purge's own audit row and user.purged
 * event, which carry the bare id and nothing else.
 * Every replica may run it: FOR UPDATE SKIP LOCKED, as accounts/suspensions.ts. Returns how many.
 * `afterClaim` (tests only) runs in each batch's transaction before it commits.
 */
export async function purgeDeleted(
  deps: WriteDeps & HookDeps,
  options: { batch?: number; afterClaim?: (userIds: string[]) => Promise<void> } = {},
): Promise<number> {
  const batch = options.batch ?? PURGE_BATCH;
  const sites = await rows<{ site: string }>(
    deps.db,
    sql`select distinct ${users.site} as site from ${users} where ${isNotNull(users.purgeAt)} and ${users.purgeAt} <= now()`,
  );
  return bySiteInTurn(
    sites.map((s) => s.site),
    batch,
    async (site) => {
      const scope = { site, actor: 'job', requestId: randomUUID() };
      type Purged = { ids: string[]; removed: EventEntry[] };
      const done = ({ ids, removed }: Purged) => ({
        userId: undefined,
        userIds: ids,
        status: 200,
        outcome: 'user purged',
        moreEvents: removed,
      });
      const purged = await inWrite(scope, deps, 'purge', done, async (tx) => {
        const claimed = await tx
          .select({ id: users.id, email: users.email })
          .from(users)
          .where(and(inGraceOf(site), lte(users.purgeAt, sql`now()`)))
          .orderBy(asc(users.purgeAt))
          .limit(batch)
          .for('update', { skipLocked: true });
        if (claimed.length === 0) return undefined;
        const ids = claimed.map((r) => r.id);
        await forgetAccounts(tx, site, claimed);
        // The other domains' hooks: their memberships go, each organization's count with them (orgs/hooks.ts).
        const removed = await deps.accountHooks.purged(tx, ids);
        await tx.delete(users).where(inArray(users.id, ids));
        // Tests only: holds this replica here, its claim open, while another runs.
        await options.afterClaim?.(ids);
        return { ids, removed };
      });
      return purged?.ids.length ?? 0;
    },
  );
}

/**
 * Everything but the row that names these accounts. Every table that names an account by id or
 * email, and what becomes of it: users (the row, deleted by the caller); tickets, user_factors,
 * recovery_codes (by their foreign keys' cascade); audit_log, event_queue, events,
 * webhook_deliveries, verify_failures (its keys are digests of the email and the id, the second
 * factor's too), passkey_challenges and idempotency_keys (a kept answer) here. The others name none: api_tokens, rate_limits (by token),
 * service_keys, event_sequences, webhook_endpoints, metadata_schemas, site_settings. With
 * REDIS_URL the lockout counters live in Redis too, where they expire with their window.
 */
async function forgetAccounts(tx: Db, site: string, accounts: { id: string; email: string }[]): Promise<void> {
  const ids = accounts.map((a) => a.id);
  await tx.delete(auditLog).where(and(eq(auditLog.site, site), inArray(auditLog.userId, ids)));
  await tx.delete(eventQueue).where(and(eq(eventQueue.site, site), inArray(eventQueue.subject, ids)));
  await tx.delete(events).where(and(eq(events.site, site), inArray(events.subject, ids)));
  await tx
    .delete(webhookDeliveries)
    .where(and(eq(webhookDeliveries.site, site), inArray(webhookDeliveries.subject, ids)));
  const keys = accounts.flatMap((a) => [
    lockoutKey(site, 'id', a.id.toLowerCase()),
    lockoutKey(site, 'email', a.email.toLowerCase()),
    secondFactorLockoutKey(site, a.id),
  ]);
  await tx.delete(verifyFailures).where(inArray(verifyFailures.key, keys));
  // A passkey challenge made for the account (no foreign key: a login's names no account).
  await tx
    .delete(passkeyChallenges)
    .where(and(eq(passkeyChallenges.site, site), inArray(passkeyChallenges.userId, ids)));
  // An Idempotency-Key's kept answer (a create's: its id and Location) lives 24 hours: gone now.
  await tx.delete(idempotencyKeys).where(
    sql`${idempotencyKeys.body} like any (${sql`array[${sql.join(
      ids.map((id) => sql`${`%${id}%`}`),
      sql`, `,
    )}]::text[]`})`,
  );
}
