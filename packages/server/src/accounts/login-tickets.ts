// A login ticket redeemed (issue 44, point 6): a sign-in by a link or a 6-digit code the site
// mailed, ending as `verify` ends. The ticket is found as every ticket is (accounts/tickets.ts: a
// link's SHA-256, a code's HMAC with its tries counted first), then, in one transaction with the
// account locked: refused for a disabled account (the ticket stays), used, the email marked
// verified (the person proved the inbox), and the account's enabled second factors read. With
// any, the answer is verify's 403 second_factor_required and its ticket for factor/verify: a
// second factor is never skipped because the first step was not a password.
//
// An email that was never verified, proven here, ends what a stranger may have left (issue 57,
// G5; the pre-hijacking attacks of Sudhodanan and Paverd, 2022): someone could have signed up
// with this address and their own password before its owner came. In the same transaction the
// account's sessions made before end (reason inbox_proven), its other pending tickets end, and a
// password it has no longer signs in by itself (password_unproven: verify answers 403
// password_reset_required until a password is set again).
import { and, eq, sql } from 'drizzle-orm';
import { users } from '../db/schema.ts';
import { type ApiError, accountDisabled, invalidTicket, secondFactorRequired } from '../errors.ts';
import { enabledFactorTypes } from '../factors/factors.ts';
import { generationOf, makeLoginTicket } from '../factors/login-ticket.ts';
import type { HookDeps } from '../kernel/account-hooks.ts';
import type { DeploymentKeys } from '../kernel/deployment-keys.ts';
import { isUuid } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import type { EventEntry } from '../kernel/outbox.ts';
import { refusalOf } from '../kernel/sign-in-gate.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { type CodeGuard, ENDED_BY, endTickets, findCodeCounted, findTicket, useTicket } from './tickets.ts';

/** A code is six digits; a link's ticket is 43 base64url characters, never that. */
const CODE = /^\d{6}$/;

export interface LoginRedeemed {
  userId: string;
  /** The account's version after the redeem, for its ETag. */
  version: number;
}

interface Written {
  version: number;
  /** The email was not verified before: a change (user.updated). */
  verified: boolean;
  /** The sessions the proof of the inbox ended (session.revoked events). */
  ended: EventEntry[];
  /** The account's enabled second factors' kinds, when it has any, and their generation. */
  factors?: string[];
  generation?: string;
}

/**
 * Redeems a `login` ticket in the scope's site: the account's id, or 422 invalid_ticket for every
 * miss (unknown, used, expired, another site's or purpose's, a code for another account or after
 * its fifth wrong try, a link named with another `_userId`), 403 account_disabled, 403
 * second_factor_required (the ticket used, the email verified: only the second step is left), 429
 * too_many_attempts for a code while the account's wrong codes have it locked.
 */
export async function redeemLoginTicket(
  scope: WriteScope,
  deps: WriteDeps & HookDeps & { keys: DeploymentKeys; codeGuard: CodeGuard },
  input: { ticket: string; _userId?: string | undefined },
): Promise<LoginRedeemed> {
  const { site } = scope;
  // A UUID in any letter case (as the database compares it): the ticket's account is compared below as text.
  const named = input._userId?.toLowerCase();
  if (named !== undefined && !isUuid(named)) throw invalidTicket();
  // A code goes with the account it was sent for; a link finds its account by itself.
  const code = named !== undefined && CODE.test(input.ticket);
  // A code's try counts toward the account's wrong codes (issue 57, G4): 429 while it is locked.
  const found = code
    ? await findCodeCounted(deps.db, site, 'login_code', input.ticket, named!, deps.keys, deps.codeGuard)
    : await findTicket(deps.db, site, 'login', input.ticket, undefined, deps.keys);
  if (found === undefined || (named !== undefined && found.userId !== named)) throw invalidTicket();
  const userId = found.userId;
  scope.report?.({ userId });

  let refusal: ApiError = invalidTicket();
  const written = await inWrite(
    scope,
    deps,
    'redeem',
    (w: Written) =>
      w.factors === undefined
        ? {
            userId,
            status: 200,
            outcome: 'login verified',
            changed: ['emailVerified'],
            emits: w.verified,
            moreEvents: w.ended,
          }
        : {
            userId,
            status: 403,
            outcome: 'second_factor_required',
            changed: ['emailVerified'],
            emits: w.verified,
            moreEvents: w.ended,
          },
    async (tx): Promise<Written | undefined> => {
      // Locked as an update would: a disable at the same moment either sees this login or refuses it.
      const [account] = await tx
        .select({
          disabled: users.disabled,
          verifiedAt: users.emailVerifiedAt,
          version: users.version,
          hasPassword: sql<boolean>`${users.passwordHash} is not null`,
        })
        .from(users)
        .where(and(eq(users.id, userId), inReachOf(site)))
        .for('update');
      if (account === undefined) return undefined;
      if (account.disabled) {
        // As verify refuses the right password of a disabled account; the ticket stays.
        refusal = accountDisabled();
        return undefined;
      }
      // The account's organization wants it signed in through its IdP (sso/enforcement.ts): the ticket stays.
      const refused = await refusalOf(deps, tx, site, { userId }, { kind: 'login_ticket' });
      if (refused !== undefined) {
        refusal = refused;
        return undefined;
      }
      // Used here, once: of many redeems at once, one deletes the row and the others find none.
      if (!(await useTicket(tx, found.id))) return undefined;
      let version = account.version;
      let ended: EventEntry[] = [];
      if (account.verifiedAt === null) {
        // The inbox proven for the first time: what was made before it may be a stranger's.
        const [row] = await tx
          .update(users)
          .set({
            emailVerifiedAt: sql`now()`,
            ...(account.hasPassword && { passwordUnproven: true }),
            updatedAt: sql`now()`,
          })
          .where(eq(users.id, userId))
          .returning({ version: users.version });
        version = row!.version;
        // The other domains' hooks: what was signed in before may be a stranger's (sessions/hooks.ts).
        ended = await deps.accountHooks.inboxProven(tx, userId);
        await endTickets(tx, userId, ENDED_BY.inbox);
      }
      const verified = account.verifiedAt === null;
      const factors = await enabledFactorTypes(tx, userId);
      if (factors.length === 0) return { version, verified, ended };
      return { version, verified, ended, factors, generation: await generationOf(tx, userId) };
    },
  );
  if (written === undefined) throw refusal;
  if (written.factors !== undefined) {
    const ticket = await makeLoginTicket(deps, site, userId, written.generation!, 'otp');
    throw secondFactorRequired('login ticket', ticket, written.factors);
  }
  return { userId, version: written.version };
}
