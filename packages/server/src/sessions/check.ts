// session/verify (issue 43, point 2): is this token a live session of the site, and whose? One
// read by the token hash's unique index, the same for every token, so that every miss (unknown,
// malformed, another site's, expired, idle, revoked, replaced) costs what the others cost and is
// one answer. No copy of the answer is kept anywhere: a revoke on any server is seen at once.
// A hit moves `lastSeenAt`, written at most once a minute per session (a conditional UPDATE that
// only the first check of the minute makes).
import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { sessions } from '../db/schema.ts';
import { type Amr, idleExpiresAt, invalidSession, LAST_SEEN_STEP_SECONDS, liveSql } from './rules.ts';
import { hashSessionToken } from './tokens.ts';

export interface CheckedSession {
  sessionId: string;
  _userId: string;
  createdAt: string;
  expiresAt: string;
  idleExpiresAt: string;
  aal: 1 | 2;
  amr: Amr;
  impersonator?: { actor: string; reason: string };
}

/** The live session of `site` that `token` is, or 422 invalid_session. */
export async function checkSession(db: Db, site: string, token: string): Promise<CheckedSession> {
  const [row] = await db
    .select({
      id: sessions.id,
      userId: sessions.userId,
      createdAt: sessions.createdAt,
      lastSeenAt: sessions.lastSeenAt,
      expiresAt: sessions.expiresAt,
      idleSeconds: sessions.idleSeconds,
      aal: sessions.aal,
      amr: sessions.amr,
      impersonator: sessions.impersonator,
      live: sql<boolean>`(${sessions.site} = ${site} and ${liveSql})`,
      stale: sql<boolean>`${sessions.lastSeenAt} < now() - make_interval(secs => ${LAST_SEEN_STEP_SECONDS})`,
    })
    .from(sessions)
    .where(eq(sessions.tokenHash, hashSessionToken(token)));
  if (row === undefined || !row.live) throw invalidSession();
  let lastSeenAt = row.lastSeenAt;
  if (row.stale) {
    // The first check of the minute writes it; the others of that minute find it fresh.
    const [moved] = await db
      .update(sessions)
      .set({ lastSeenAt: sql`now()` })
      .where(
        and(
          eq(sessions.id, row.id),
          sql`${sessions.lastSeenAt} < now() - make_interval(secs => ${LAST_SEEN_STEP_SECONDS})`,
        ),
      )
      .returning({ lastSeenAt: sessions.lastSeenAt });
    if (moved !== undefined) lastSeenAt = moved.lastSeenAt;
  }
  return {
    sessionId: row.id,
    _userId: row.userId,
    createdAt: row.createdAt.toISOString(),
    expiresAt: row.expiresAt.toISOString(),
    idleExpiresAt: idleExpiresAt({ ...row, lastSeenAt }).toISOString(),
    aal: row.aal as 1 | 2,
    amr: row.amr as Amr,
    ...(row.impersonator !== null && { impersonator: row.impersonator }),
  };
}
