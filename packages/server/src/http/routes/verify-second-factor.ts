import type { AuthenticationResponseJSON } from '@simplewebauthn/server';
import type { components } from '@user-accounts/client';
import { invalidRequest } from '../../contract/validation.ts';
import { verifySecondFactor as verify } from '../../factors/factors.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type VerifySecondFactorResponse = components['schemas']['VerifySecondFactorResponse'];

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
    return validBody(c, 'VerifySecondFactorRequest');
  },
  async handle(c, fields) {
    const { factorKeys, verifyLimits, lockout } = c.get('deps');
    const userId = await verify(
      writeScopeOf(c),
      { ...writeDepsOf(c), factorKeys, verifyLimits, lockout },
      {
        ticket: fields.ticket,
        code: fields.code,
        recoveryCode: fields.recoveryCode,
        passkey: fields.passkey as unknown as AuthenticationResponseJSON | undefined,
      },
    );
    return c.json(
      { result: { _userId: userId, status: 'second factor verified' } } satisfies VerifySecondFactorResponse,
      200,
    );
  },
});
