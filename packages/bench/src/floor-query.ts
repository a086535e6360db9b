// What both floors do for a get (floor.ts on Hono, floor-http.ts on node:http): one postgres.js
// query with the service's own pool settings, and JSON out. Only the framework around it differs
// between the two. That get (getAccount) is issue 33's light one, kept for the main report's
// continuity; getAccountAsOurs is ours' own (get_user_by_id's text, toUser's every field, the
// ETag), which the bare floor serves when started with FLOOR_GET=ours (the hot-path scenario,
// issue 47). The bare floor also answers the other two hot paths of issue 47, session/verify and
// org/member/check, with the queries ours runs (sessions/check.ts and orgs/check.ts: the same SQL
// text, each a prepared statement, the same row → JSON), and nothing else: no API token, site
// limits, validation beyond what the query needs, or logs.
import { createHash } from 'node:crypto';
import postgres from 'postgres';

const sql = postgres(process.env.DATABASE_URL!, {
  max: 10,
  max_pipeline: 1,
  onnotice: () => {},
} as Parameters<typeof postgres>[1]);

/** The site of the bench's API token: ours reads it from the token, the floor knows it. */
const SITE = 'default';

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

/**
 * The light get (issue 33's floor, floor.ts's and the main report's): 7 columns by id or email,
 * with no site, origin or deletion condition, no identities, and 7 fields out. Kept as it was so
 * that the main report's get-by-id against the floors stays comparable with issue 33's figures;
 * ours' own get is getAccountAsOurs.
 */
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
 * get_user_by_id's text exactly as drizzle renders it (http/routes/get-user.ts: the columns of
 * `users` its answer needs, the account's identities as accounts/linked-identities.ts's identitiesJson, in reach as
 * kernel/in-reach.ts says), rendered by drizzle's own toSQL() on the same builder calls. Its
 * four parameters are ours' too: the id, 'api', the site, and the limit 1.
 */
const GET_USER_BY_ID = `select "id", "email", "name", "phone", "address", "disabled", "disabled_until", "disabled_reason", "email_verified_at", "phone_verified_at", "password_breached", not exists (select 1 from messages m where m.site = $3 and m.user_id = "users"."id"
    and m.undeliverable and lower(m.recipient) = lower("users"."email")
    and ("users"."email_verified_at" is null or m.created_at > "users"."email_verified_at")) as email_deliverable, "metadata", "created_at", "updated_at", "version", coalesce((select jsonb_agg(jsonb_build_object('provider', i.provider, 'subject', i.subject,
      'email', i.email, 'emailVerified', i.email_verified, 'linkedAt', to_char(i.linked_at at time zone 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"'))
      order by i.linked_at, i.id)
    from user_identities i where i.user_id = "users"."id"), '[]'::jsonb) from "users" where ("users"."id" = $1 and ("users"."origin" = $2 and "users"."site" = $3 and "users"."deleted_at" is null)) limit $4`;

const iso = (at: Date | null) => at?.toISOString() ?? null;

/**
 * get-by-id's answer as ours gives it (the JSON and the ETag), or undefined when there is none
 * (ours: 404 user_not_found, also for an id that is not a UUID). The same statement as ours, run
 * as ours runs it (postgres.js's unsafe with prepare on: one prepared statement per connection),
 * and the row → JSON of accounts/to-user.ts, field by field.
 */
export async function getAccountAsOurs(id: string) {
  if (!UUID.test(id)) return undefined;
  const [row] = await sql.unsafe(GET_USER_BY_ID, [id, 'api', SITE, 1], { prepare: true });
  if (row === undefined) return undefined;
  const identities = typeof row.coalesce === 'string' ? JSON.parse(row.coalesce) : (row.coalesce ?? []);
  return {
    etag: `"${row.version}"`,
    body: {
      result: {
        _userId: row.id,
        email: row.email,
        name: row.name,
        phone: row.phone,
        address: row.address,
        disabled: row.disabled,
        disabledUntil: iso(row.disabled_until),
        disabledReason: row.disabled_reason,
        emailVerified: row.email_verified_at !== null,
        emailVerifiedAt: iso(row.email_verified_at),
        phoneVerified: row.phone_verified_at !== null,
        phoneVerifiedAt: iso(row.phone_verified_at),
        passwordBreached: row.password_breached,
        emailDeliverable: row.email_deliverable,
        metadata: row.metadata,
        identities,
        createdAt: row.created_at.toISOString(),
        updatedAt: row.updated_at.toISOString(),
      },
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

/**
 * org/member/check's statement as drizzle renders it (orgs/check.ts, `org_member_check`, rendered
 * by drizzle's own toSQL() on the same builder calls): the organization, the membership (its
 * account not deleted) and the roles the member holds, three primary-key lookups. Its four
 * parameters are ours' too: the permission (or null), the user, the organization and the site.
 */
const ORG_MEMBER_CHECK = `select "org_memberships"."roles", (select u.disabled from users u where u.id = "org_memberships"."user_id"), coalesce((select bool_or($1::text = any(r.permissions))
          from org_roles r where r.site = "orgs"."site" and r.role = any("org_memberships"."roles")), false) from "orgs" left join "org_memberships" on ("org_memberships"."org_id" = "orgs"."id" and "org_memberships"."user_id" = $2 and exists (select 1 from users u where u.id = "org_memberships"."user_id" and u.deleted_at is null)) where ("orgs"."id" = $3 and "orgs"."site" = $4)`;

/**
 * org/member/check's answer as ours gives it, or undefined when the site has no such organization
 * (ours: 404 org_not_found): ours' statement, run as ours runs it (one prepared statement per connection).
 */
export async function checkMember(orgId: string, userId: string, permission: string | undefined) {
  if (!UUID.test(orgId)) return undefined;
  const user = UUID.test(userId) ? userId : '00000000-0000-0000-0000-000000000000';
  const [row] = await sql.unsafe(ORG_MEMBER_CHECK, [permission ?? null, user, orgId, SITE], { prepare: true });
  if (row === undefined) return undefined;
  if (row.roles === null) return { result: { member: false, roles: [], allowed: false, reason: 'not_member' } };
  const reason = row.disabled
    ? 'account_disabled'
    : permission === undefined
      ? 'no_permission_asked'
      : row.coalesce === true
        ? null
        : 'permission_not_granted';
  return { result: { member: true, roles: row.roles, allowed: reason === null, reason } };
}
