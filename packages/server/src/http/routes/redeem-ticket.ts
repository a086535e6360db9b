import type { components } from '@user-accounts/client';
import { weakPassword } from '../../accounts/new-password.ts';
import { redeemTicket as redeem } from '../../accounts/redeem.ts';
import { invalidRequest } from '../../contract/validation.ts';
import { weakPasswordReason } from '../../passwords/hasher.ts';
import { defineOperation } from '../define-operation.ts';
import { etagOf } from '../etag.ts';
import { writeScopeOf } from '../run-write.ts';
import { deploymentKeysOfRequest, newPasswordDepsOf, validBody } from './shared.ts';

type RedeemTicketRequest = components['schemas']['RedeemTicketRequest'];
type RedeemTicketResponse = components['schemas']['RedeemTicketResponse'];

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
    const { userId, status, version } = await redeem(
      writeScopeOf(c),
      { ...newPasswordDepsOf(c), keys: await deploymentKeysOfRequest(c) },
      input,
    );
    c.header('ETag', etagOf(version));
    c.header('Cache-Control', 'no-store');
    return c.json({ result: { _userId: userId, status } } satisfies RedeemTicketResponse, 200);
  },
});
