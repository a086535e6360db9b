// session/refresh (issue 43, point 3): rotation that never logs anyone out by mistake.
//
// The successor of a token is derived from it (tokens.ts: an HMAC under a deployment key), so
// every refresh of one token computes the same successor without any plaintext stored. The
// rotation locks the session's row by its token's hash and moves the hash, recording the replaced
// token (session_replaced_tokens, in the same transaction); of many refreshes at once, the
// others wait on the row, find it moved, and find the token among the session's replaced ones.
// Replaced less than REUSE_GRACE_SECONDS ago: they answer the successor the session holds,
// computed under any deployment key this server holds (servers mid-rotation of
// FACTOR_ENCRYPTION_KEY differ on the current key); if none of those is the session's token (it
// was refreshed again since), the plain miss, the session left alone: nothing within the grace
// window revokes. A successor made under a key this server lacks is read from the replaced
// token's masks (tokens.ts maskSuccessor: useless without the replaced token and a key), which
// the session's next refresh and housekeeping clear once past the window. Replaced longer ago,
// however many refreshes back (a thief who kept refreshing): a stolen token's replay, the whole
// session ends in the same transaction (reason `refresh_reuse`) and the answer is the miss.
//
// However many refreshes back (issue 57, G3: a ring of the last 1,000 replaced tokens was
// outrun by 1,001 refreshes within the grace): every successor carries its session's locator
// (tokens.ts: the family and its generation, sealed), so a replaced token whose row is gone is
// known by it, older than the session's current generation, for the session's life. Rows of such
// tokens are kept REFRESH_WINDOW_SECONDS only; a token that carries none (the login's, and those
// made before locators) is `lifelong`, one row a session. Rotations are bounded in rate:
// REFRESH_LIMIT within the window, counted from those rows, then 429 `rate_limited`.
import { and, eq, inArray, sql } from 'drizzle-orm';
import { type Db, rows } from '../db/client.ts';
import { sessionReplacedTokens, sessions } from '../db/schema.ts';
import { rateLimited } from '../errors.ts';
import type { DeploymentKeys } from '../kernel/deployment-keys.ts';
import type { WriteScope } from '../kernel/unit-of-work.ts';
import { inWrite } from '../kernel/unit-of-work.ts';
import type { IssuedSession, SessionDeps } from './issue.ts';
import {
  invalidSession,
  liveSql,
  REFRESH_LIMIT,
  REFRESH_WINDOW_SECONDS,
  REUSE_GRACE_SECONDS,
  revokedEvent,
  type SessionEventRow,
} from './rules.ts';
import {
  carries,
  hashSessionToken,
  locatorsOf,
  maskSuccessor,
  newTokenFamily,
  successorsOf,
  unmaskSuccessors,
} from './tokens.ts';

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
type Outcome =
  | { kind: 'rotated' | 'repeated'; row: Row; token: string }
  | { kind: 'reused'; row: Row }
  | { kind: 'limited'; row: Row; wait: number };

/** The rate bound's 429: the token named is still the session's; try again in `wait` seconds. */
const refreshLimited = (wait: number) =>
  rateLimited(
    `This session was refreshed ${REFRESH_LIMIT} times within ${REFRESH_WINDOW_SECONDS} s; its token is still good, refresh it again in ${wait} s.`,
    wait,
    { name: 'session_refresh', limit: REFRESH_LIMIT, windowSeconds: REFRESH_WINDOW_SECONDS },
  );

const windowSql = sql`make_interval(secs => ${REFRESH_WINDOW_SECONDS})`;

/** The session's new token (or the one a refresh of this token less than 10 s ago gave), 422, or 429. */
export async function refreshSession(scope: WriteScope, deps: RefreshDeps, token: string): Promise<IssuedSession> {
  const old = hashSessionToken(token);
  const done = (o: Outcome) =>
    o.kind === 'reused'
      ? {
          userId: o.row.userId,
          status: 422,
          outcome: 'invalid_session',
          moreEvents: [revokedEvent(o.row, 'refresh_reuse')],
        }
      : o.kind === 'limited'
        ? { userId: o.row.userId, status: 429, outcome: 'rate_limited' }
        : { userId: o.row.userId, status: 200, outcome: 'session refreshed' };
  const outcome = await inWrite(scope, deps, 'session_refresh', done, async (tx): Promise<Outcome | undefined> => {
    // The session's current token: its row locked (refreshes of it at once wait here, and then
    // find it moved), the rate bound judged, the token replaced.
    const [current] = await tx
      .select({ ...returned, family: sessions.tokenFamily, generation: sessions.generation })
      .from(sessions)
      .where(and(eq(sessions.tokenHash, old), eq(sessions.site, scope.site), liveSql))
      .for('update');
    if (current !== undefined) {
      const [recent] = await rows<{ count: number; wait: number | null; top: number | null }>(
        tx,
        sql`select count(*) filter (where replaced_at > now() - ${windowSql})::int as count,
            ceil(extract(epoch from (min(replaced_at) filter (where replaced_at > now() - ${windowSql})
              + ${windowSql} - now())))::int as wait,
            max(seq)::int as top
          from session_replaced_tokens where session_id = ${current.id}::uuid`,
      );
      if (recent!.count >= REFRESH_LIMIT)
        return { kind: 'limited', row: current, wait: Math.max(1, Number(recent!.wait ?? 1)) };
      const generation = Math.max(current.generation, Number(recent!.top ?? 0)) + 1;
      const family = current.family ?? newTokenFamily();
      const successor = successorsOf(deps.keys, token, { family, generation })[0]!;
      // A token without its session's locator (the login's, one made before locators or under a
      // key no longer held) is known by its row alone: kept while the session lives.
      const lifelong =
        current.family === null || !carries(deps.keys, token, { family, generation: current.generation });
      await tx
        .update(sessions)
        .set({
          tokenHash: hashSessionToken(successor),
          previousTokenHash: old,
          rotatedAt: sql`now()`,
          lastSeenAt: sql`now()`,
          tokenFamily: family,
          generation,
        })
        .where(eq(sessions.id, current.id));
      await rows(
        tx,
        sql`with added as (
          insert into session_replaced_tokens (token_hash, session_id, seq, replaced_at, successor_masks, lifelong)
          values (${old}::text, ${current.id}::uuid, ${generation}::int, now(),
                  ${maskSuccessor(deps.keys, token, successor)}::text, ${lifelong}::boolean)
          on conflict (token_hash) do nothing
        ), unmasked as (
          update session_replaced_tokens set successor_masks = null
          where session_id = ${current.id}::uuid and seq < ${generation}::int and successor_masks is not null
        )
        delete from session_replaced_tokens
        where session_id = ${current.id}::uuid and not lifelong and replaced_at <= now() - ${windowSql}`,
      );
      return { kind: 'rotated', row: current, token: successor };
    }
    // Replaced already: by a refresh of a moment ago (the same successor), or long ago (theft).
    const [replaced] = await tx
      .select({
        ...returned,
        live: liveSql,
        fresh: sql<boolean>`${sessionReplacedTokens.replacedAt} > now() - make_interval(secs => ${REUSE_GRACE_SECONDS})`,
        current: sessions.tokenHash,
        family: sessions.tokenFamily,
        seq: sessionReplacedTokens.seq,
        masks: sessionReplacedTokens.successorMasks,
      })
      .from(sessionReplacedTokens)
      .innerJoin(sessions, eq(sessions.id, sessionReplacedTokens.sessionId))
      .where(and(eq(sessionReplacedTokens.tokenHash, old), eq(sessions.site, scope.site)))
      .for('update', { of: sessions });
    if (replaced !== undefined) {
      if (!replaced.live) return undefined;
      if (replaced.fresh) {
        // Its successor carries the session's locator at the generation its refresh made (or,
        // replaced before locators, none).
        const candidates = [
          ...(replaced.family === null
            ? []
            : successorsOf(deps.keys, token, { family: replaced.family, generation: replaced.seq })),
          ...successorsOf(deps.keys, token),
          ...(replaced.masks === null ? [] : unmaskSuccessors(deps.keys, token, replaced.masks)),
        ];
        const held = candidates.find((s) => hashSessionToken(s) === replaced.current);
        return held === undefined ? undefined : { kind: 'repeated', row: replaced, token: held };
      }
      await revoke(tx, replaced.id);
      return { kind: 'reused', row: replaced };
    }
    // Its row gone (past the refresh window): a token that carries a locator older than its
    // session's current generation was replaced long ago. Anything else is the plain miss.
    const locators = locatorsOf(deps.keys, token);
    if (locators.length === 0) return undefined;
    const found = await tx
      .select({ ...returned, live: liveSql, family: sessions.tokenFamily, generation: sessions.generation })
      .from(sessions)
      .where(
        and(
          inArray(
            sessions.tokenFamily,
            locators.map((l) => l.family),
          ),
          eq(sessions.site, scope.site),
        ),
      )
      .for('update');
    const stolen = found.find(
      (row) => row.live && locators.some((l) => l.family === row.family && l.generation < row.generation),
    );
    if (stolen === undefined) return undefined;
    await revoke(tx, stolen.id);
    return { kind: 'reused', row: stolen };
  });
  if (outcome?.kind === 'limited') throw refreshLimited(outcome.wait);
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

/** A stolen token's replay: the whole session ends (reason `refresh_reuse`). */
async function revoke(tx: Db, id: string): Promise<void> {
  await tx.update(sessions).set({ revokedAt: sql`now()`, revokeReason: 'refresh_reuse' }).where(eq(sessions.id, id));
}
