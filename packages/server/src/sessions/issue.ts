// A session made by a completed login (issue 43, point 1): verify, factor/verify and passkey/verify
// call issueSession once the login answered 200. One transaction: the account locked (a disable,
// delete or password change at the same moment either sees this session and ends it, or ends
// first and refuses it), the session inserted, the account's oldest live sessions past the limit
// ended (its own and its impersonations counted apart), the audit row and the events. The token is shown once, in the answer; only its hash is kept.
//
// The login checked its credential before this transaction (a password's hash takes a while), so
// an ending that commits between that check and this lock ended every session but this one. The
// locked read therefore checks again what the login saw: the account still in reach, enabled and,
// for a login that checked a password, with that password's hash. Otherwise the login is refused
// with the answer it would get now (LoginSeen.stale), and no session is made.
import { and, desc, eq, inArray, isNotNull, isNull, sql } from 'drizzle-orm';
import { passwordResetRequired } from '../accounts/verify.ts';
import type { Db } from '../db/client.ts';
import { sessions, users } from '../db/schema.ts';
import { type ApiError, accountDisabled } from '../errors.ts';
import { uuidv7 } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import type { AccessTokenSigner } from './access-tokens.ts';
import {
  createdEvent,
  eventColumns,
  type Impersonator,
  type LoginMethod,
  lifetimesOf,
  liveSql,
  MAX_LIVE_IMPERSONATIONS,
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
  /** The enterprise connection the login came through (sso/callback); kept with the session. */
  connectionId?: string | undefined;
  /** What the login saw of the account, and what it answers once that no longer holds. */
  seen: LoginSeen;
}

/**
 * What a login checked of the account, checked again under its lock when the session is inserted.
 * Disabled since: 403 account_disabled, as every login answers a disabled account.
 */
export interface LoginSeen {
  /**
   * The login's answer now that its account is out of reach (deleted since) or its password is no
   * longer the one it checked: the answer the same login gets once the change is made (verify's
   * and passkey/verify's 422 invalid_credentials, factor/verify's 422 invalid_ticket…).
   */
  stale: () => ApiError;
  /**
   * The account's password hash as the login checked it (after the login's own rehash, when it
   * made one; null for none): a login that checked a password, or whose ticket a password change
   * spends (factor/verify). Absent: the login did not stand on the password (a passkey alone).
   */
  passwordHash?: string | null;
  /**
   * Whether the login's password is right for the account's hash now (null: it has none): asked
   * when the hash moved, which another login's rehash of the same password does too. Right, the
   * session is made with the hash as it now is; wrong (the password changed), the login is stale.
   * Absent: any move is a change.
   */
  rightFor?: (passwordHash: string | null) => Promise<boolean>;
}

/** A session as the answer that made (or refreshed) it shows it: the only time its token is seen. */
export interface IssuedSession {
  sessionId: string;
  token: string;
  expiresAt: string;
  accessToken: string;
  accessTokenExpiresAt: string;
}

/** How many times a moved hash is judged again before the login is refused (each move is a write racing it). */
const MOVES_JUDGED = 3;

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
  const { seen } = request;
  let passwordHash = seen.passwordHash;
  // Why the locked read refused (its transaction writes nothing then): the account as it was read.
  let refused: { why: 'gone' | 'disabled' | 'moved' | 'unproven'; passwordHash?: string | null } | undefined;
  const write = async (tx: Db) => {
    // Each run (inWrite may run it again after a serialization failure) judges afresh.
    refused = undefined;
    // Locked as an update would (not its key: inserts that reference it go on), so that a write
    // ending the account's sessions waits for this one to commit, or this waits for it and
    // reads the account as it left it. One read by the primary key.
    const [account] = await tx
      .select({ disabled: users.disabled, passwordHash: users.passwordHash, unproven: users.passwordUnproven })
      .from(users)
      .where(and(eq(users.id, request.userId), inReachOf(scope.site)))
      .for('no key update');
    if (account === undefined) refused = { why: 'gone' };
    else if (account.disabled) refused = { why: 'disabled' };
    // A login that stood on a password the inbox's proof has since set aside (accounts/login-tickets.ts).
    else if (account.unproven && request.method.amr.includes('pwd')) refused = { why: 'unproven' };
    else if (passwordHash !== undefined && account.passwordHash !== passwordHash)
      refused = { why: 'moved', passwordHash: account.passwordHash };
    if (refused !== undefined) return undefined;
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
        connectionId: request.connectionId ?? null,
      })
      .returning({
        id: sessions.id,
        userId: sessions.userId,
        aal: sessions.aal,
        amr: sessions.amr,
        expiresAt: sessions.expiresAt,
        impersonator: sessions.impersonator,
      });
    // Past the limit, the oldest live ones end (this one is the newest). The person's own
    // sessions and impersonations are counted apart, each against its own bound: an impersonation
    // never ends one of the person's sessions (the impersonate scope cannot, with session/revoke),
    // nor a login of the person a support agent's impersonation.
    const beyond = tx
      .select({ id: sessions.id })
      .from(sessions)
      .where(
        and(
          eq(sessions.userId, request.userId),
          liveSql,
          impersonator === undefined ? isNull(sessions.impersonator) : isNotNull(sessions.impersonator),
        ),
      )
      .orderBy(desc(sessions.createdAt), desc(sessions.id))
      .offset(impersonator === undefined ? MAX_LIVE_SESSIONS : MAX_LIVE_IMPERSONATIONS);
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
  };
  for (let judged = 0; ; judged++) {
    const written = await inWrite(scope, deps, operation, done, write);
    if (written !== undefined) {
      const { signed } = written;
      return {
        sessionId: id,
        token,
        expiresAt: written.made.expiresAt.toISOString(),
        accessToken: signed.accessToken,
        accessTokenExpiresAt: signed.accessTokenExpiresAt.toISOString(),
      };
    }
    // Changed since the login was checked: refused as the login itself would be now. A moved hash
    // of the same password (another login's rehash) is no change: the login goes on with the hash
    // as it now is.
    const { why, passwordHash: now = null } = refused!;
    if (why === 'disabled') throw accountDisabled();
    if (why === 'unproven') throw passwordResetRequired();
    if (why === 'gone' || seen.rightFor === undefined || judged >= MOVES_JUDGED) throw seen.stale();
    if (!(await seen.rightFor(now))) throw seen.stale();
    passwordHash = now;
  }
}
