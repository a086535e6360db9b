import type { components } from '@user-accounts/client';
import { redeemLoginTicket } from '../../accounts/login-tickets.ts';
import { weakPassword } from '../../accounts/new-password.ts';
import { redeemTicket as redeem } from '../../accounts/redeem.ts';
import { invalidRequest, invalidTicket } from '../../errors.ts';
import { weakPasswordReason } from '../../passwords/hasher.ts';
import { issueSession } from '../../sessions/issue.ts';
import { LOGIN_TICKET_LOGIN } from '../../sessions/rules.ts';
import { defineOperation } from '../define-operation.ts';
import { etagOf } from '../etag.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import {
  codeGuardOf,
  deploymentKeysOfRequest,
  endUserAddress,
  isLoginTicket,
  newPasswordDepsOf,
  sessionDepsOf,
  validBody,
} from './shared.ts';

type RedeemTicketRequest = components['schemas']['RedeemTicketRequest'];
type RedeemTicketResponse = components['schemas']['RedeemTicketResponse'];

const PURPOSES = [
  'verify_email',
  'verify_phone',
  'reset_password',
  'change_email',
  'login',
] as const satisfies readonly RedeemTicketRequest['purpose'][];

export const redeemTicket = defineOperation({
  name: 'redeemTicket',
  method: 'POST',
  path: '/api/1/user/ticket/redeem',
  scope: 'write',
  // A login ticket is a login: the verify scope redeems it, as it checks a password.
  alsoScope: { scope: 'verify', admits: isLoginTicket },
  request: { body: 'RedeemTicketRequest' },
  writes: 'redeem',
  parse(c) {
    // The schema's allOf (password with reset_password only, _userId with verify_phone), told in
    // words before the rest of the schema runs: toFieldErrors leaves a body's top-level allOf to the route.
    const body = c.get('body') as Partial<Record<keyof RedeemTicketRequest, unknown>> | null;
    if (body !== null && typeof body === 'object' && !Array.isArray(body) && PURPOSES.includes(body.purpose as never)) {
      checkPurposeRules(
        body.purpose as string,
        body.password !== undefined,
        body._userId !== undefined,
        body.session !== undefined,
      );
    }
    const input: RedeemTicketRequest = validBody(c, 'RedeemTicketRequest');
    const address = endUserAddress(c.req.header('x-end-user-ip'));
    // A password of reset_password is checked for being common only once it is a valid password.
    if (input.password !== undefined) {
      const reason = weakPasswordReason(input.password, {});
      if (reason !== undefined) throw weakPassword(reason);
    }
    return { input, address };
  },
  // The spec documents one example of the answer per purpose, each named after it (a login's
  // without a session when the request asked for none).
  mockExample: ({ input }) =>
    input.purpose === 'login' && input.session === undefined ? 'login_without_session' : input.purpose,
  async handle(c, { input, address }) {
    if (input.purpose === 'login') {
      const { userId, version } = await redeemLoginTicket(
        writeScopeOf(c),
        { ...writeDepsOf(c), keys: await deploymentKeysOfRequest(c), codeGuard: codeGuardOf(c) },
        input,
      );
      // The login is complete: the session its caller asked for (sessions/issue.ts).
      const session =
        input.session === undefined
          ? undefined
          : await issueSession(writeScopeOf(c), sessionDepsOf(c), {
              userId,
              method: LOGIN_TICKET_LOGIN,
              userAgent: input.session.userAgent,
              ip: address,
              lifetime: input.session.lifetime,
              // Deleted since: refused as a ticket of no account is.
              seen: { stale: invalidTicket },
            });
      c.header('ETag', etagOf(version));
      c.header('Cache-Control', 'no-store');
      return c.json(
        {
          result: { _userId: userId, ...(session && { session }), status: 'login verified' },
        } satisfies RedeemTicketResponse,
        200,
      );
    }
    const { userId, status, version } = await redeem(
      writeScopeOf(c),
      { ...newPasswordDepsOf(c), keys: await deploymentKeysOfRequest(c), codeGuard: codeGuardOf(c) },
      input,
    );
    c.header('ETag', etagOf(version));
    c.header('Cache-Control', 'no-store');
    return c.json({ result: { _userId: userId, status } } satisfies RedeemTicketResponse, 200);
  },
});

function checkPurposeRules(purpose: string, hasPassword: boolean, hasUserId: boolean, hasSession: boolean): void {
  const resetting = purpose === 'reset_password';
  if (resetting !== hasPassword) {
    throw invalidRequest('password goes with reset_password, and only with it.', [
      {
        pointer: '/password',
        code: resetting ? 'required' : 'not_allowed',
        message: resetting ? 'is required for reset_password' : 'is for reset_password only',
      },
    ]);
  }
  if (purpose !== 'login' && hasSession) {
    throw invalidRequest('session goes with a login ticket only.', [
      { pointer: '/session', code: 'not_allowed', message: 'is for login only' },
    ]);
  }
  if (purpose === 'verify_phone' && !hasUserId) {
    throw invalidRequest('A phone code is redeemed with the account it was sent for.', [
      { pointer: '/_userId', code: 'required', message: 'is required for verify_phone' },
    ]);
  }
}
