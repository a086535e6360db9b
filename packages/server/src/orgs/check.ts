// org/member/check (issue 45, point 4): "may this person do this in this organization?", asked on
// every request of a B2B site. One prepared statement, three primary-key lookups: the site's
// organization, the membership (its account not deleted), and the site's roles the member holds
// (org_roles' key is (site, role)). Nothing is cached: a change of roles or of a membership is
// seen by the next check on every server, with no invalidation to get wrong.
import { sql } from 'drizzle-orm';
import { isUuid } from '../accounts/ids.ts';
import { type Db, rowsPrepared } from '../db/client.ts';
import { orgNotFound } from './rules.ts';

export interface CheckAnswer {
  member: boolean;
  roles: string[];
  allowed: boolean;
}

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
  const [row] = await rowsPrepared<{ roles: string[] | null; allowed: boolean }>(
    db,
    sql`select m.roles,
        coalesce((select bool_or(${permission ?? null}::text = any(r.permissions))
          from org_roles r where r.site = o.site and r.role = any(m.roles)), false) as allowed
      from orgs o
      left join org_memberships m on m.org_id = o.id and m.user_id = ${user}::uuid
        and exists (select 1 from users u where u.id = m.user_id and u.deleted_at is null)
      where o.id = ${orgId}::uuid and o.site = ${site}`,
  );
  if (row === undefined) throw orgNotFound();
  if (row.roles === null) return { member: false, roles: [], allowed: false };
  return { member: true, roles: row.roles, allowed: permission !== undefined && row.allowed === true };
}
