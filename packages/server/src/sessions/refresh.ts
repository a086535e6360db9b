// session/refresh (issue 43, point 3): rotation that never logs anyone out by mistake.
//
// The successor of a token is derived from it (tokens.ts: an HMAC under a deployment key), so
// every refresh of one token computes the same successor without any plaintext stored. The
// rotation is one conditional UPDATE on the token's hash: of many refreshes at once, the first
// moves the hash and records the replaced token (session_replaced_tokens, in the same
// transaction); the others wait on the row, find it moved, and find the token among the
// session's replaced ones. Replaced less than REUSE_GRACE_SECONDS ago: they answer the successor
// the session holds, computed under any deployment key this server holds (servers mid-rotation of
// FACTOR_ENCRYPTION_KEY differ on the current key); if none of those is the session's token (it
// was refreshed again since), the plain miss, the session left alone: nothing within the grace
// window revokes. A successor made under a key this server lacks is read from the replaced
// token's masks (tokens.ts maskSuccessor: useless without the replaced token and a key), which
// the session's next refresh and housekeeping clear once past the window. Replaced longer ago, however many
// refreshes back (a thief who kept refreshing): a stolen token's replay, the whole session ends in
// the same transaction (reason `refresh_reuse`) and the answer is the miss. A session remembers
// its last REPLACED_TOKENS_KEPT replaced tokens; one older than that is a plain miss.
import { and, eq, sql } from 'drizzle-orm';
import type { WriteScope } from '../accounts/unit-of-work.ts';
import { inWrite } from '../accounts/unit-of-work.ts';
import { rows } from '../db/client.ts';
import { sessionReplacedTokens, sessions } from '../db/schema.ts';
import type { DeploymentKeys } from '../factors/deployment-keys.ts';
import type { IssuedSession, SessionDeps } from './issue.ts';
import {
  invalidSession,
  liveSql,
  REPLACED_TOKENS_KEPT,
  REUSE_GRACE_SECONDS,
  revokedEvent,
  type SessionEventRow,
} from './rules.ts';
import { hashSessionToken, maskSuccessor, successorsOf, unmaskSuccessors } from './tokens.ts';

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
type Outcome = { kind: 'rotated' | 'repeated'; row: Row; token: string } | { kind: 'reused'; row: Row };

/** The session's new token (or the one a refresh of this token less than 10 s ago gave), or 422. */
export async function refreshSession(scope: WriteScope, deps: RefreshDeps, token: string): Promise<IssuedSession> {
  const old = hashSessionToken(token);
  // The successor under each key held, the current key's first: the one a rotation here makes.
  const successors = successorsOf(deps.keys, token);
  const successor = successors[0]!;
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
      .set({
        tokenHash: hashSessionToken(successor),
        previousTokenHash: old,
        rotatedAt: sql`now()`,
        lastSeenAt: sql`now()`,
      })
      .where(and(eq(sessions.tokenHash, old), eq(sessions.site, scope.site), liveSql))
      .returning(returned);
    if (rotated !== undefined) {
      // Remembered for the session's life (its last REPLACED_TOKENS_KEPT): the row lock the
      // UPDATE holds orders the session's refreshes, so `seq` counts them without a gap.
      await rows(
        tx,
        sql`with added as (
          insert into session_replaced_tokens (token_hash, session_id, seq, replaced_at, successor_masks)
          select ${old}::text, ${rotated.id}::uuid, coalesce(max(seq), 0) + 1, now(),
                 ${maskSuccessor(deps.keys, token, successor)}::text
            from session_replaced_tokens where session_id = ${rotated.id}::uuid
          on conflict (token_hash) do nothing
          returning seq
        ), unmasked as (
          update session_replaced_tokens set successor_masks = null
          where session_id = ${rotated.id}::uuid and seq = (select seq from added) - 1 and successor_masks is not null
        )
        delete from session_replaced_tokens
        where session_id = ${rotated.id}::uuid and seq <= (select seq from added) - ${REPLACED_TOKENS_KEPT}::int`,
      );
      return { kind: 'rotated', row: rotated, token: successor };
    }
    // Replaced already: by a refresh of a moment ago (the same successor), or long ago (theft).
    const [replaced] = await tx
      .select({
        ...returned,
        live: liveSql,
        fresh: sql<boolean>`${sessionReplacedTokens.replacedAt} > now() - make_interval(secs => ${REUSE_GRACE_SECONDS})`,
        current: sessions.tokenHash,
        masks: sessionReplacedTokens.successorMasks,
      })
      .from(sessionReplacedTokens)
      .innerJoin(sessions, eq(sessions.id, sessionReplacedTokens.sessionId))
      .where(and(eq(sessionReplacedTokens.tokenHash, old), eq(sessions.site, scope.site)))
      .for('update', { of: sessions });
    if (replaced === undefined || !replaced.live) return undefined;
    if (replaced.fresh) {
      const candidates =
        replaced.masks === null ? successors : [...successors, ...unmaskSuccessors(deps.keys, token, replaced.masks)];
      const held = candidates.find((s) => hashSessionToken(s) === replaced.current);
      return held === undefined ? undefined : { kind: 'repeated', row: replaced, token: held };
    }
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
    token: outcome.token,
    expiresAt: row.expiresAt.toISOString(),
    accessToken: signed.accessToken,
    accessTokenExpiresAt: signed.accessTokenExpiresAt.toISOString(),
  };
}
