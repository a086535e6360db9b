// The site's roles (issue 45, point 2): one set for all its organizations, replaced whole. A role
// is never assumed: every role a membership or an invitation names is checked against the set, and
// held (FOR KEY SHARE) until the write commits, so that a concurrent org/roles cannot take it
// away between the check and the commit; org/roles refuses to drop a role still held or given.
import { and, asc, eq, inArray, sql } from 'drizzle-orm';
import { type Db, rows } from '../db/client.ts';
import { orgRoles } from '../db/schema.ts';
import { ApiError, invalidRequest } from '../errors.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { unknownRoles } from './rules.ts';

export interface Role {
  role: string;
  permissions: string[];
}

/** The site's roles in the order org/roles gave them. */
export async function rolesOf(db: Db, site: string): Promise<Role[]> {
  const found = await db
    .select({ role: orgRoles.role, permissions: orgRoles.permissions })
    .from(orgRoles)
    .where(eq(orgRoles.site, site))
    .orderBy(asc(orgRoles.position));
  return found;
}

/**
 * 400 at `pointer/N` for each role of `roles` the site has not defined; the others are held
 * (FOR KEY SHARE) until the caller's transaction ends, so that org/roles waits for it.
 */
export async function holdRoles(tx: Db, site: string, roles: readonly string[], pointer = '/roles'): Promise<void> {
  if (roles.length === 0) return;
  const found = await tx
    .select({ role: orgRoles.role })
    .from(orgRoles)
    .where(and(eq(orgRoles.site, site), inArray(orgRoles.role, [...roles])))
    .for('key share');
  const known = new Set(found.map((r) => r.role));
  const missing = roles.flatMap((role, i) => (known.has(role) ? [] : [i]));
  if (missing.length > 0) throw unknownRoles(pointer, missing);
}

/** 400 at the second of two roles of one name (the schema cannot say it of objects' members). */
export function checkRoleSet(roles: readonly Role[]): void {
  const seen = new Set<string>();
  roles.forEach(({ role }, i) => {
    if (seen.has(role)) {
      throw invalidRequest('A role is named twice.', [
        { pointer: `/roles/${i}/role`, code: 'not_allowed', message: 'is named twice' },
      ]);
    }
    seen.add(role);
  });
}

const roleInUse = (held: string[]) =>
  new ApiError('role_in_use', 'A role left out of the new set is still held or given; nothing changed.', {
    errors: [
      {
        pointer: '/roles',
        code: 'conflict',
        message: `leaves out ${held.join(', ')}, which members hold or pending invitations give`.slice(0, 200),
      },
    ],
  });

/**
 * The roles of `removed` that a membership of the site holds or a pending (unexpired) invitation
 * gives: one look per role in the site's GIN indexes, which find a holder, or that there is none,
 * at once, rather than a scan of every membership (85 ms over 200,000 under the site's lock:
 * issue 57, G1).
 */
async function rolesHeld(db: Db, site: string, removed: readonly string[]): Promise<string[]> {
  const list = sql`array[${sql.join(
    removed.map((r) => sql`${r}`),
    sql`, `,
  )}]::text[]`;
  // site_roles(site, roles) is what the GIN indexes hold (migration 0036): each role under its site.
  const held = await rows<{ role: string }>(
    db,
    sql`select r as role from unnest(${list}) as r
        where exists (select 1 from org_memberships m
            where site_roles(m.site, m.roles) @> array[${site} || E'\x1f' || r] and m.site = ${site})
           or exists (select 1 from org_invitations i
            where site_roles(i.site, i.roles) @> array[${site} || E'\x1f' || r] and i.site = ${site}
              and i.expires_at > now())
        order by 1`,
  );
  return held.map((h) => h.role);
}

/** The roles of the site's set that `roles` leaves out. */
async function leftOut(db: Db, site: string, roles: readonly Role[]): Promise<string[]> {
  const before = await db.select({ role: orgRoles.role }).from(orgRoles).where(eq(orgRoles.site, site));
  const kept = new Set(roles.map((r) => r.role));
  return before.map((r) => r.role).filter((role) => !kept.has(role));
}

/**
 * Replaces the site's role set (org/roles): one set at a time per site (an advisory lock of the
 * transaction); a role left out that a membership holds or a pending invitation gives: 409
 * role_in_use and nothing changes. A set that would be refused is refused before the lock is
 * taken, so that a flood of them never queues on it (nor the site's other sets behind them).
 */
export async function setRoles(scope: WriteScope, deps: WriteDeps, roles: Role[]): Promise<void> {
  const done = { userId: undefined, status: 200, outcome: 'roles set' };
  await inWrite(scope, deps, 'org_roles', done, async (tx) => {
    const early = await leftOut(tx, scope.site, roles);
    if (early.length > 0) {
      const held = await rolesHeld(tx, scope.site, early);
      if (held.length > 0) throw roleInUse(held);
    }
    await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${`org_roles:${scope.site}`}, 0))`);
    const removed = await leftOut(tx, scope.site, roles);
    if (removed.length > 0) {
      // Deleted first: a write holding one of them (holdRoles) is waited for, and seen after.
      await tx.delete(orgRoles).where(and(eq(orgRoles.site, scope.site), inArray(orgRoles.role, removed)));
      const list = sql`array[${sql.join(
        removed.map((r) => sql`${r}`),
        sql`, `,
      )}]::text[]`;
      // An expired invitation is no longer given (not listed, not revocable, not acceptable):
      // one that names a role left out goes now, rather than hold the role for ever.
      await tx.execute(
        sql`delete from org_invitations where site = ${scope.site} and expires_at <= now() and roles && ${list}`,
      );
      const held = await rolesHeld(tx, scope.site, removed);
      if (held.length > 0) throw roleInUse(held);
    }
    if (roles.length > 0) {
      await tx
        .insert(orgRoles)
        .values(roles.map(({ role, permissions }, position) => ({ site: scope.site, role, permissions, position })))
        .onConflictDoUpdate({
          target: [orgRoles.site, orgRoles.role],
          set: { permissions: sql`excluded.permissions`, position: sql`excluded.position` },
        });
    }
    return true;
  });
}
