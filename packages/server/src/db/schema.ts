import { sql } from 'drizzle-orm';
import {
  bigint,
  boolean,
  check,
  index,
  integer,
  jsonb,
  pgTable,
  primaryKey,
  smallint,
  text,
  timestamp,
  uniqueIndex,
  uuid,
} from 'drizzle-orm/pg-core';

const at = (name: string) => timestamp(name, { withTimezone: true, precision: 3 });

/** The site every account and token belongs to when nothing else is said. */
export const DEFAULT_SITE = 'default';

/**
 * Accounts. `origin` records how a row came to be; its default is 'external', so a row written by
 * anyone but this service (the site's own sign-up, another system's import, a manual INSERT)
 * stays out of reach of the API unless its writer says otherwise, and no operation shows it
 * (kernel/in-reach.ts). `version` backs the ETag: a trigger (migration
 * 0002) bumps it on every UPDATE, whoever the writer.
 */
export const users = pgTable(
  'users',
  {
    id: uuid('id').primaryKey().default(sql`gen_random_uuid()`),
    site: text('site').notNull().default(DEFAULT_SITE),
    email: text('email').notNull(),
    name: text('name').notNull(),
    phone: text('phone'),
    address: text('address'),
    passwordHash: text('password_hash'),
    /** When the email, as it is now, was last said verified (issue 28, point 2); null: not verified. */
    emailVerifiedAt: at('email_verified_at'),
    /** When the phone, as it is now, was last said verified; null: not verified (always, without a phone). */
    phoneVerifiedAt: at('phone_verified_at'),
    /**
     * A verify with the right password found it in the breach corpus (issue 30, point 4;
     * passwords/screening.ts); false again once the password changes.
     */
    passwordBreached: boolean('password_breached').notNull().default(false),
    /**
     * The password was set before anyone proved the inbox, and the account has since been entered
     * through its inbox (a login link or code redeemed while the email was unverified; issue 57,
     * G5): it no longer signs in by itself (verify answers 403 password_reset_required) until a
     * password is set again (update, a reset_password ticket, import).
     */
    passwordUnproven: boolean('password_unproven').notNull().default(false),
    /** A disabled account can be read, changed and deleted, but its password is never verified. */
    disabled: boolean('disabled').notNull().default(false),
    /** A timed suspension's end (issue 30, point 2): housekeeping enables the account then; null: no end. */
    disabledUntil: at('disabled_until'),
    /** Why the account is disabled, for the site's operators only (never the end user); null: none given. */
    disabledReason: text('disabled_reason'),
    /**
     * Deleted with a grace period (issue 30, point 1): out of reach of every operation but restore
     * (kernel/in-reach.ts) until `purgeAt`, when housekeeping purges it; null: not deleted.
     */
    deletedAt: at('deleted_at'),
    purgeAt: at('purge_at'),
    /** The site's own JSON object on the account (accounts/metadata.ts); `{}` when none. */
    metadata: jsonb('metadata').$type<Record<string, unknown>>().notNull().default({}),
    origin: text('origin').notNull().default('external'),
    version: integer('version').notNull().default(1),
    createdAt: at('created_at').notNull().defaultNow(),
    updatedAt: at('updated_at').notNull().defaultNow(),
  },
  (t) => [
    // Emails are unique per site ignoring case among the API's accounts, and among the other rows
    // between themselves: a row out of reach never stands in the way of an account of the API
    // (it would show through create's 409), nor the API's in the way of another writer's row.
    uniqueIndex('users_site_email_origin_key').on(t.site, sql`lower(${t.email})`, t.origin),
    // list and count (only rows in reach): pages in creation order, emails by prefix and by domain.
    index('users_list_created_idx').on(t.site, t.createdAt, t.id).where(sql`${t.origin} = 'api'`),
    index('users_list_email_prefix_idx')
      .on(t.site, sql`lower(${t.email}) text_pattern_ops`)
      .where(sql`${t.origin} = 'api'`),
    index('users_list_email_domain_idx')
      .on(t.site, sql`regexp_replace(lower(${t.email}), '^.*@', '')`)
      .where(sql`${t.origin} = 'api'`),
    // list's `search` (accounts/listing.ts's searchCondition, issue 64): a name's start, a word of
    // it whole, and a phone's last digits (reversed, so that a prefix reads them). Keep these
    // expressions as they are there: PostgreSQL matches an index by its expression's text.
    index('users_list_name_prefix_idx')
      .on(t.site, sql`lower(${t.name}) text_pattern_ops`)
      .where(sql`${t.origin} = 'api'`),
    index('users_list_name_words_idx')
      .using('gin', sql`regexp_split_to_array(lower(${t.name}), '[[:space:]]+')`)
      .where(sql`${t.origin} = 'api'`),
    index('users_list_phone_digits_idx')
      .on(t.site, sql`reverse(regexp_replace(${t.phone}, '[^0-9]', '', 'g')) text_pattern_ops`)
      .where(sql`${t.origin} = 'api'`),
    // list and count's metadata filter: jsonb_path_ops answers containment only, in an index a
    // third the size of the default operator class's. The metadata under the site's name
    // (`{"<site>": metadata}`, accounts/metadata.ts's siteMetadataContains): each entry, and the
    // planner's statistics of the expression, are one site's (issue 41, F7; it replaces
    // users_metadata_idx on the metadata alone, whose entries and statistics spanned every site).
    // Not partial (unlike the others): PostgreSQL weighs a filter by an expression's statistics
    // only when its index covers the whole table.
    index('users_metadata_site_idx').using(
      'gin',
      sql`jsonb_set('{}'::jsonb, array[${t.site}], ${t.metadata}) jsonb_path_ops`,
    ),
    // Housekeeping's search for suspensions due (ops/housekeeping.ts): only timed ones are in it.
    index('users_disabled_until_idx').on(t.disabledUntil).where(sql`${t.disabledUntil} is not null`),
    // Housekeeping's search for grace periods over: only accounts in grace are in it.
    index('users_purge_at_idx').on(t.purgeAt).where(sql`${t.purgeAt} is not null`),
    check('users_grace_check', sql`(${t.deletedAt} is null) = (${t.purgeAt} is null)`),
    check('users_origin_check', sql`${t.origin} in ('api', 'external')`),
    // A verified phone is a phone: clearing it unverifies it, and no write can verify none.
    check('users_phone_verified_check', sql`${t.phoneVerifiedAt} is null or ${t.phone} is not null`),
  ],
);

/**
 * Single-use tickets (accounts/tickets.ts): a SHA-256 of each secret, never the secret. A use
 * deletes the row; so does a change the ticket stood on, and the account's deletion (cascade).
 */
export const tickets = pgTable(
  'tickets',
  {
    id: uuid('id').primaryKey().default(sql`gen_random_uuid()`),
    site: text('site').notNull(),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    /** The API's purposes; a login ticket is `login` (a link's) or `login_code` (6 digits, as verify_phone's). */
    purpose: text('purpose').notNull(),
    secretHash: text('secret_hash').notNull(),
    /** change_email: the email the account will have. */
    newEmail: text('new_email'),
    /** verify_phone, login_code: wrong codes so far (the fifth burns it). */
    tries: smallint('tries').notNull().default(0),
    expiresAt: at('expires_at').notNull(),
    createdAt: at('created_at').notNull().defaultNow(),
  },
  (t) => [
    index('tickets_secret_hash_idx').on(t.secretHash),
    // An account's tickets by purpose: a phone code's lookup, and the tickets a change ends.
    index('tickets_user_purpose_idx').on(t.userId, t.purpose),
    index('tickets_expires_at_idx').on(t.expiresAt),
    check(
      'tickets_purpose_check',
      sql`${t.purpose} in ('verify_email', 'verify_phone', 'reset_password', 'change_email', 'login', 'login_code')`,
    ),
  ],
);

/** A site's settings (cli site set); a site without a row has every default. */
export const siteSettings = pgTable('site_settings', {
  site: text('site').primaryKey(),
  /** Days a delete keeps the account restorable when the request gives no graceDays (0: none). */
  deletionGraceDays: smallint('deletion_grace_days').notNull().default(0),
  /**
   * The site's WebAuthn relying party (cli site set --rp-id --origins): passkeys need it. The RP
   * id is a domain (`example.com`, `localhost`); the origins are the pages that may use it.
   */
  rpId: text('rp_id'),
  rpName: text('rp_name'),
  rpOrigins: jsonb('rp_origins').$type<string[]>(),
  /** Session lifetimes (cli site set; issue 43): absolute and idle, in seconds; null: the defaults. */
  sessionLifetimeSeconds: integer('session_lifetime_seconds'),
  sessionIdleSeconds: integer('session_idle_seconds'),
  /** What people see for the site (cli site set --display-name; issue 46): authenticator apps' issuer. */
  displayName: text('display_name'),
});

/** A site's JSON Schema for its accounts' metadata (cli metadata-schema; accounts/metadata.ts). */
export const metadataSchemas = pgTable('metadata_schemas', {
  site: text('site').primaryKey(),
  schema: jsonb('schema').notNull(),
  updatedAt: at('updated_at').notNull().defaultNow(),
});

/** API tokens, stored only as SHA-256; the plain token exists only in the caller's hands. */
export const apiTokens = pgTable(
  'api_tokens',
  {
    id: uuid('id').primaryKey().default(sql`gen_random_uuid()`),
    tokenHash: text('token_hash').notNull(),
    prefix: text('prefix').notNull(),
    label: text('label').notNull(),
    site: text('site').notNull().default(DEFAULT_SITE),
    scopes: text('scopes').array().notNull().default(sql`'{read,write}'::text[]`),
    createdAt: at('created_at').notNull().defaultNow(),
    expiresAt: at('expires_at'),
    revokedAt: at('revoked_at'),
    lastUsedAt: at('last_used_at'),
  },
  (t) => [
    uniqueIndex('api_tokens_token_hash_key').on(t.tokenHash),
    index('api_tokens_created_at_idx').on(t.createdAt),
    check(
      'api_tokens_scopes_check',
      sql`${t.scopes} <@ array['read', 'write', 'verify', 'export', 'events', 'impersonate']::text[]`,
    ),
  ],
);

/**
 * Rate-limit windows, one row per token and policy: a fixed window that starts at the first
 * request after the previous one ended. UNLOGGED (migration 0002): counters are not worth a WAL
 * flush per request, and losing them in a crash only restarts the windows.
 */
export const rateLimits = pgTable('rate_limits', {
  key: text('key').primaryKey(),
  windowStart: at('window_start').notNull(),
  windowSeconds: integer('window_seconds').notNull(),
  count: integer('count').notNull(),
});

/**
 * Idempotency keys, per token. A row with no `status` is a request still running; its lease
 * (`lockedUntil`) lets a retry take over from a process that died mid-request.
 */
export const idempotencyKeys = pgTable(
  'idempotency_keys',
  {
    tokenId: text('token_id').notNull(),
    key: text('key').notNull(),
    fingerprint: text('fingerprint').notNull(),
    status: smallint('status'),
    body: text('body'),
    headers: jsonb('headers').$type<Record<string, string>>(),
    createdAt: at('created_at').notNull().defaultNow(),
    lockedUntil: at('locked_until'),
  },
  (t) => [primaryKey({ columns: [t.tokenId, t.key] }), index('idempotency_keys_created_at_idx').on(t.createdAt)],
);

/** One row per write request: who, what, which account, how it ended. No personal data, no secrets. */
export const auditLog = pgTable(
  'audit_log',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    at: at('at').notNull().defaultNow(),
    site: text('site').notNull(),
    tokenId: text('token_id').notNull(),
    operation: text('operation').notNull(),
    userId: text('user_id'),
    requestId: text('request_id').notNull(),
    status: smallint('status').notNull(),
    outcome: text('outcome').notNull(),
    /** session_impersonate: who impersonated the account and why (issue 43, point 7). */
    impersonator: jsonb('impersonator').$type<{ actor: string; reason: string }>(),
    /** provider/callback's rows: the provider's name as configured (issue 59, point 4); never a code, token or state. */
    provider: text('provider'),
  },
  (t) => [
    index('audit_log_at_idx').on(t.at),
    index('audit_log_site_at_idx').on(t.site, t.at),
    // GET /api/1/audit: one account's rows, newest first, without reading the rest of its site's.
    index('audit_log_site_user_idx').on(t.site, t.userId, t.id),
  ],
);

/**
 * Failed password checks, counted per site and account identifier as the caller gave it (and per
 * end-user address), whether or not an account has it, so that the lockout itself tells nothing.
 * `key` is a SHA-256 of the site and identifier: no email or address is stored in plain text.
 */
export const verifyFailures = pgTable(
  'verify_failures',
  {
    key: text('key').primaryKey(),
    failures: integer('failures').notNull(),
    windowStart: at('window_start').notNull(),
    lockedUntil: at('locked_until'),
  },
  (t) => [index('verify_failures_window_start_idx').on(t.windowStart)],
);

/**
 * Second factors (issue 29): a TOTP secret sealed at rest (kernel/secret-box.ts: AES-256-GCM
 * under FACTOR_ENCRYPTION_KEY, the row's id as additional data), pending until a code confirms it.
 * `lastStep`: the last TOTP time step accepted, so that a code counts once (a conditional UPDATE).
 */
export const userFactors = pgTable(
  'user_factors',
  {
    id: uuid('id').primaryKey(),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    type: text('type').notNull(),
    label: text('label'),
    /** TOTP: the sealed secret. A passkey has none (its public key is no secret). */
    secret: text('secret'),
    enabledAt: at('enabled_at'),
    lastStep: bigint('last_step', { mode: 'number' }),
    createdAt: at('created_at').notNull().defaultNow(),
    lastUsedAt: at('last_used_at'),
    /**
     * Passkey: the account's site (issue 57, G8: a credential id is unique per site, not per
     * deployment, so that another site's registrations tell nothing of this one's accounts); null
     * for a TOTP factor.
     */
    site: text('site'),
    /** Passkey: the credential's id (base64url), its COSE public key (base64url), its signature counter. */
    credentialId: text('credential_id'),
    publicKey: text('public_key'),
    signCount: bigint('sign_count', { mode: 'number' }),
    transports: jsonb('transports').$type<string[]>(),
  },
  (t) => [
    index('user_factors_user_idx').on(t.userId, t.id),
    // A login's lookup of the credential its answer names, within the site.
    uniqueIndex('user_factors_site_credential_idx').on(t.site, t.credentialId),
    check('user_factors_type_check', sql`${t.type} in ('totp', 'passkey')`),
    check(
      'user_factors_shape_check',
      sql`(${t.type} = 'totp' and ${t.secret} is not null) or (${t.type} = 'passkey' and ${t.credentialId} is not null and ${t.publicKey} is not null)`,
    ),
    check('user_factors_passkey_site_check', sql`${t.type} <> 'passkey' or ${t.site} is not null`),
  ],
);

/**
 * WebAuthn challenges handed out and not yet answered (factors/passkeys.ts), as SHA-256: each is
 * taken (deleted) by the first answer that names it, right or wrong, so it is good once; bound to
 * the site, the purpose and (registration, a login for a named account) the account. `userId` has
 * no foreign key: a login for an unknown email binds a random id that names no account.
 */
export const passkeyChallenges = pgTable(
  'passkey_challenges',
  {
    challengeHash: text('challenge_hash').primaryKey(),
    site: text('site').notNull(),
    purpose: text('purpose').notNull(),
    userId: uuid('user_id'),
    expiresAt: at('expires_at').notNull(),
  },
  (t) => [
    index('passkey_challenges_site_idx').on(t.site, t.expiresAt),
    check('passkey_challenges_purpose_check', sql`${t.purpose} in ('register', 'login')`),
  ],
);

/** Recovery codes, as SHA-256 of the normalized code (each 120 random bits); `usedAt` set once. */
export const recoveryCodes = pgTable(
  'recovery_codes',
  {
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    codeHash: text('code_hash').notNull(),
    usedAt: at('used_at'),
  },
  (t) => [primaryKey({ columns: [t.userId, t.codeHash] })],
);

/** Keys the servers of a deployment share, made once by the first that needs one (list's cursors). */
export const serviceKeys = pgTable('service_keys', {
  name: text('name').primaryKey(),
  key: text('key').notNull(),
});

/**
 * Each site's last event sequence number, taken by the sequencer under the site's advisory lock
 * (events/sequencer.ts). `prunedThrough`: events up to it were removed by the retention (410 for
 * a reader behind it).
 */
export const eventSequences = pgTable('event_sequences', {
  site: text('site').primaryKey(),
  last: bigint('last', { mode: 'number' }).notNull(),
  prunedThrough: bigint('pruned_through', { mode: 'number' }).notNull().default(0),
});

/** The columns of an event as a write queues it; `events` has them too, once numbered. */
const eventColumns = {
  /** The CloudEvents id; random, so unique without an index of its own (each index costs every write). */
  id: uuid('id').notNull().default(sql`gen_random_uuid()`),
  site: text('site').notNull(),
  type: text('type').notNull(),
  subject: uuid('subject').notNull(),
  time: at('time').notNull().defaultNow(),
  /** user.updated: the fields the request set, comma-separated. */
  changed: text('changed'),
  data: jsonb('data').notNull(),
  /**
   * The W3C traceparent of the write's span when tracing is on (set for its transaction by
   * inWrite, kernel/unit-of-work.ts), sent on with each webhook delivery of the event; null otherwise.
   */
  traceparent: text('traceparent').default(sql`nullif(current_setting('user_accounts.traceparent', true), '')`),
};

/**
 * The outbox: each committed change of an account, queued in the change's transaction, until the
 * sequencer moves it into `events` with its number (events/queue.ts). It holds only the events
 * not numbered yet.
 */
export const eventQueue = pgTable(
  'event_queue',
  {
    /** Queue order: the sequencer numbers a site's events in it. */
    pos: bigint('pos', { mode: 'number' }).notNull().generatedAlwaysAsIdentity(),
    ...eventColumns,
  },
  (t) => [primaryKey({ columns: [t.site, t.pos] })],
);

/** The numbered events, `seq` dense per site above its pruned_through: what the feed and webhooks read. */
export const events = pgTable(
  'events',
  {
    ...eventColumns,
    seq: bigint('seq', { mode: 'number' }).notNull(),
    id: uuid('id').notNull(),
    time: at('time').notNull(),
    traceparent: text('traceparent'),
  },
  (t) => [
    primaryKey({ columns: [t.site, t.seq] }),
    // GET /api/1/events?subject=: one account's events in order, without walking its site's others.
    index('events_site_subject_idx').on(t.site, t.subject, t.seq),
  ],
);

/** A site's webhook endpoint. `fannedSeq`: the site's events up to it have their deliveries. */
export const webhookEndpoints = pgTable('webhook_endpoints', {
  id: uuid('id').primaryKey().default(sql`gen_random_uuid()`),
  site: text('site').notNull(),
  url: text('url').notNull(),
  /** Event types sent: exact (`user.deleted`) or a prefix (`user.*`), `*` for all. */
  types: text('types').array().notNull(),
  /** The signing secret, `whsec_` and base64: needed in the clear to sign. */
  secret: text('secret').notNull(),
  fannedSeq: bigint('fanned_seq', { mode: 'number' }).notNull(),
  createdAt: at('created_at').notNull().defaultNow(),
  /** Since when every attempt failed; null after a success. */
  failingSince: at('failing_since'),
  disabledAt: at('disabled_at'),
  disabledReason: text('disabled_reason'),
});

/** One event to one endpoint: pending until a 2xx, retried with backoff, given up 3 days after its first attempt. */
export const webhookDeliveries = pgTable(
  'webhook_deliveries',
  {
    id: bigint('id', { mode: 'number' }).primaryKey().generatedAlwaysAsIdentity(),
    endpointId: uuid('endpoint_id')
      .notNull()
      .references(() => webhookEndpoints.id, { onDelete: 'cascade' }),
    site: text('site').notNull(),
    seq: bigint('seq', { mode: 'number' }).notNull(),
    subject: uuid('subject').notNull(),
    type: text('type').notNull(),
    state: text('state').notNull().default('pending'),
    attempts: integer('attempts').notNull().default(0),
    nextAttemptAt: at('next_attempt_at').notNull().defaultNow(),
    /** A server sending it holds it until then; past it (the server died), another may. */
    leasedUntil: at('leased_until'),
    lastStatus: smallint('last_status'),
    lastError: text('last_error'),
    createdAt: at('created_at').notNull().defaultNow(),
    /** Set by its first claim: the 3 days of retries count from here, not from a wait behind an earlier delivery. */
    firstAttemptAt: at('first_attempt_at'),
    deliveredAt: at('delivered_at'),
  },
  (t) => [
    // An endpoint's due deliveries, oldest first: the claim takes a few of each endpoint in turn (worker.ts).
    index('webhook_deliveries_endpoint_due_idx')
      .on(t.endpointId, t.nextAttemptAt, t.id)
      .where(sql`${t.state} = 'pending'`),
    // The deliveries being sent (or leased by a server that died): an endpoint's in flight, counted at each claim.
    index('webhook_deliveries_leased_idx')
      .on(t.endpointId, t.leasedUntil)
      .where(sql`${t.state} = 'pending' and ${t.leasedUntil} is not null`),
    // The earlier pending delivery of the same account to the same endpoint, which a later one waits for.
    index('webhook_deliveries_order_idx').on(t.endpointId, t.subject, t.seq).where(sql`${t.state} = 'pending'`),
    index('webhook_deliveries_created_idx').on(t.createdAt),
    // An endpoint's deliveries newest first, a page at a time (GET /api/1/webhooks/deliveries), and
    // the cascade when an endpoint is removed: without it both read every site's deliveries.
    index('webhook_deliveries_endpoint_idx').on(t.endpointId, t.id),
    check('webhook_deliveries_state_check', sql`${t.state} in ('pending', 'delivered', 'failed')`),
  ],
);

export const schema = {
  users,
  metadataSchemas,
  siteSettings,
  tickets,
  apiTokens,
  rateLimits,
  idempotencyKeys,
  auditLog,
  verifyFailures,
  userFactors,
  recoveryCodes,
  serviceKeys,
  eventSequences,
  eventQueue,
  events,
  webhookEndpoints,
  webhookDeliveries,
};

/**
 * Sessions (issue 43): issued by a completed login (verify, factor/verify, passkey/verify) or an
 * impersonation. The token is 256 random bits with a prefix; only its SHA-256 (`tokenHash`) is
 * kept. A refresh replaces it: the replaced token's hash moves to `previousTokenHash` with
 * `rotatedAt`, and joins every replaced one in `session_replaced_tokens`, so a replaced token
 * presented within the grace window gets the same successor, and one presented later revokes the
 * session (sessions/refresh.ts). `lastSeenAt` is written at most once a
 * minute; the idle expiry is `lastSeenAt + idleSeconds`, capped by `expiresAt`.
 */
export const sessions = pgTable(
  'sessions',
  {
    id: uuid('id').primaryKey(),
    site: text('site').notNull(),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    tokenHash: text('token_hash').notNull(),
    previousTokenHash: text('previous_token_hash'),
    rotatedAt: at('rotated_at'),
    createdAt: at('created_at').notNull().defaultNow(),
    lastSeenAt: at('last_seen_at').notNull().defaultNow(),
    expiresAt: at('expires_at').notNull(),
    idleSeconds: integer('idle_seconds').notNull(),
    /** NIST 800-63B assurance level (1 or 2) and the RFC 8176 methods of the login. */
    aal: smallint('aal').notNull(),
    amr: jsonb('amr').$type<string[]>().notNull(),
    userAgent: text('user_agent'),
    ip: text('ip'),
    /** An impersonation: who (`actor`) and why (`reason`); null for the person's own login. */
    impersonator: jsonb('impersonator').$type<{ actor: string; reason: string }>(),
    /** The enterprise connection the login came through (issue 61); null for every other login. */
    connectionId: uuid('connection_id'),
    revokedAt: at('revoked_at'),
    revokeReason: text('revoke_reason'),
    /**
     * What every token of the session since its first refresh carries, sealed (issue 57, G3): 12
     * random bytes, base64url, set by that refresh (sessions/tokens.ts locatorOf). A replaced
     * token finds its session by it, however many refreshes back. Not a secret: without the
     * deployment key it neither makes nor opens a token.
     */
    tokenFamily: text('token_family'),
    /** The session's refreshes so far: its current token's generation (0: the login's). */
    generation: integer('generation').notNull().default(0),
  },
  (t) => [
    uniqueIndex('sessions_token_idx').on(t.tokenHash),
    uniqueIndex('sessions_token_family_idx').on(t.tokenFamily),
    index('sessions_previous_token_idx').on(t.previousTokenHash),
    index('sessions_user_idx').on(t.userId, t.createdAt),
    index('sessions_site_expiry_idx').on(t.site, t.expiresAt),
    check('sessions_aal_check', sql`${t.aal} in (1, 2, 3)`),
  ],
);

/**
 * The tokens refreshes replaced (issue 43, point 3), by their SHA-256: a replaced token presented
 * within the grace window gets the successor, one presented after it revokes the session. `seq`
 * is the session's generation the refresh made (1, 2, …). A row of a token that carries its
 * session's locator is deleted once past REFRESH_WINDOW_SECONDS (by the session's next refresh or
 * housekeeping): the locator recognises the token from then on (issue 57, G3); a `lifelong` one
 * stays while the session does. Never a token.
 */
export const sessionReplacedTokens = pgTable(
  'session_replaced_tokens',
  {
    tokenHash: text('token_hash').primaryKey(),
    sessionId: uuid('session_id')
      .notNull()
      .references(() => sessions.id, { onDelete: 'cascade' }),
    seq: integer('seq').notNull(),
    replacedAt: at('replaced_at').notNull(),
    /**
     * For the grace window only: the successor XOR an HMAC of the replaced token under each
     * deployment key the rotating server held (never the database's own key beside a ring), so a
     * server that lacks the rotating server's current key (FACTOR_ENCRYPTION_KEY mid-rotation) and
     * is shown the replaced token still answers the same successor. Useless without that token
     * and a key; cleared by the session's next refresh, and by housekeeping after the window.
     */
    successorMasks: text('successor_masks'),
    /**
     * Kept for the session's life: a token that carries no locator of its session (the login's,
     * and every one made before issue 57), which nothing else would recognise once replaced. The
     * others are kept for REFRESH_WINDOW_SECONDS only (the grace and the rate bound): after that,
     * their locator finds their session (sessions/refresh.ts).
     */
    lifelong: boolean('lifelong').notNull().default(true),
  },
  (t) => [
    uniqueIndex('session_replaced_tokens_session_seq_idx').on(t.sessionId, t.seq),
    index('session_replaced_tokens_masked_idx').on(t.replacedAt).where(sql`${t.successorMasks} is not null`),
    index('session_replaced_tokens_passing_idx').on(t.replacedAt).where(sql`not ${t.lifelong}`),
  ],
);

/**
 * The keys that sign access tokens (issue 43): ES256, made by the service, the private key sealed
 * under FACTOR_ENCRYPTION_KEY (kernel/secret-box.ts, the kid as context). A key is published from
 * `createdAt`, signs from `activatesAt` (after the JWKS cache's lifetime, so verifiers have it
 * before any token), stops signing at `retiredAt`, and stays published until every token it signed
 * has expired (`retiredAt` + the longest access-token lifetime).
 */
export const signingKeys = pgTable('signing_keys', {
  kid: text('kid').primaryKey(),
  algorithm: text('algorithm').notNull().default('ES256'),
  publicJwk: jsonb('public_jwk').$type<Record<string, string>>().notNull(),
  privateSealed: text('private_sealed').notNull(),
  createdAt: at('created_at').notNull().defaultNow(),
  activatesAt: at('activates_at').notNull(),
  retiredAt: at('retired_at'),
});

/**
 * Identities from other providers linked to an account (issue 44): the site's own name for the
 * provider ("google", "github", "oidc:acme") and the provider's stable id of the person. One
 * (provider, subject) belongs to at most one account of a site: the unique index settles it,
 * races included (identities/). Another site may hold the same one. `email` and `emailVerified`
 * are what the provider said, as the site passed them on; they never verify the account's email.
 */
export const userIdentities = pgTable(
  'user_identities',
  {
    id: uuid('id').primaryKey(),
    site: text('site').notNull(),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    provider: text('provider').notNull(),
    subject: text('subject').notNull(),
    email: text('email'),
    emailVerified: boolean('email_verified').notNull().default(false),
    linkedAt: at('linked_at').notNull().defaultNow(),
  },
  (t) => [
    uniqueIndex('user_identities_site_provider_subject_key').on(t.site, t.provider, t.subject),
    index('user_identities_user_idx').on(t.userId, t.linkedAt),
    // list's `search` by an identity's subject at any provider (issue 64).
    index('user_identities_site_subject_idx').on(t.site, t.subject),
  ],
);

/**
 * Organizations (issue 45): a B2B site's customers. `memberCount` is kept by every membership's
 * change in its transaction (never counted at a read: an organization may have 100,000 members).
 * `slug` is unique per site. Another site's organization is 404 everywhere (every lookup names
 * the site).
 */
export const orgs = pgTable(
  'orgs',
  {
    id: uuid('id').primaryKey(),
    site: text('site').notNull(),
    name: text('name').notNull(),
    slug: text('slug'),
    metadata: jsonb('metadata').$type<Record<string, unknown>>().notNull().default({}),
    memberCount: integer('member_count').notNull().default(0),
    createdAt: at('created_at').notNull().defaultNow(),
    updatedAt: at('updated_at').notNull().defaultNow(),
  },
  (t) => [
    // org/get?slug= and org/list?q= (a prefix: LIKE reads this opclass whatever the collation).
    uniqueIndex('orgs_site_slug_idx').on(t.site, t.slug.op('text_pattern_ops')),
    // org/list: the site's organizations in order of creation, a page at a time.
    index('orgs_site_created_idx').on(t.site, t.createdAt, t.id),
    // org/list?q=: a prefix of the name, letter case ignored.
    index('orgs_site_name_idx').on(t.site, sql`lower(${t.name}) text_pattern_ops`),
  ],
);

/**
 * The site's role set (issue 45, point 2): each role with its permissions, replaced whole by
 * org/roles. `position` keeps the order the site gave. org/member/check reads a member's roles
 * here by primary key, in the statement that reads the membership (orgs/check.ts).
 */
export const orgRoles = pgTable(
  'org_roles',
  {
    site: text('site').notNull(),
    role: text('role').notNull(),
    permissions: text('permissions').array().notNull(),
    position: smallint('position').notNull(),
  },
  (t) => [primaryKey({ columns: [t.site, t.role] })],
);

/**
 * Memberships (issue 45, point 3): the primary key (org, user) is org/member/check's lookup and
 * org/member/list's order; `user_id`'s index is user/orgs' and the account cap's (1,000). They go
 * with their organization and with their account's row (its purge, or a delete without grace);
 * a delete with grace removes them in its transaction (accounts/delete.ts).
 */
export const orgMemberships = pgTable(
  'org_memberships',
  {
    orgId: uuid('org_id')
      .notNull()
      .references(() => orgs.id, { onDelete: 'cascade' }),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    site: text('site').notNull(),
    roles: text('roles').array().notNull(),
    joinedAt: at('joined_at').notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.orgId, t.userId] }),
    index('org_memberships_user_idx').on(t.userId, t.joinedAt),
    // org/roles: whether a role left out is still held, reading the site's memberships only.
    index('org_memberships_site_idx').on(t.site),
    // org/roles: whether any membership of the site holds a role left out, at once however few
    // hold it and however many of other sites hold one of that name (site_roles: migration 0036).
    index('org_memberships_site_roles_idx').using('gin', sql`site_roles(${t.site}, ${t.roles})`),
  ],
);

/**
 * Invitations (issue 45, point 5): pending ones only. The ticket is 256 random bits, kept as its
 * SHA-256 only. An accept or a revoke deletes the row (an accept in the transaction that locked
 * it: of concurrent accepts exactly one finds it); expired ones go at the organization's next
 * invitation/create, and with the organization.
 */
export const orgInvitations = pgTable(
  'org_invitations',
  {
    id: uuid('id').primaryKey(),
    site: text('site').notNull(),
    orgId: uuid('org_id')
      .notNull()
      .references(() => orgs.id, { onDelete: 'cascade' }),
    email: text('email').notNull(),
    roles: text('roles').array().notNull(),
    ticketHash: text('ticket_hash').notNull(),
    createdAt: at('created_at').notNull().defaultNow(),
    expiresAt: at('expires_at').notNull(),
  },
  (t) => [
    uniqueIndex('org_invitations_ticket_idx').on(t.ticketHash),
    // invitation/list and the 1,000 pending an organization.
    index('org_invitations_org_idx').on(t.orgId, t.createdAt),
    // org/roles: whether an invitation of the site still gives a role left out.
    index('org_invitations_site_idx').on(t.site),
    index('org_invitations_site_roles_idx').using('gin', sql`site_roles(${t.site}, ${t.roles})`),
  ],
);

/**
 * A site's sign-in providers (issue 59, point 1), configured by the operator (`cli provider set`):
 * one row per (site, name), the name being the one identities carry (`user_identities.provider`).
 * `oidc`: the issuer alone, the rest read from its discovery document; `oauth2`: its endpoints and
 * where userinfo's answer holds the subject, email and name (JSON pointers). The client secret is
 * kept sealed (kernel/secret-box.ts, context `provider <site> <name>`), never in the clear.
 */
export const providers = pgTable(
  'providers',
  {
    site: text('site').notNull(),
    name: text('name').notNull(),
    kind: text('kind').notNull(),
    issuer: text('issuer'),
    /** oauth2: authorization, token, userinfo and (GitHub) emails URLs; null for oidc. */
    endpoints: jsonb('endpoints').$type<{
      authorization: string;
      token: string;
      userinfo: string;
      emails?: string;
    }>(),
    /** oauth2: JSON pointers into userinfo's answer; null for oidc (the ID token's claims). */
    userinfoMap: jsonb('userinfo_map').$type<{
      subject: string;
      email?: string;
      emailVerified?: string;
      name?: string;
    }>(),
    clientId: text('client_id').notNull(),
    clientSecretSealed: text('client_secret_sealed').notNull(),
    scopes: text('scopes').array().notNull(),
    redirectUris: text('redirect_uris').array().notNull(),
    onNewPerson: text('on_new_person').notNull().default('refuse'),
    /** --keep-tokens: the provider's access and refresh tokens are kept (sealed) after a sign-in. */
    keepTokens: boolean('keep_tokens').notNull().default(false),
    createdAt: at('created_at').notNull().defaultNow(),
    updatedAt: at('updated_at').notNull().defaultNow(),
  },
  (t) => [
    primaryKey({ columns: [t.site, t.name] }),
    check('providers_kind_check', sql`${t.kind} in ('oidc', 'oauth2')`),
    check('providers_on_new_person_check', sql`${t.onNewPerson} in ('create', 'refuse')`),
    check(
      'providers_kind_fields_check',
      sql`(${t.kind} = 'oidc' and ${t.issuer} is not null) or (${t.kind} = 'oauth2' and ${t.endpoints} is not null and ${t.userinfoMap} is not null)`,
    ),
  ],
);

/**
 * A sign-in in flight between provider/start and provider/callback (issue 59, point 2): found by
 * the SHA-256 of its `state` (never the state itself), bound to its site, single use (the callback
 * deletes the row it reads), ten minutes. The PKCE verifier and the nonce are sealed under
 * FACTOR_ENCRYPTION_KEY's ring, bound to the row's hash. `provider` is the configured name, or
 * `sso:{connectionId}` for enterprise SSO (issue 61), which shares the store.
 */
export const providerStates = pgTable(
  'provider_states',
  {
    stateHash: text('state_hash').primaryKey(),
    site: text('site').notNull(),
    provider: text('provider').notNull(),
    redirectUri: text('redirect_uri').notNull(),
    /** secret-box of {"verifier","nonce"}. */
    sealed: text('sealed').notNull(),
    createdAt: at('created_at').notNull().defaultNow(),
    expiresAt: at('expires_at').notNull(),
  },
  (t) => [index('provider_states_expires_idx').on(t.expiresAt)],
);

/**
 * What provider/callback's 409 identity_unlinked hands out (issue 59, point 3): the identity the
 * provider vouched for, and its profile, until the person proves an account is theirs and the site
 * links it (`user/identity/link` with `linkTicket`). Found by the SHA-256 of the ticket; single
 * use, ten minutes, bound to its site.
 */
export const linkTickets = pgTable(
  'link_tickets',
  {
    ticketHash: text('ticket_hash').primaryKey(),
    site: text('site').notNull(),
    provider: text('provider').notNull(),
    subject: text('subject').notNull(),
    email: text('email'),
    emailVerified: boolean('email_verified').notNull().default(false),
    name: text('name'),
    createdAt: at('created_at').notNull().defaultNow(),
    expiresAt: at('expires_at').notNull(),
  },
  (t) => [index('link_tickets_expires_idx').on(t.expiresAt)],
);

/**
 * A provider's access and refresh tokens for an identity, kept only for a provider set with
 * --keep-tokens (issue 59, point 3): sealed, bound to (site, provider, subject); read back only by
 * provider/tokens (scope export). Replaced at each sign-in.
 */
export const providerTokens = pgTable(
  'provider_tokens',
  {
    site: text('site').notNull(),
    provider: text('provider').notNull(),
    subject: text('subject').notNull(),
    userId: uuid('user_id')
      .notNull()
      .references(() => users.id, { onDelete: 'cascade' }),
    /** secret-box of {"accessToken","refreshToken","scope","expiresAt"}. */
    sealed: text('sealed').notNull(),
    updatedAt: at('updated_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.site, t.provider, t.subject] }), index('provider_tokens_user_idx').on(t.userId)],
);

/**
 * A site's senders (issue 60, point 1; `cli site set --mail-from --mail-transport`): the mail
 * transport's URL without its password (smtp:// with STARTTLS required, or smtps://; plain only to
 * a loopback host), the password sealed (kernel/secret-box.ts, context `sender <site> mail`); the
 * text-message API (a URL, a header for its key, a JSON body template), its key sealed
 * (`sender <site> sms`), the countries texts may go to and a daily limit; the link origins a
 * `send`'s linkTemplate may point at. No row, or a channel's columns null: that channel is not
 * configured (`send` answers 409 no_transport).
 */
export const siteSenders = pgTable('site_senders', {
  site: text('site').primaryKey(),
  mailFrom: text('mail_from'),
  mailTransport: text('mail_transport'),
  mailPasswordSealed: text('mail_password_sealed'),
  smsUrl: text('sms_url'),
  smsHeader: text('sms_header'),
  smsKeySealed: text('sms_key_sealed'),
  smsBody: text('sms_body'),
  smsCountries: text('sms_countries').array(),
  smsDailyLimit: integer('sms_daily_limit'),
  /** Messages of the site a day, every channel together (null: MESSAGE_SITE_DAILY_LIMIT's default). */
  dailyLimit: integer('daily_limit'),
  linkOrigins: text('link_origins').array().notNull().default(sql`'{}'::text[]`),
  updatedAt: at('updated_at').notNull().defaultNow(),
});

/** A site's own template of a purpose in a language (`cli template set`); the English defaults are in code. */
export const messageTemplates = pgTable(
  'message_templates',
  {
    site: text('site').notNull(),
    purpose: text('purpose').notNull(),
    lang: text('lang').notNull(),
    subject: text('subject').notNull(),
    text: text('text').notNull(),
    html: text('html'),
    updatedAt: at('updated_at').notNull().defaultNow(),
  },
  (t) => [primaryKey({ columns: [t.site, t.purpose, t.lang] })],
);

/**
 * The message outbox (issue 60, point 4): written in the ticket's own transaction, sent by any
 * server (claimed FOR UPDATE SKIP LOCKED, leased, fair between sites: the messages worker). The
 * rendered message (subject, text, HTML: the link or code in it) is sealed, context `message <id>`,
 * and deleted once sent or given up; the recipient and the status are kept 30 days.
 * `undeliverable`: a permanent failure at send time (the address refused), which makes the
 * account's email undeliverable until it changes or is verified again.
 */
export const messages = pgTable(
  'messages',
  {
    id: uuid('id').primaryKey(),
    site: text('site').notNull(),
    // The account the message went to; an invitation's has one only when an account of the site
    // holds its address (issue 60: the invitation is sent by us too), and names its organization.
    userId: uuid('user_id'),
    orgId: uuid('org_id'),
    channel: text('channel').notNull(),
    purpose: text('purpose').notNull(),
    recipient: text('recipient').notNull(),
    status: text('status').notNull().default('queued'),
    attempts: integer('attempts').notNull().default(0),
    lastError: text('last_error'),
    undeliverable: boolean('undeliverable').notNull().default(false),
    bodySealed: text('body_sealed'),
    nextAttemptAt: at('next_attempt_at').notNull().defaultNow(),
    leasedUntil: at('leased_until'),
    createdAt: at('created_at').notNull().defaultNow(),
    sentAt: at('sent_at'),
  },
  (t) => [
    // The due messages, oldest first: the claim takes each site's first few in turn.
    index('messages_due_idx').on(t.site, t.nextAttemptAt, t.id).where(sql`${t.status} = 'queued'`),
    // An account's messages newest first (message/list), and its count in the last hour (the budget).
    index('messages_user_idx').on(t.site, t.userId, t.createdAt),
    // A site's messages of a day (its daily caps), and the 30 days' pruning.
    index('messages_site_created_idx').on(t.site, t.createdAt),
    // An address's messages of the last hour: an invitation's budget (its address may have no account).
    index('messages_recipient_idx').on(t.site, sql`lower(${t.recipient})`, t.createdAt),
    // A site's messages leased now (the claim's cap, kernel/fair-claimer.ts): a few rows, whatever
    // the site's backlog (a flood of 10,000 had every claim count them all).
    index('messages_leased_idx')
      .on(t.site, t.leasedUntil)
      .where(sql`${t.status} = 'queued' and ${t.leasedUntil} is not null`),
    check('messages_status_check', sql`${t.status} in ('queued', 'sent', 'failed')`),
    check('messages_channel_check', sql`${t.channel} in ('email', 'sms')`),
    check('messages_owner_check', sql`${t.userId} is not null or ${t.orgId} is not null`),
  ],
);

/**
 * An organization's domains (issue 61, point 1): claimed with a TXT record's value (`token`, not a
 * secret: it is published in DNS), verified once the record is seen. One organization of a site
 * at most has a domain verified (the partial unique index settles two verifications at once).
 */
export const orgDomains = pgTable(
  'org_domains',
  {
    orgId: uuid('org_id')
      .notNull()
      .references(() => orgs.id, { onDelete: 'cascade' }),
    site: text('site').notNull(),
    domain: text('domain').notNull(),
    token: text('token').notNull(),
    createdAt: at('created_at').notNull().defaultNow(),
    verifiedAt: at('verified_at'),
  },
  (t) => [
    primaryKey({ columns: [t.orgId, t.domain] }),
    uniqueIndex('org_domains_site_verified_key').on(t.site, t.domain).where(sql`${t.verifiedAt} is not null`),
  ],
);

/**
 * An organization's enterprise sign-in connections (issue 61, point 2). SAML: the IdP's entity
 * id, single sign-on URL and signing certificates (PEM, several at once for a rollover), read from
 * its metadata; our service provider's key pair for the connection (the certificate public, the
 * private key sealed under FACTOR_ENCRYPTION_KEY, bound to the connection's id). OIDC: the
 * issuer, client id and sealed client secret.
 */
export const ssoConnections = pgTable(
  'sso_connections',
  {
    id: uuid('id').primaryKey(),
    site: text('site').notNull(),
    orgId: uuid('org_id')
      .notNull()
      .references(() => orgs.id, { onDelete: 'cascade' }),
    kind: text('kind').notNull(),
    enforce: boolean('enforce').notNull().default(false),
    allowIdpInitiated: boolean('allow_idp_initiated').notNull().default(false),
    redirectUris: text('redirect_uris').array().notNull(),
    defaultRoles: text('default_roles').array().notNull(),
    samlMetadataUrl: text('saml_metadata_url'),
    samlIdpEntityId: text('saml_idp_entity_id'),
    samlSsoUrl: text('saml_sso_url'),
    samlWantsSignedRequests: boolean('saml_wants_signed_requests').notNull().default(false),
    samlIdpCerts: text('saml_idp_certs').array(),
    samlMetadataRefreshedAt: at('saml_metadata_refreshed_at'),
    spCert: text('sp_cert'),
    spKeySealed: text('sp_key_sealed'),
    oidcIssuer: text('oidc_issuer'),
    oidcClientId: text('oidc_client_id'),
    oidcClientSecretSealed: text('oidc_client_secret_sealed'),
    createdAt: at('created_at').notNull().defaultNow(),
    updatedAt: at('updated_at').notNull().defaultNow(),
  },
  (t) => [
    index('sso_connections_org_idx').on(t.orgId, t.createdAt),
    index('sso_connections_site_idx').on(t.site),
    check('sso_connections_kind_check', sql`${t.kind} in ('saml', 'oidc')`),
  ],
);

/**
 * A sign-in we started (sso/start): the AuthnRequest's ID (`InResponseTo` of the answer), found
 * by the SHA-256 of its RelayState, single use (deleted by the callback that takes it), 10 minutes.
 */
export const ssoRequests = pgTable(
  'sso_requests',
  {
    stateHash: text('state_hash').primaryKey(),
    site: text('site').notNull(),
    connectionId: uuid('connection_id')
      .notNull()
      .references(() => ssoConnections.id, { onDelete: 'cascade' }),
    requestId: text('request_id').notNull(),
    redirectUri: text('redirect_uri').notNull(),
    expiresAt: at('expires_at').notNull(),
  },
  (t) => [index('sso_requests_expires_idx').on(t.expiresAt)],
);

/**
 * Assertion IDs already taken (issue 61, point 4): each used once across every replica (the
 * primary key refuses the second), kept until the assertion's own end of validity.
 */
export const ssoAssertions = pgTable(
  'sso_assertions',
  {
    connectionId: uuid('connection_id')
      .notNull()
      .references(() => ssoConnections.id, { onDelete: 'cascade' }),
    assertionId: text('assertion_id').notNull(),
    expiresAt: at('expires_at').notNull(),
  },
  (t) => [
    primaryKey({ columns: [t.connectionId, t.assertionId] }),
    index('sso_assertions_expires_idx').on(t.expiresAt),
  ],
);
