// A session made by a completed login (issue 43, point 1): verify, factor/verify and passkey/verify
// call issueSession once the login answered 200. One transaction: the account locked (a disable or
// delete at the same moment either sees this session and ends it, or ends first and refuses it),
// the session inserted, the account's oldest live sessions past the limit ended, the audit row and
// the events. The token is shown once, in the answer; only its hash is kept.
import { and, desc, eq, inArray, sql } from 'drizzle-orm';
import { uuidv7 } from '../accounts/ids.ts';
import { inReachOf } from '../accounts/in-reach.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../accounts/unit-of-work.ts';
import { sessions, users } from '../db/schema.ts';
import { ApiError } from '../errors.ts';
import type { AccessTokenSigner } from './access-tokens.ts';
import {
  createdEvent,
  eventColumns,
  type Impersonator,
  type LoginMethod,
  lifetimesOf,
  liveSql,
  MAX_LIVE_SESSIONS,
  revokedEvent,
  type SessionEventRow,
} from './rules.ts';
import { hashSessionToken, newSessionToken } from './tokens.ts';

export interface SessionDeps extends WriteDeps {
  accessTokens: AccessTokenSigner;
}

/** What the login's caller asked for (`session` of the request) and what the login was. */
export interface SessionRequest {
  userId: string;
  method: LoginMethod;
  userAgent?: string | undefined;
  /** The end user's address in its canonical form (X-End-User-IP). */
  ip?: string | undefined;
  /** Seconds; only shortens the site's lifetime. */
  lifetime?: number | undefined;
  /**
   * Support staff signing in as the person (sessions/impersonate.ts): kept with the session, in
   * its event, its audit row (operation session_impersonate) and its access tokens (`act`).
   */
  impersonator?: Impersonator | undefined;
}

/** A session as the answer that made (or refreshed) it shows it: the only time its token is seen. */
export interface IssuedSession {
  sessionId: string;
  token: string;
  expiresAt: string;
  accessToken: string;
  accessTokenExpiresAt: string;
}

const accountDisabled = () => new ApiError(403, 'account_disabled', 'This account is disabled.');

export async function issueSession(
  scope: WriteScope,
  deps: SessionDeps,
  request: SessionRequest,
): Promise<IssuedSession> {
  const { lifetime: siteLifetime, idle } = await lifetimesOf(deps.db, scope.site);
  const lifetime = Math.min(siteLifetime, request.lifetime ?? siteLifetime);
  const token = newSessionToken();
  const id = uuidv7();
  const { impersonator } = request;
  const done = (w: { made: SessionEventRow; ended: SessionEventRow[] }) => ({
    userId: request.userId,
    ...(impersonator === undefined
      ? { status: 200, outcome: 'session created' }
      : { status: 201, outcome: 'impersonation started', impersonator }),
    moreEvents: [createdEvent(w.made), ...w.ended.map((row) => revokedEvent(row, 'limit'))],
  });
  const operation = impersonator === undefined ? 'session_create' : 'session_impersonate';
  const written = await inWrite(scope, deps, operation, done, async (tx) => {
    // Locked as an update would (not its key: inserts that reference it go on).
    const [account] = await tx
      .select({ disabled: users.disabled })
      .from(users)
      .where(and(eq(users.id, request.userId), inReachOf(scope.site)))
      .for('no key update');
    if (account === undefined || account.disabled) return undefined;
    const [made] = await tx
      .insert(sessions)
      .values({
        id,
        site: scope.site,
        userId: request.userId,
        tokenHash: hashSessionToken(token),
        expiresAt: sql`now() + make_interval(secs => ${lifetime})`,
        idleSeconds: idle,
        aal: request.method.aal,
        amr: request.method.amr,
        userAgent: request.userAgent ?? null,
        ip: request.ip ?? null,
        impersonator: impersonator ?? null,
      })
      .returning({
        id: sessions.id,
        userId: sessions.userId,
        aal: sessions.aal,
        amr: sessions.amr,
        expiresAt: sessions.expiresAt,
        impersonator: sessions.impersonator,
      });
    // Past the limit, the oldest live ones end (this one is the newest).
    const beyond = tx
      .select({ id: sessions.id })
      .from(sessions)
      .where(and(eq(sessions.userId, request.userId), liveSql))
      .orderBy(desc(sessions.createdAt), desc(sessions.id))
      .offset(MAX_LIVE_SESSIONS);
    const ended = await tx
      .update(sessions)
      .set({ revokedAt: sql`now()`, revokeReason: 'limit' })
      .where(inArray(sessions.id, beyond))
      .returning(eventColumns);
    // Signed before the commit (in memory, no query): a signer that cannot sign (503) leaves no
    // session behind that nobody holds a token of, counted toward the limit, its event sent.
    const signed = await deps.accessTokens.sign({
      site: scope.site,
      userId: request.userId,
      sessionId: id,
      amr: request.method.amr,
      aal: request.method.aal,
      notAfter: made!.expiresAt,
      ...(impersonator !== undefined && { actor: impersonator.actor }),
    });
    return { made: made!, ended, signed };
  });
  // Disabled (or deleted) since the login was checked: refused as the login itself would be.
  if (written === undefined) throw accountDisabled();
  const { signed } = written;
  return {
    sessionId: id,
    token,
    expiresAt: written.made.expiresAt.toISOString(),
    accessToken: signed.accessToken,
    accessTokenExpiresAt: signed.accessTokenExpiresAt.toISOString(),
  };
}
