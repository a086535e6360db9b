// An account's sessions as the site and its support staff see and end them (issue 43, point 5),
// and the ending of them all by the writes that must end them (point 6: a password change, a
// disable, a delete), in those writes' own transactions.
import { and, desc, eq, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { sessions, users } from '../db/schema.ts';
import { ApiError, userNotFound } from '../errors.ts';
import { isUuid } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import type { EventEntry } from '../kernel/outbox.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import {
  type Amr,
  eventColumns,
  idleExpiresAt,
  liveSql,
  MAX_LIVE_IMPERSONATIONS,
  MAX_LIVE_SESSIONS,
  revokedEvent,
  type SessionRevokeReason,
  sessionColumns,
} from './rules.ts';

const sessionNotFound = () => new ApiError('session_not_found', 'No session of this site has this sessionId.');

type Row = {
  id: string;
  createdAt: Date;
  lastSeenAt: Date;
  expiresAt: Date;
  idleSeconds: number;
  aal: number;
  amr: string[];
  userAgent: string | null;
  ip: string | null;
  impersonator: { actor: string; reason: string } | null;
};

/** A session as session/list shows it: never a token. */
const shown = (row: Row) => ({
  sessionId: row.id,
  createdAt: row.createdAt.toISOString(),
  lastSeenAt: row.lastSeenAt.toISOString(),
  expiresAt: row.expiresAt.toISOString(),
  idleExpiresAt: idleExpiresAt(row).toISOString(),
  aal: row.aal as 1 | 2,
  amr: row.amr as Amr,
  userAgent: row.userAgent,
  ip: row.ip,
  ...(row.impersonator !== null && { impersonator: row.impersonator }),
});

async function accountInReach(db: Db, site: string, userId: string): Promise<boolean> {
  if (!isUuid(userId)) return false;
  const [row] = await db
    .select({ id: users.id })
    .from(users)
    .where(and(eq(users.id, userId), inReachOf(site)));
  return row !== undefined;
}

/** The account's live sessions, newest first; 404 when no account in reach has the id. */
export async function listSessions(db: Db, site: string, userId: string) {
  if (!(await accountInReach(db, site, userId))) throw userNotFound();
  const found = await db
    .select(sessionColumns)
    .from(sessions)
    .where(and(eq(sessions.userId, userId), eq(sessions.site, site), liveSql))
    .orderBy(desc(sessions.createdAt), desc(sessions.id))
    .limit(MAX_LIVE_SESSIONS + MAX_LIVE_IMPERSONATIONS);
  return { sessions: found.map(shown) };
}

/** Every session held for the account, live or ended, newest first, for its person's data. Never a token. */
export async function sessionsHeldFor(db: Db, userId: string) {
  const found = await db
    .select(sessionColumns)
    .from(sessions)
    .where(eq(sessions.userId, userId))
    .orderBy(desc(sessions.createdAt), desc(sessions.id));
  return found.map((row) => ({
    ...shown(row),
    revokedAt: row.revokedAt?.toISOString() ?? null,
    revokeReason: (row.revokeReason ?? null) as SessionRevokeReason | null,
  }));
}

/**
 * Ends every live session of the account, in the caller's transaction: the events to queue with
 * its write (session.revoked, with `reason`), one a session.
 */
export async function endSessionsOf(tx: Db, userId: string, reason: SessionRevokeReason): Promise<EventEntry[]> {
  const ended = await tx
    .update(sessions)
    .set({ revokedAt: sql`now()`, revokeReason: reason })
    .where(and(eq(sessions.userId, userId), liveSql))
    .returning({
      id: sessions.id,
      userId: sessions.userId,
      aal: sessions.aal,
      amr: sessions.amr,
      expiresAt: sessions.expiresAt,
    })
    // A statement of every delete, disable and password change: parsed once per connection (issue 63).
    .prepare('end_sessions_of')
    .execute();
  return ended.map((row) => revokedEvent(row, reason));
}

/**
 * Ends one session of the scope's site (404 session_not_found when the site has none with this
 * id). One already ended is answered the same, and changes nothing (no second event).
 */
export async function revokeSession(scope: WriteScope, deps: WriteDeps, sessionId: string): Promise<void> {
  if (!isUuid(sessionId)) throw sessionNotFound();
  type Found = { userId: string; events: EventEntry[] };
  const done = (w: Found) => ({ userId: w.userId, status: 200, outcome: 'session revoked', moreEvents: w.events });
  const written = await inWrite(scope, deps, 'session_revoke', done, async (tx): Promise<Found | undefined> => {
    const [row] = await tx
      .select({ userId: sessions.userId, live: liveSql })
      .from(sessions)
      .where(and(eq(sessions.id, sessionId), eq(sessions.site, scope.site)))
      .for('update');
    if (row === undefined) return undefined;
    if (!row.live) return { userId: row.userId, events: [] };
    const [ended] = await tx
      .update(sessions)
      .set({ revokedAt: sql`now()`, revokeReason: 'revoked' })
      .where(eq(sessions.id, sessionId))
      .returning(eventColumns);
    return { userId: row.userId, events: [revokedEvent(ended!, 'revoked')] };
  });
  if (written === undefined) throw sessionNotFound();
}

/** Ends every live session of an account in reach ("log out everywhere"): how many; 404 when none is. */
export async function revokeSessionsOfAccount(scope: WriteScope, deps: WriteDeps, userId: string): Promise<number> {
  if (!isUuid(userId)) throw userNotFound();
  scope.report?.({ userId });
  const done = (events: EventEntry[]) => ({ userId, status: 200, outcome: 'sessions revoked', moreEvents: events });
  const written = await inWrite(scope, deps, 'session_revoke', done, async (tx) => {
    const [account] = await tx
      .select({ id: users.id })
      .from(users)
      .where(and(eq(users.id, userId), inReachOf(scope.site)))
      .for('no key update');
    if (account === undefined) return undefined;
    return endSessionsOf(tx, userId, 'revoked');
  });
  if (written === undefined) throw userNotFound();
  return written.length;
}
