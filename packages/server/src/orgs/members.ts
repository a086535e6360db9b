// Memberships (issue 45, point 3): an account of the site in an organization of the site, with
// roles of the site's set. The organization's row is locked by every change of its members (its
// memberCount changes in the same transaction); the account's row by an add (its 1,000 cap).
import { and, asc, eq, gt, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { orgMemberships, orgs, users } from '../db/schema.ts';
import { userNotFound } from '../errors.ts';
import { isUuid } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import type { EventEntry } from '../kernel/outbox.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { holdRoles } from './roles.ts';
import { alreadyMember, MAX_ORGS_PER_ACCOUNT, memberNotFound, orgLimitReached, orgNotFound } from './rules.ts';

export const memberEvent = (
  type: 'org.member_added' | 'org.member_updated' | 'org.member_removed',
  orgId: string,
  userId: string,
  roles: string[],
): EventEntry => ({ type, userId: orgId, data: { orgId, _userId: userId, roles } });

/** The organization of the site, locked for its members' change (FOR NO KEY UPDATE); 404 when none. */
export async function lockOrg(tx: Db, site: string, orgId: string): Promise<{ name: string }> {
  if (!isUuid(orgId)) throw orgNotFound();
  const [row] = await tx
    .select({ name: orgs.name })
    .from(orgs)
    .where(and(eq(orgs.id, orgId), eq(orgs.site, site)))
    .for('no key update');
  if (row === undefined) throw orgNotFound();
  return row;
}

/** The account in reach, locked against a concurrent add (its cap) or delete; 404 when none. */
async function lockAccount(tx: Db, site: string, userId: string): Promise<void> {
  if (!isUuid(userId)) throw userNotFound();
  const [row] = await tx
    .select({ id: users.id })
    .from(users)
    .where(and(eq(users.id, userId), inReachOf(site)))
    .for('no key update');
  if (row === undefined) throw userNotFound();
}

/**
 * Adds the membership in the caller's transaction, the organization and the account locked and
 * the roles held: 409 already_member, 409 org_limit_reached.
 */
export async function insertMembership(tx: Db, site: string, orgId: string, userId: string, roles: string[]) {
  const [{ count } = { count: 0 }] = await tx
    .select({ count: sql<number>`count(*)::int` })
    .from(orgMemberships)
    .where(eq(orgMemberships.userId, userId));
  const [added] = await tx
    .insert(orgMemberships)
    .values({ orgId, userId, site, roles })
    .onConflictDoNothing()
    .returning({ userId: orgMemberships.userId });
  if (added === undefined) throw alreadyMember();
  if (count >= MAX_ORGS_PER_ACCOUNT) throw orgLimitReached();
  await tx
    .update(orgs)
    .set({ memberCount: sql`${orgs.memberCount} + 1` })
    .where(eq(orgs.id, orgId));
}

export async function addMember(
  scope: WriteScope,
  deps: WriteDeps,
  input: { orgId: string; _userId: string; roles: string[] },
): Promise<void> {
  const { orgId, _userId: userId, roles } = input;
  scope.report?.({ userId });
  const done = {
    userId,
    status: 200,
    outcome: 'member added',
    moreEvents: [memberEvent('org.member_added', orgId, userId, roles)],
  };
  await inWrite(scope, deps, 'org_member_add', done, async (tx) => {
    await lockOrg(tx, scope.site, orgId);
    await lockAccount(tx, scope.site, userId);
    await holdRoles(tx, scope.site, roles);
    await insertMembership(tx, scope.site, orgId, userId, roles);
    return true;
  });
}

export async function updateMember(
  scope: WriteScope,
  deps: WriteDeps,
  input: { orgId: string; _userId: string; roles: string[] },
): Promise<void> {
  const { orgId, _userId: userId, roles } = input;
  scope.report?.({ userId });
  const done = {
    userId,
    status: 200,
    outcome: 'member updated',
    moreEvents: [memberEvent('org.member_updated', orgId, userId, roles)],
  };
  await inWrite(scope, deps, 'org_member_update', done, async (tx) => {
    await lockOrg(tx, scope.site, orgId);
    await holdRoles(tx, scope.site, roles);
    if (!isUuid(userId)) throw memberNotFound();
    const [row] = await tx
      .update(orgMemberships)
      .set({ roles })
      .where(and(eq(orgMemberships.orgId, orgId), eq(orgMemberships.userId, userId), memberInReach(scope.site)))
      .returning({ userId: orgMemberships.userId });
    if (row === undefined) throw memberNotFound();
    return true;
  });
}

/** The membership's account is in reach (an account in its grace period is no member to see). */
const memberInReach = (site: string) =>
  sql`exists (select 1 from ${users} where ${users.id} = ${orgMemberships.userId} and ${inReachOf(site)})`;

export async function removeMember(
  scope: WriteScope,
  deps: WriteDeps,
  input: { orgId: string; _userId: string },
): Promise<void> {
  const { orgId, _userId: userId } = input;
  scope.report?.({ userId });
  const done = (roles: string[]) => ({
    userId,
    status: 200,
    outcome: 'member removed',
    moreEvents: [memberEvent('org.member_removed', orgId, userId, roles)],
  });
  await inWrite(scope, deps, 'org_member_remove', done, async (tx) => {
    await lockOrg(tx, scope.site, orgId);
    if (!isUuid(userId)) throw memberNotFound();
    const [row] = await tx
      .delete(orgMemberships)
      .where(and(eq(orgMemberships.orgId, orgId), eq(orgMemberships.userId, userId), memberInReach(scope.site)))
      .returning({ roles: orgMemberships.roles });
    if (row === undefined) throw memberNotFound();
    await tx
      .update(orgs)
      .set({ memberCount: sql`${orgs.memberCount} - 1` })
      .where(eq(orgs.id, orgId));
    return row.roles;
  });
}

/**
 * Removes every membership of the accounts, in the caller's transaction (an account deleted for
 * good or purged), each organization's count with it: the org.member_removed events.
 */
export async function removeMembershipsOf(tx: Db, userIds: string[]): Promise<EventEntry[]> {
  if (userIds.length === 0) return [];
  const removed: EventEntry[] = [];
  for (const userId of userIds) {
    const gone = await tx
      .delete(orgMemberships)
      .where(eq(orgMemberships.userId, userId))
      .returning({ orgId: orgMemberships.orgId, roles: orgMemberships.roles })
      // A statement of every delete for good: parsed once per connection (issue 63).
      .prepare('remove_memberships_of')
      .execute();
    // In a fixed order (the organizations' ids), so that two such writes never deadlock.
    gone.sort((a, b) => a.orgId.localeCompare(b.orgId));
    for (const { orgId, roles } of gone) {
      await tx
        .update(orgs)
        .set({ memberCount: sql`${orgs.memberCount} - 1` })
        .where(eq(orgs.id, orgId));
      removed.push(memberEvent('org.member_removed', orgId, userId, roles));
    }
  }
  return removed;
}

/** A page of the organization's members in order of _userId after `after`; one row more than `limit`. */
export async function membersPage(db: Db, site: string, orgId: string, limit: number, after: string | undefined) {
  return db
    .select({
      userId: orgMemberships.userId,
      email: users.email,
      name: users.name,
      roles: orgMemberships.roles,
      joinedAt: orgMemberships.joinedAt,
    })
    .from(orgMemberships)
    .innerJoin(users, eq(users.id, orgMemberships.userId))
    .where(
      and(
        eq(orgMemberships.orgId, orgId),
        inReachOf(site),
        after === undefined ? undefined : gt(orgMemberships.userId, after),
      ),
    )
    .orderBy(asc(orgMemberships.userId))
    .limit(limit + 1);
}

/** The account's memberships (at most 1,000), in order of joining, with each organization's name and slug. */
export async function membershipsOf(db: Db, userId: string) {
  const found = await db
    .select({
      orgId: orgs.id,
      name: orgs.name,
      slug: orgs.slug,
      roles: orgMemberships.roles,
      joinedAt: orgMemberships.joinedAt,
    })
    .from(orgMemberships)
    .innerJoin(orgs, eq(orgs.id, orgMemberships.orgId))
    .where(eq(orgMemberships.userId, userId))
    .orderBy(asc(orgMemberships.joinedAt), asc(orgMemberships.orgId))
    .limit(MAX_ORGS_PER_ACCOUNT);
  return found.map((m) => ({ ...m, joinedAt: m.joinedAt.toISOString() }));
}

/** user/orgs: the account in reach's memberships; 404 when no account in reach has the id. */
export async function orgsOfAccount(db: Db, site: string, userId: string) {
  if (!isUuid(userId)) throw userNotFound();
  const [account] = await db
    .select({ id: users.id })
    .from(users)
    .where(and(eq(users.id, userId), inReachOf(site)));
  if (account === undefined) throw userNotFound();
  return membershipsOf(db, userId);
}
