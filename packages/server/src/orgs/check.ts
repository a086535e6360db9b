// org/member/check (issue 45, point 4): "may this person do this in this organization?", asked on
// every request of a B2B site. One prepared statement, primary-key lookups only: the site's
// organization, the membership (its account not deleted, and whether disabled), and the site's roles the member holds
// (org_roles' key is (site, role)). Nothing is cached: a change of roles or of a membership is
// seen by the next check on every server, with no invalidation to get wrong.
import type { components } from '@user-accounts/client';
import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { preparedOn } from '../db/prepared.ts';
import { orgMemberships, orgs } from '../db/schema.ts';
import { isUuid } from '../kernel/ids.ts';
import { orgNotFound } from './rules.ts';

export type CheckAnswer = components['schemas']['CheckOrgMemberResponse']['result'];
type Refusal = NonNullable<CheckAnswer['reason']>;

// Built once per database (preparedOn): drizzle no longer renders its text on every check (issue 47).
const check = preparedOn((db) =>
  db
    .select({
      roles: orgMemberships.roles,
      // The member's account, enabled or not (null: no member); read by primary key.
      disabled: sql<boolean | null>`(select u.disabled from users u where u.id = ${orgMemberships.userId})`,
      allowed: sql<boolean>`coalesce((select bool_or(${sql.placeholder('permission')}::text = any(r.permissions))
          from org_roles r where r.site = ${orgs.site} and r.role = any(${orgMemberships.roles})), false)`,
    })
    .from(orgs)
    .leftJoin(
      orgMemberships,
      and(
        eq(orgMemberships.orgId, orgs.id),
        eq(orgMemberships.userId, sql.placeholder('user')),
        sql`exists (select 1 from users u where u.id = ${orgMemberships.userId} and u.deleted_at is null)`,
      ),
    )
    .where(and(eq(orgs.id, sql.placeholder('orgId')), eq(orgs.site, sql.placeholder('site'))))
    .prepare('org_member_check'),
);

export async function checkMember(
  db: Db,
  site: string,
  orgId: string,
  userId: string,
  permission: string | undefined,
): Promise<CheckAnswer> {
  if (!isUuid(orgId)) throw orgNotFound();
  // An _userId that cannot name an account is no member (the organization is still looked up).
  const user = isUuid(userId) ? userId : '00000000-0000-0000-0000-000000000000';
  const [row] = await check(db).execute({ permission: permission ?? null, user, orgId, site });
  if (row === undefined) throw orgNotFound();
  if (row.roles === null) return { member: false, roles: [], allowed: false, reason: 'not_member' };
  // A disabled (or suspended) account keeps its membership, and may do nothing while it lasts.
  const refusal: Refusal | null = row.disabled
    ? 'account_disabled'
    : permission === undefined
      ? 'no_permission_asked'
      : row.allowed === true
        ? null
        : 'permission_not_granted';
  return { member: true, roles: row.roles, allowed: refusal === null, reason: refusal };
}
