// org/member/check (issue 45, point 4): "may this person do this in this organization?", asked on
// every request of a B2B site. One prepared statement, three primary-key lookups: the site's
// organization, the membership (its account not deleted), and the site's roles the member holds
// (org_roles' key is (site, role)). Nothing is cached: a change of roles or of a membership is
// seen by the next check on every server, with no invalidation to get wrong.
import { and, eq, sql } from 'drizzle-orm';
import { isUuid } from '../accounts/ids.ts';
import type { Db } from '../db/client.ts';
import { preparedOn } from '../db/prepared.ts';
import { orgMemberships, orgs } from '../db/schema.ts';
import { orgNotFound } from './rules.ts';

export interface CheckAnswer {
  member: boolean;
  roles: string[];
  allowed: boolean;
}

// Built once per database (preparedOn): drizzle no longer renders its text on every check (issue 47).
const check = preparedOn((db) =>
  db
    .select({
      roles: orgMemberships.roles,
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
  if (row.roles === null) return { member: false, roles: [], allowed: false };
  return { member: true, roles: row.roles, allowed: permission !== undefined && row.allowed === true };
}
