// What both floors do for a get (floor.ts on Hono, floor-http.ts on node:http): one postgres.js
// query with the service's own pool settings, and the same JSON out. Only the framework around
// it differs between the two. The bare floor also answers the other two hot paths of issue 47,
// session/verify and org/member/check, with the queries ours runs (sessions/check.ts and
// orgs/check.ts: the same SQL text, each a prepared statement, the same row → JSON), and nothing
// else: no API token, site limits, validation beyond what the query needs, or logs.
import { createHash } from 'node:crypto';
import postgres from 'postgres';

const sql = postgres(process.env.DATABASE_URL!, {
  max: 10,
  max_pipeline: 1,
  onnotice: () => {},
} as Parameters<typeof postgres>[1]);

/** The site of the bench's API token: ours reads it from the token, the floor knows it. */
const SITE = 'default';

/** The account's answer as get gives it, or undefined when there is none. */
export async function getAccount(id: string | undefined, email: string | undefined) {
  const rows = id
    ? await sql`select id, email, name, phone, address, created_at, updated_at from users where id = ${id}`
    : await sql`select id, email, name, phone, address, created_at, updated_at from users where site = 'default' and lower(email) = lower(${email!})`;
  const row = rows[0];
  if (!row) return undefined;
  return {
    result: {
      _userId: row.id,
      email: row.email,
      name: row.name,
      phone: row.phone,
      address: row.address,
      createdAt: row.created_at.toISOString(),
      updatedAt: row.updated_at.toISOString(),
    },
  };
}

/**
 * session/verify's answer as ours gives it, or undefined for every miss (ours: 422 invalid_session).
 * The statement is check_session's text as drizzle renders it (sessions/check.ts): one read by the
 * token hash's unique index; like ours, the once-a-minute `lastSeenAt` write only when the row is
 * stale (never in the bench, which marks its sessions seen before each round).
 */
export async function verifySession(token: string) {
  const hash = createHash('sha256').update(token).digest('base64url');
  const [row] =
    await sql`select "id", "user_id", "created_at", "last_seen_at", "expires_at", "idle_seconds", "aal", "amr", "impersonator", ("site" = ${SITE} and ("sessions"."revoked_at" is null and "sessions"."expires_at" > now()
  and "sessions"."last_seen_at" + make_interval(secs => "sessions"."idle_seconds") > now())) as "live", "last_seen_at" < now() - interval '60 seconds' as "stale" from "sessions" where "sessions"."token_hash" = ${hash}`;
  if (row === undefined || !row.live) return undefined;
  let lastSeenAt: Date = row.last_seen_at;
  if (row.stale) {
    const [moved] =
      await sql`update "sessions" set "last_seen_at" = now() where ("sessions"."id" = ${row.id} and "sessions"."last_seen_at" < now() - interval '60 seconds') returning "last_seen_at"`;
    if (moved !== undefined) lastSeenAt = moved.last_seen_at;
  }
  const idleExpiresAt = new Date(
    Math.min(lastSeenAt.getTime() + row.idle_seconds * 1000, (row.expires_at as Date).getTime()),
  );
  return {
    result: {
      sessionId: row.id,
      _userId: row.user_id,
      createdAt: row.created_at.toISOString(),
      expiresAt: row.expires_at.toISOString(),
      idleExpiresAt: idleExpiresAt.toISOString(),
      aal: row.aal,
      amr: row.amr,
      ...(row.impersonator !== null && { impersonator: row.impersonator }),
      status: 'session valid',
    },
  };
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * org/member/check's answer as ours gives it, or undefined when the site has no such organization
 * (ours: 404 org_not_found). orgs/check.ts's one statement: the organization, the membership (its
 * account not deleted) and the roles the member holds, three primary-key lookups.
 */
export async function checkMember(orgId: string, userId: string, permission: string | undefined) {
  if (!UUID.test(orgId)) return undefined;
  const user = UUID.test(userId) ? userId : '00000000-0000-0000-0000-000000000000';
  const [row] = await sql`select m.roles,
        coalesce((select bool_or(${permission ?? null}::text = any(r.permissions))
          from org_roles r where r.site = o.site and r.role = any(m.roles)), false) as allowed
      from orgs o
      left join org_memberships m on m.org_id = o.id and m.user_id = ${user}::uuid
        and exists (select 1 from users u where u.id = m.user_id and u.deleted_at is null)
      where o.id = ${orgId}::uuid and o.site = ${SITE}`;
  if (row === undefined) return undefined;
  if (row.roles === null) return { result: { member: false, roles: [], allowed: false } };
  return { result: { member: true, roles: row.roles, allowed: permission !== undefined && row.allowed === true } };
}
