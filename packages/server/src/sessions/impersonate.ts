// Impersonation for support, with a paper trail (issue 43, point 7): a session of the account made
// without the person's login, for a member of the site's support staff. It is a session as any
// other (issueSession makes it, in one transaction with its audit row and its event), marked
// everywhere it is shown: the session row, session/verify, session/list, the person's data, the
// access token's `act`, the audit row (operation session_impersonate) and session.created.
import { and, eq } from 'drizzle-orm';
import { users } from '../db/schema.ts';
import { accountDisabled, userNotFound } from '../errors.ts';
import { isUuid } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import type { WriteScope } from '../kernel/unit-of-work.ts';
import { type IssuedSession, issueSession, type SessionDeps } from './issue.ts';
import { IMPERSONATION, type Impersonator } from './rules.ts';

/** The longest an impersonation may live, and how long it lives unless asked for less (seconds). */
export const MAX_IMPERSONATION_SECONDS = 3600;
export const DEFAULT_IMPERSONATION_SECONDS = 1800;

export interface ImpersonationRequest extends Impersonator {
  userId: string;
  /** Seconds; at most MAX_IMPERSONATION_SECONDS (the spec's bound), never past the site's lifetime. */
  lifetime?: number | undefined;
  userAgent?: string | undefined;
  ip?: string | undefined;
}

/**
 * Starts an impersonation: 404 user_not_found when no account in reach has the id (unknown,
 * another site's, deleted), 403 account_disabled for a disabled one (it can hold no session; a
 * disable at the same moment is refused the same by issueSession's locked read).
 */
export async function impersonate(
  scope: WriteScope,
  deps: SessionDeps,
  request: ImpersonationRequest,
): Promise<IssuedSession> {
  if (!isUuid(request.userId)) throw userNotFound();
  scope.report?.({ userId: request.userId });
  const [account] = await deps.db
    .select({ disabled: users.disabled })
    .from(users)
    .where(and(eq(users.id, request.userId), inReachOf(scope.site)));
  if (account === undefined) throw userNotFound();
  if (account.disabled) throw accountDisabled();
  return issueSession(scope, deps, {
    userId: request.userId,
    method: IMPERSONATION,
    userAgent: request.userAgent,
    ip: request.ip,
    lifetime: Math.min(request.lifetime ?? DEFAULT_IMPERSONATION_SECONDS, MAX_IMPERSONATION_SECONDS),
    impersonator: { actor: request.actor, reason: request.reason },
    // Deleted since it was read: as if before.
    seen: { stale: userNotFound },
  });
}
