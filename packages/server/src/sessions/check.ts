// session/verify (issue 43, point 2): is this token a live session of the site, and whose? One
// read by the token hash's unique index, the same for every token, so that every miss (unknown,
// malformed, another site's, expired, idle, revoked, replaced) costs what the others cost and is
// one answer. No copy of the answer is kept anywhere: a revoke on any server is seen at once.
// A hit moves `lastSeenAt`, written at most once a minute per session (a conditional UPDATE that
// only the first check of the minute makes).
import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { preparedOn } from '../db/prepared.ts';
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

// The step is a constant of the statement, not a parameter: both statements are prepared once per
// database (db/prepared.ts), as get's reads are; built by drizzle on every call they cost about
// 0.35 ms of CPU each (issue 43's bench, bench/results/2026-11-28-13-10-sessions.md).
const stale = sql.raw(`now() - interval '${LAST_SEEN_STEP_SECONDS} seconds'`);
const byToken = preparedOn((db) =>
  db
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
      live: sql<boolean>`(${sessions.site} = ${sql.placeholder('site')} and ${liveSql})`,
      stale: sql<boolean>`${sessions.lastSeenAt} < ${stale}`,
    })
    .from(sessions)
    .where(eq(sessions.tokenHash, sql.placeholder('hash')))
    .prepare('check_session'),
);
const seen = preparedOn((db) =>
  db
    .update(sessions)
    .set({ lastSeenAt: sql`now()` })
    .where(and(eq(sessions.id, sql.placeholder('id')), sql`${sessions.lastSeenAt} < ${stale}`))
    .returning({ lastSeenAt: sessions.lastSeenAt })
    .prepare('session_seen'),
);

/** The live session of `site` that `token` is, or 422 invalid_session. */
export async function checkSession(db: Db, site: string, token: string): Promise<CheckedSession> {
  const [row] = await byToken(db).execute({ site, hash: hashSessionToken(token) });
  if (row === undefined || !row.live) throw invalidSession();
  let lastSeenAt = row.lastSeenAt;
  if (row.stale) {
    // The first check of the minute writes it; the others of that minute find it fresh.
    const [moved] = await seen(db).execute({ id: row.id });
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
