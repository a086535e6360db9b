import type { AuthenticationResponseJSON } from '@simplewebauthn/server';
import type { components } from '@user-accounts/client';
import { invalidRequest, invalidTicket } from '../../errors.ts';
import { verifySecondFactor as verify } from '../../factors/factors.ts';
import { issueSession } from '../../sessions/issue.ts';
import {
  IDENTITY_AND_CODE,
  IDENTITY_AND_PASSKEY,
  LOGIN_TICKET_AND_CODE,
  LOGIN_TICKET_AND_PASSKEY,
  type LoginMethod,
  PASSWORD_AND_CODE,
  PASSWORD_AND_PASSKEY,
} from '../../sessions/rules.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { endUserAddress, sessionDepsOf, validBody } from './shared.ts';

type VerifySecondFactorResponse = components['schemas']['VerifySecondFactorResponse'];

/** The session's method by the login's first step (a password, or a login link or code) and the second. */
const METHODS: Record<'pwd' | 'otp' | 'fed', Record<'code' | 'passkey', LoginMethod>> = {
  pwd: { code: PASSWORD_AND_CODE, passkey: PASSWORD_AND_PASSKEY },
  otp: { code: LOGIN_TICKET_AND_CODE, passkey: LOGIN_TICKET_AND_PASSKEY },
  fed: { code: IDENTITY_AND_CODE, passkey: IDENTITY_AND_PASSKEY },
};

export const verifySecondFactor = defineOperation({
  name: 'verifySecondFactor',
  method: 'POST',
  path: '/api/1/user/factor/verify',
  scope: 'verify',
  request: { body: 'VerifySecondFactorRequest' },
  writes: 'factor_verify',
  parse(c) {
    const body = c.get('body');
    // Said plainly, before the schema's oneOf would report both fields as missing or one as extra.
    if (
      body !== null &&
      typeof body === 'object' &&
      !Array.isArray(body) &&
      ['code', 'recoveryCode', 'passkey'].filter((name) => name in body).length !== 1
    ) {
      throw invalidRequest('Give exactly one of code, recoveryCode or passkey, with the ticket.', []);
    }
    return {
      fields: validBody(c, 'VerifySecondFactorRequest'),
      address: endUserAddress(c.req.header('x-end-user-ip')),
    };
  },
  // The mock: a login that asked for a session is answered with one (a real token, test-signed: mock.md).
  mockExample: ({ fields }) => (fields.session === undefined ? undefined : 'verified_with_session'),
  async handle(c, { fields, address }) {
    const { factorKeys, verifyLimits, lockout } = c.get('deps');
    const { userId, first, passwordHash } = await verify(
      writeScopeOf(c),
      { ...writeDepsOf(c), factorKeys, verifyLimits, lockout },
      {
        ticket: fields.ticket,
        code: fields.code,
        recoveryCode: fields.recoveryCode,
        passkey: fields.passkey as unknown as AuthenticationResponseJSON | undefined,
      },
    );
    // The login is complete: the session its caller asked for (sessions/issue.ts).
    const session =
      fields.session === undefined
        ? undefined
        : await issueSession(writeScopeOf(c), sessionDepsOf(c), {
            userId,
            method: METHODS[first][fields.passkey === undefined ? 'code' : 'passkey'],
            userAgent: fields.session.userAgent,
            ip: address,
            lifetime: fields.session.lifetime,
            // A password change spends the ticket (factors/login-ticket.ts): one made since the
            // second step was accepted makes no session either, as the ticket would answer now.
            seen: { stale: () => invalidTicket('second factor'), passwordHash },
          });
    return c.json(
      {
        result: { _userId: userId, ...(session && { session }), status: 'second factor verified' },
      } satisfies VerifySecondFactorResponse,
      200,
    );
  },
});
