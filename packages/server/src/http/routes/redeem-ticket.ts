import type { components } from '@user-accounts/client';
import { and, eq, sql } from 'drizzle-orm';
import { isUuid } from '../../accounts/ids.ts';
import { ENDED_BY, endTickets, findTicket, type Purpose, useTicket } from '../../accounts/tickets.ts';
import { users } from '../../db/schema.ts';
import { weakPasswordReason } from '../../passwords/hasher.ts';
import { ApiError, sqlState } from '../errors.ts';
import { etagOf } from '../etag.ts';
import { defineOperation } from '../operation.ts';
import { runWrite } from '../run-write.ts';
import { invalidRequest } from '../validation.ts';
import { emailTaken } from './create-user.ts';
import { hashPassword, inReach, refuseBreached, validBody, weakPassword } from './shared.ts';

type RedeemTicketRequest = components['schemas']['RedeemTicketRequest'];
type RedeemTicketResponse = components['schemas']['RedeemTicketResponse'];
type Status = RedeemTicketResponse['result']['status'];

/** Every miss, whatever it was: one body. */
const invalidTicket = () => new ApiError(422, 'invalid_ticket', 'This ticket cannot be used; ask for a new one.');

const STATUS: Record<Purpose, Status> = {
  verify_email: 'email verified',
  verify_phone: 'phone verified',
  reset_password: 'password reset',
  change_email: 'email changed',
};

/** What a redeem changes, as update's changedfields name it. */
const CHANGED: Record<Purpose, string[]> = {
  verify_email: ['emailVerified'],
  verify_phone: ['phoneVerified'],
  reset_password: ['password'],
  change_email: ['email', 'emailVerified'],
};

export const redeemTicket = defineOperation({
  name: 'redeemTicket',
  method: 'POST',
  path: '/api/1/user/ticket/redeem',
  scope: 'write',
  request: { body: 'RedeemTicketRequest' },
  writes: 'redeem',
  parse(c) {
    const input: RedeemTicketRequest = validBody(c, 'RedeemTicketRequest');
    const resetting = input.purpose === 'reset_password';
    if (resetting !== (input.password !== undefined)) {
      throw invalidRequest('password goes with reset_password, and only with it.', [
        {
          pointer: '/password',
          code: resetting ? 'required' : 'not_allowed',
          message: resetting ? 'is required for reset_password' : 'is for reset_password only',
        },
      ]);
    }
    if (input.purpose === 'verify_phone' && input._userId === undefined) {
      throw invalidRequest('A phone code is redeemed with the account it was sent for.', [
        { pointer: '/_userId', code: 'required', message: 'is required for verify_phone' },
      ]);
    }
    // A common password is refused before the ticket is looked at; the account's own details after.
    if (input.password !== undefined) {
      const reason = weakPasswordReason(input.password, {});
      if (reason !== undefined) throw weakPassword(reason);
    }
    return input;
  },
  async handle(c, input) {
    const { database } = c.get('deps');
    const site = c.get('token').site;
    const purpose: Purpose = input.purpose;
    const userId = input._userId !== undefined && isUuid(input._userId) ? input._userId : undefined;
    if (input._userId !== undefined && userId === undefined) throw invalidTicket();
    const found = await findTicket(database.db, site, purpose, input.ticket, userId);
    if (found === undefined) throw invalidTicket();
    c.get('write').userId = found.userId;
    const account = and(eq(users.id, found.userId), inReach(c));

    let passwordHash: string | undefined;
    if (input.password !== undefined) {
      // The password rules that need the account; refused, the ticket stays usable.
      const [row] = await database.db.select({ email: users.email, name: users.name }).from(users).where(account);
      if (row === undefined) throw invalidTicket();
      const reason = weakPasswordReason(input.password, { email: row.email, name: row.name });
      if (reason !== undefined) throw weakPassword(reason);
      await refuseBreached(c, input.password);
      passwordHash = await hashPassword(c, input.password);
    }

    const set: Record<Purpose, () => Partial<Record<keyof typeof users.$inferInsert, unknown>>> = {
      verify_email: () => ({ emailVerifiedAt: sql`coalesce(${users.emailVerifiedAt}, now())` }),
      verify_phone: () => ({ phoneVerifiedAt: sql`coalesce(${users.phoneVerifiedAt}, now())` }),
      // A new password is not the one a verify found breached.
      reset_password: () => ({ passwordHash, passwordBreached: false }),
      change_email: () => ({ email: found.newEmail!, emailVerifiedAt: sql`now()` }),
    };
    const written = await runWrite(
      c,
      { userId: found.userId, status: 200, outcome: STATUS[purpose], changed: CHANGED[purpose] },
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
        return row;
      },
    ).catch((error: unknown) => {
      // The new email was taken since the ticket was issued: nothing changed, the ticket stays.
      if (sqlState(error) === '23505') throw emailTaken();
      throw error;
    });
    if (written === undefined) throw invalidTicket();
    c.header('ETag', etagOf(written.version));
    c.header('Cache-Control', 'no-store');
    return c.json({ result: { _userId: found.userId, status: STATUS[purpose] } } satisfies RedeemTicketResponse, 200);
  },
});
