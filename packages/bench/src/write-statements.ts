// The statements ours sends for one `update` (a new name) and one `delete` (no grace period, the
// site's default of none), in order, as the wire counter (wire-count.ts) read them from ours:
// what the write floor (floor-write.ts) runs. The bench checks, before anything is timed, that ours
// sends these texts and no others in a request (write-path.ts): when ours changes its statements,
// this file follows, so that the floor stays the same transaction.

/** A statement's parameter: a named value of the request, or a constant. */
export type Param = 'userId' | 'name' | 'site' | 'tokenId' | 'requestId' | { value: string | number | null };

export interface Statement {
  text: string;
  params: readonly Param[];
  /** Run as a named prepared statement (ours' texts marked prepared, db/client.ts), else unnamed. */
  prepared: boolean;
  /** Before the transaction (ours reads the site's deletion grace before it begins). */
  outside?: boolean;
  /** Answers the row written: none means nothing to write (ours: 404), and the transaction ends. */
  found?: boolean;
}

/** update: the account row, then its audit row and its event in one statement. */
export const UPDATE_STATEMENTS: readonly Statement[] = [
  {
    text: 'update "users" set "name" = $1, "updated_at" = now() where ("users"."id" = $2 and ("users"."origin" = $3 and "users"."site" = $4 and "users"."deleted_at" is null)) returning "version", "metadata"',
    params: ['name', 'userId', { value: 'api' }, 'site'],
    prepared: true,
    found: true,
  },
  {
    text: "/* prepared */ with done as (insert into \"audit_log\" (\"id\", \"at\", \"site\", \"token_id\", \"operation\", \"user_id\", \"request_id\", \"status\", \"outcome\", \"impersonator\", \"provider\") values (default, default, $1, $2, $3, $4, $5, $6, $7, $8, $9)) insert into event_queue (site, type, subject, changed, data) select $10, $11, e.subject, $12, (select jsonb_build_object( '_userId', u.id, 'email', u.email, 'name', u.name, 'phone', u.phone, 'address', u.address, 'disabled', u.disabled, 'disabledUntil', to_char(u.disabled_until at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), 'disabledReason', u.disabled_reason, 'emailVerified', u.email_verified_at is not null, 'emailVerifiedAt', to_char(u.email_verified_at at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), 'phoneVerified', u.phone_verified_at is not null, 'phoneVerifiedAt', to_char(u.phone_verified_at at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), 'passwordBreached', u.password_breached, 'emailDeliverable', not exists (select 1 from messages m where m.site = u.site and m.user_id = \"u\".\"id\" and m.undeliverable and lower(m.recipient) = lower(\"u\".\"email\") and (\"u\".\"email_verified_at\" is null or m.created_at > \"u\".\"email_verified_at\")), 'metadata', u.metadata, 'identities', coalesce((select jsonb_agg(jsonb_build_object('provider', i.provider, 'subject', i.subject, 'email', i.email, 'emailVerified', i.email_verified, 'linkedAt', to_char(i.linked_at at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')) order by i.linked_at, i.id) from user_identities i where i.user_id = u.id), '[]'::jsonb), 'createdAt', to_char(u.created_at at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"'), 'updatedAt', to_char(u.updated_at at time zone 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.MS\"Z\"')) from users u where u.id = e.subject) from (select $13::uuid as subject) e",
    params: [
      'site',
      'tokenId',
      { value: 'update' },
      'userId',
      'requestId',
      { value: 200 },
      { value: 'user updated' },
      { value: null },
      { value: null },
      'site',
      { value: 'user.updated' },
      { value: 'name' },
      'userId',
    ],
    prepared: true,
  },
];

/** delete: the row locked with the site's grace read beside it, the sessions ended, the memberships removed, the row deleted, its audit row and its event. */
export const DELETE_STATEMENTS: readonly Statement[] = [
  {
    text: 'select "id", coalesce((select "deletion_grace_days" from "site_settings" where "site" = $1), 0) from "users" where ("users"."id" = $2 and ("users"."origin" = $3 and "users"."site" = $4 and "users"."deleted_at" is null)) for update',
    params: ['site', 'userId', { value: 'api' }, 'site'],
    prepared: true,
    found: true,
  },
  {
    text: 'update "sessions" set "revoked_at" = now(), "revoke_reason" = $1 where ("sessions"."user_id" = $2 and ("sessions"."revoked_at" is null and "sessions"."expires_at" > now() and "sessions"."last_seen_at" + make_interval(secs => "sessions"."idle_seconds") > now())) returning "id", "user_id", "aal", "amr", "expires_at"',
    params: [{ value: 'account_deleted' }, 'userId'],
    prepared: true,
  },
  {
    text: 'delete from "org_memberships" where "org_memberships"."user_id" = $1 returning "org_id", "roles"',
    params: ['userId'],
    prepared: true,
  },
  {
    text: 'delete from "users" where "users"."id" = $1 returning "id"',
    params: ['userId'],
    prepared: true,
  },
  {
    text: '/* prepared */ with done as (insert into "audit_log" ("id", "at", "site", "token_id", "operation", "user_id", "request_id", "status", "outcome", "impersonator", "provider") values (default, default, $1, $2, $3, $4, $5, $6, $7, $8, $9)) insert into event_queue (site, type, subject, changed, data) select $10, $11, e.subject, $12, jsonb_build_object(\'_userId\', e.subject, \'graceDays\', coalesce((select extract(day from u.purge_at - u.deleted_at)::int from users u where u.id = e.subject), 0)) from (select $13::uuid as subject) e',
    params: [
      'site',
      'tokenId',
      { value: 'delete' },
      'userId',
      'requestId',
      { value: 200 },
      { value: 'user removed' },
      { value: null },
      { value: null },
      'site',
      { value: 'user.deleted' },
      { value: null },
      'userId',
    ],
    prepared: true,
  },
];
