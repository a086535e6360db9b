// A ticket redeemed (issue 28, point 3): the change it stands for (an email or phone verified, a
// password reset, an email changed), once, with the ticket used in the same transaction.
import type { components } from '@user-accounts/client';
import { and, eq, sql } from 'drizzle-orm';
import { users } from '../db/schema.ts';
import { invalidTicket, sqlState } from '../errors.ts';
import type { HookDeps } from '../kernel/account-hooks.ts';
import type { DeploymentKeys } from '../kernel/deployment-keys.ts';
import { isUuid } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import type { EventEntry } from '../kernel/outbox.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { weakPasswordReason } from '../passwords/hasher.ts';
import { emailTaken } from './create.ts';
import { hashNewPassword, type NewPasswordDeps, weakPassword } from './new-password.ts';
import {
  type CodeGuard,
  ENDED_BY,
  endTickets,
  findCodeCounted,
  findTicket,
  type Purpose,
  useTicket,
} from './tickets.ts';

type RedeemTicketRequest = components['schemas']['RedeemTicketRequest'];
export type RedeemStatus = components['schemas']['RedeemTicketResponse']['result']['status'];

/** The purposes redeemed here; a login ticket is redeemed by login-tickets.ts. */
type ChangePurpose = Exclude<Purpose, 'login' | 'login_code'>;

const STATUS: Record<ChangePurpose, RedeemStatus> = {
  verify_email: 'email verified',
  verify_phone: 'phone verified',
  reset_password: 'password reset',
  change_email: 'email changed',
};

/** What a redeem changes, as update's changedfields name it. */
const CHANGED: Record<ChangePurpose, string[]> = {
  verify_email: ['emailVerified'],
  verify_phone: ['phoneVerified'],
  reset_password: ['password'],
  change_email: ['email', 'emailVerified'],
};

export interface Redeemed {
  userId: string;
  status: RedeemStatus;
  /** The account's version after the change, for its ETag. */
  version: number;
}

/**
 * Redeems `input`'s ticket in the scope's site (checked against the spec, its password against
 * the rules that need no account): 422 invalid_ticket for every miss, 409 email_taken when a
 * change_email's address was taken since, 400 for a reset's password; a refused password leaves
 * the ticket usable.
 */
export async function redeemTicket(
  scope: WriteScope,
  deps: WriteDeps & HookDeps & NewPasswordDeps & { keys: DeploymentKeys; codeGuard: CodeGuard },
  input: RedeemTicketRequest,
): Promise<Redeemed> {
  const { site } = scope;
  if (input.purpose === 'login') throw new Error('a login ticket is redeemed by redeemLoginTicket');
  const purpose: ChangePurpose = input.purpose;
  const userId = input._userId !== undefined && isUuid(input._userId) ? input._userId : undefined;
  if (input._userId !== undefined && userId === undefined) throw invalidTicket();
  // A phone code's try counts toward the account's wrong codes (issue 57, G4): 429 while it is locked.
  const found =
    purpose === 'verify_phone' && userId !== undefined
      ? await findCodeCounted(deps.db, site, purpose, input.ticket, userId, deps.keys, deps.codeGuard)
      : await findTicket(deps.db, site, purpose, input.ticket, userId, deps.keys);
  if (found === undefined) throw invalidTicket();
  scope.report?.({ userId: found.userId });
  const account = and(eq(users.id, found.userId), inReachOf(site));

  let passwordHash: string | undefined;
  if (input.password !== undefined) {
    // The password rules that need the account; refused, the ticket stays usable.
    const [row] = await deps.db.select({ email: users.email, name: users.name }).from(users).where(account);
    if (row === undefined) throw invalidTicket();
    const reason = weakPasswordReason(input.password, { email: row.email, name: row.name });
    if (reason !== undefined) throw weakPassword(reason);
    passwordHash = await hashNewPassword(scope, deps, input.password);
  }

  const set: Record<ChangePurpose, () => Partial<Record<keyof typeof users.$inferInsert, unknown>>> = {
    verify_email: () => ({ emailVerifiedAt: sql`coalesce(${users.emailVerifiedAt}, now())` }),
    verify_phone: () => ({ phoneVerifiedAt: sql`coalesce(${users.phoneVerifiedAt}, now())` }),
    // A new password is not the one a verify found breached, nor one set before the inbox was proven.
    reset_password: () => ({ passwordHash, passwordBreached: false, passwordUnproven: false }),
    change_email: () => ({ email: found.newEmail!, emailVerifiedAt: sql`now()` }),
  };
  const written = await inWrite(
    scope,
    deps,
    'redeem',
    (w: { version: number; ended: EventEntry[] }) => ({
      userId: found.userId,
      status: 200,
      outcome: STATUS[purpose],
      changed: CHANGED[purpose],
      moreEvents: w.ended,
    }),
    async (tx) => {
      // Used here, once: of many redeems at once, one deletes the row and the others find none.
      if (!(await useTicket(tx, found.id))) return undefined;
      const [row] = await tx
        .update(users)
        .set({ ...set[purpose](), updatedAt: sql`now()` } as never)
        .where(account)
        .returning({ version: users.version });
      if (row === undefined) return undefined;
      // What this change ends: a new password ends the other resets, a new email every ticket that stood on the old one.
      if (purpose === 'reset_password') await endTickets(tx, found.userId, ENDED_BY.password);
      if (purpose === 'change_email') await endTickets(tx, found.userId, ENDED_BY.email);
      // A new password: the other domains' hooks, in this write (its sessions end: sessions/hooks.ts).
      const ended = purpose === 'reset_password' ? await deps.accountHooks.passwordChanged(tx, found.userId) : [];
      return { version: row.version, ended };
    },
  ).catch((error: unknown) => {
    // The new email was taken since the ticket was issued: nothing changed, the ticket stays.
    if (sqlState(error) === '23505') throw emailTaken();
    throw error;
  });
  if (written === undefined) throw invalidTicket();
  return { userId: found.userId, status: STATUS[purpose], version: written.version };
}
