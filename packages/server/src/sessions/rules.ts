// The rules every session operation shares (issue 43): the lifetimes, the live condition, the
// one answer of every miss, the way a login's methods are named, and a session as answered.
import type { components } from '@user-accounts/client';
import { eq, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { sessions, siteSettings } from '../db/schema.ts';
import { ApiError } from '../errors.ts';
import type { EventEntry } from '../kernel/outbox.ts';

/** The absolute lifetime unless the site says otherwise (`cli site set --session-lifetime`): 30 days. */
export const DEFAULT_LIFETIME_SECONDS = 30 * 24 * 3600;
/** The idle lifetime unless the site says otherwise (`cli site set --session-idle`): 7 days. */
export const DEFAULT_IDLE_SECONDS = 7 * 24 * 3600;
/**
 * The live sessions of the person's own an account may hold; a new one past it ends the oldest of
 * them (reason `limit`). Impersonations are not among them.
 */
export const MAX_LIVE_SESSIONS = 100;
/**
 * The live impersonations (session/impersonate) an account may hold, apart from its own sessions:
 * a new one past it ends the oldest impersonation (reason `limit`), never a session of the
 * person's. Ten support agents at once on one account is more than a desk needs, and each lives
 * at most an hour (MAX_IMPERSONATION_SECONDS): the sessions table holds at most 110 live rows an
 * account, whatever an impersonate-only token does.
 */
export const MAX_LIVE_IMPERSONATIONS = 10;
/** How long a replaced token still gets its successor from a refresh; after it, a reuse is theft. */
export const REUSE_GRACE_SECONDS = 10;
/**
 * The rate bound of a session's refreshes (issue 57, G3): at most REFRESH_LIMIT rotations within
 * any REFRESH_WINDOW_SECONDS; one more is 429 `rate_limited` (a repeat within the grace is no
 * rotation). A replaced token's row is kept that long (at least the grace), so the window's
 * rotations are counted from them and a session keeps at most REFRESH_LIMIT rows of tokens that
 * carry its locator.
 */
export const REFRESH_LIMIT = 10;
export const REFRESH_WINDOW_SECONDS = 60;
/** `lastSeenAt` is written at most this often per session. */
export const LAST_SEEN_STEP_SECONDS = 60;

export type SessionRevokeReason =
  | 'revoked'
  | 'password_changed'
  | 'account_disabled'
  | 'account_deleted'
  | 'refresh_reuse'
  | 'limit'
  | 'inbox_proven';

/** RFC 8176's methods as the spec lists the ones we name (`Amr`). */
export type Amr = components['schemas']['Amr'];

/** How a login was made: NIST 800-63B's level and RFC 8176's methods. */
export interface LoginMethod {
  aal: 1 | 2;
  amr: Amr;
}

/** A password alone. */
export const PASSWORD_LOGIN: LoginMethod = { aal: 1, amr: ['pwd'] };
/** A password and a TOTP code or a recovery code (both single-use secrets: `otp`). */
export const PASSWORD_AND_CODE: LoginMethod = { aal: 2, amr: ['pwd', 'otp', 'mfa'] };
/** A password and a passkey as its second factor (user verification not required there). */
export const PASSWORD_AND_PASSKEY: LoginMethod = { aal: 2, amr: ['pwd', 'hwk', 'mfa'] };
/** A passkey alone: a key in hardware, the person present and verified by the authenticator. */
export const PASSKEY_LOGIN: LoginMethod = { aal: 2, amr: ['hwk', 'user', 'mfa'] };
/** A login link or code (ticket/redeem, issue 44, point 6): a single-use secret sent to the inbox. */
export const LOGIN_TICKET_LOGIN: LoginMethod = { aal: 1, amr: ['otp'] };
/** A login link or code, then a TOTP or recovery code. */
export const LOGIN_TICKET_AND_CODE: LoginMethod = { aal: 2, amr: ['otp', 'mfa'] };
/** A login link or code, then a passkey as its second factor. */
export const LOGIN_TICKET_AND_PASSKEY: LoginMethod = { aal: 2, amr: ['otp', 'hwk', 'mfa'] };
/** Another provider (identity/verify), then a TOTP or recovery code. */
export const IDENTITY_AND_CODE: LoginMethod = { aal: 2, amr: ['fed', 'otp', 'mfa'] };
/** Another provider, then a passkey as its second factor. */
export const IDENTITY_AND_PASSKEY: LoginMethod = { aal: 2, amr: ['fed', 'hwk', 'mfa'] };

/** The one answer of every miss: unknown, malformed, another site's, expired, idle, revoked, replaced. */
export const invalidSession = () => new ApiError('invalid_session', 'The token is not a live session; sign in again.');

/** A session neither revoked nor past its absolute or idle expiry, at the database's `now()`. */
export const liveSql = sql`(${sessions.revokedAt} is null and ${sessions.expiresAt} > now()
  and ${sessions.lastSeenAt} + make_interval(secs => ${sessions.idleSeconds}) > now())`;

/** When a session ends unless used again: `lastSeenAt` + its idle lifetime, never past `expiresAt`. */
export const idleExpiresAt = (row: { lastSeenAt: Date; idleSeconds: number; expiresAt: Date }): Date =>
  new Date(Math.min(row.lastSeenAt.getTime() + row.idleSeconds * 1000, row.expiresAt.getTime()));

/** A site's lifetimes, in seconds: its own (`cli site set`) or the defaults. */
export async function lifetimesOf(db: Db, site: string): Promise<{ lifetime: number; idle: number }> {
  const [row] = await db
    .select({ lifetime: siteSettings.sessionLifetimeSeconds, idle: siteSettings.sessionIdleSeconds })
    .from(siteSettings)
    .where(eq(siteSettings.site, site));
  return { lifetime: row?.lifetime ?? DEFAULT_LIFETIME_SECONDS, idle: row?.idle ?? DEFAULT_IDLE_SECONDS };
}

/** The columns a session's events and answers need. */
export const sessionColumns = {
  id: sessions.id,
  userId: sessions.userId,
  createdAt: sessions.createdAt,
  lastSeenAt: sessions.lastSeenAt,
  expiresAt: sessions.expiresAt,
  idleSeconds: sessions.idleSeconds,
  aal: sessions.aal,
  amr: sessions.amr,
  userAgent: sessions.userAgent,
  ip: sessions.ip,
  impersonator: sessions.impersonator,
  revokedAt: sessions.revokedAt,
  revokeReason: sessions.revokeReason,
};

/** The columns a session's event is made of (SessionEventRow), for a write's `returning`. */
export const eventColumns = {
  id: sessions.id,
  userId: sessions.userId,
  aal: sessions.aal,
  amr: sessions.amr,
  expiresAt: sessions.expiresAt,
};

export interface SessionEventRow {
  id: string;
  userId: string;
  aal: number;
  amr: string[];
  expiresAt: Date;
  /** An impersonation's actor and reason (session/impersonate): in its session.created. */
  impersonator?: Impersonator | null;
}

/** Who impersonates an account, and why (session/impersonate, issue 43 point 7). */
export interface Impersonator {
  actor: string;
  reason: string;
}

/** An impersonation's login: no method of the person's was used; the lowest level (sessions/impersonate.ts). */
export const IMPERSONATION: LoginMethod = { aal: 1, amr: [] };

/**
 * session.created: the account, the session, how its login was made, when it ends and, for an
 * impersonation, who and why. Never a token.
 */
export const createdEvent = (row: SessionEventRow): EventEntry => ({
  type: 'session.created',
  userId: row.userId,
  data: {
    _userId: row.userId,
    sessionId: row.id,
    aal: row.aal,
    amr: row.amr,
    expiresAt: row.expiresAt.toISOString(),
    ...(row.impersonator != null && { impersonator: row.impersonator }),
  },
});

/** session.revoked, with why. Never a token. */
export const revokedEvent = (row: SessionEventRow, reason: SessionRevokeReason): EventEntry => ({
  type: 'session.revoked',
  userId: row.userId,
  data: { _userId: row.userId, sessionId: row.id, aal: row.aal, amr: row.amr, reason },
});
