// session/refresh (issue 43, point 3): rotation that never logs anyone out by mistake.
//
// The successor of a token is derived from it (tokens.ts: an HMAC under a deployment key), so
// every refresh of one token computes the same successor without any plaintext stored. The
// rotation is one conditional UPDATE on the token's hash: of many refreshes at once, the first
// moves the hash (the others wait on the row and then find it moved); each of the others finds
// the token as the session's previous one, replaced less than REUSE_GRACE_SECONDS ago, and
// answers the successor it computed, which is the session's token. A token found as the previous
// one later than that is a stolen token's replay: the whole session ends in the same transaction
// (reason `refresh_reuse`) and the answer is the miss. Only the previous token is remembered: a
// token two refreshes old is unknown (the miss; the session stays).
import { and, eq, sql } from 'drizzle-orm';
import type { WriteScope } from '../accounts/unit-of-work.ts';
import { inWrite } from '../accounts/unit-of-work.ts';
import { sessions } from '../db/schema.ts';
import type { DeploymentKeys } from '../factors/deployment-keys.ts';
import type { IssuedSession, SessionDeps } from './issue.ts';
import { invalidSession, liveSql, REUSE_GRACE_SECONDS, revokedEvent, type SessionEventRow } from './rules.ts';
import { hashSessionToken, successorOf } from './tokens.ts';

export interface RefreshDeps extends SessionDeps {
  keys: DeploymentKeys;
}

const returned = {
  id: sessions.id,
  userId: sessions.userId,
  aal: sessions.aal,
  amr: sessions.amr,
  expiresAt: sessions.expiresAt,
  impersonator: sessions.impersonator,
};

type Row = SessionEventRow & { impersonator: { actor: string; reason: string } | null };
type Outcome = { kind: 'rotated' | 'repeated'; row: Row } | { kind: 'reused'; row: Row };

/** The session's new token (or the one a refresh of this token less than 10 s ago gave), or 422. */
export async function refreshSession(scope: WriteScope, deps: RefreshDeps, token: string): Promise<IssuedSession> {
  const old = hashSessionToken(token);
  const successor = successorOf(deps.keys, token);
  const next = hashSessionToken(successor);
  const done = (o: Outcome) =>
    o.kind === 'reused'
      ? {
          userId: o.row.userId,
          status: 422,
          outcome: 'invalid_session',
          moreEvents: [revokedEvent(o.row, 'refresh_reuse')],
        }
      : { userId: o.row.userId, status: 200, outcome: 'session refreshed' };
  const outcome = await inWrite(scope, deps, 'session_refresh', done, async (tx): Promise<Outcome | undefined> => {
    const [rotated] = await tx
      .update(sessions)
      .set({ tokenHash: next, previousTokenHash: old, rotatedAt: sql`now()`, lastSeenAt: sql`now()` })
      .where(and(eq(sessions.tokenHash, old), eq(sessions.site, scope.site), liveSql))
      .returning(returned);
    if (rotated !== undefined) return { kind: 'rotated', row: rotated };
    // Replaced already: by a refresh of a moment ago (the same successor), or long ago (theft).
    const [replaced] = await tx
      .select({
        ...returned,
        live: liveSql,
        fresh: sql<boolean>`${sessions.rotatedAt} > now() - make_interval(secs => ${REUSE_GRACE_SECONDS})`,
        current: sql<boolean>`${sessions.tokenHash} = ${next}`,
      })
      .from(sessions)
      .where(and(eq(sessions.previousTokenHash, old), eq(sessions.site, scope.site)))
      .for('update');
    if (replaced === undefined || !replaced.live) return undefined;
    if (replaced.fresh && replaced.current) return { kind: 'repeated', row: replaced };
    await tx
      .update(sessions)
      .set({ revokedAt: sql`now()`, revokeReason: 'refresh_reuse' })
      .where(eq(sessions.id, replaced.id));
    return { kind: 'reused', row: replaced };
  });
  if (outcome === undefined || outcome.kind === 'reused') throw invalidSession();
  const { row } = outcome;
  const signed = await deps.accessTokens.sign({
    site: scope.site,
    userId: row.userId,
    sessionId: row.id,
    amr: row.amr,
    aal: row.aal,
    notAfter: row.expiresAt,
    ...(row.impersonator !== null && { actor: row.impersonator.actor }),
  });
  return {
    sessionId: row.id,
    token: successor,
    expiresAt: row.expiresAt.toISOString(),
    accessToken: signed.accessToken,
    accessTokenExpiresAt: signed.accessTokenExpiresAt.toISOString(),
  };
}
