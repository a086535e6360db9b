import type { AuthenticationResponseJSON } from '@simplewebauthn/server';
import type { components } from '@user-accounts/client';
import { verifyPasskey as verify } from '../../factors/passkeys.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type VerifyPasskeyResponse = components['schemas']['VerifyPasskeyResponse'];

export const verifyPasskey = defineOperation({
  name: 'verifyPasskey',
  method: 'POST',
  path: '/api/1/user/passkey/verify',
  scope: 'verify',
  request: { body: 'VerifyPasskeyRequest' },
  writes: 'passkey_verify',
  parse: (c) => validBody(c, 'VerifyPasskeyRequest'),
  async handle(c, fields) {
    const userId = await verify(writeScopeOf(c), writeDepsOf(c), {
      // The spec's schema is WebAuthn's AuthenticationResponseJSON; the library checks the rest.
      response: fields.response as unknown as AuthenticationResponseJSON,
    });
    return c.json({ result: { _userId: userId, status: 'passkey verified' } } satisfies VerifyPasskeyResponse, 200);
  },
});
