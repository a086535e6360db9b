import type { RegistrationResponseJSON } from '@simplewebauthn/server';
import type { components } from '@user-accounts/client';
import { addPasskey } from '../../factors/passkeys.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type AddPasskeyFactorResponse = components['schemas']['AddPasskeyFactorResponse'];

export const addPasskeyFactor = defineOperation({
  name: 'addPasskeyFactor',
  method: 'POST',
  path: '/api/1/user/factor/passkey',
  scope: 'write',
  request: { body: 'AddPasskeyFactorRequest' },
  writes: 'factor_add',
  parse: (c) => validBody(c, 'AddPasskeyFactorRequest'),
  async handle(c, fields) {
    const added = await addPasskey(writeScopeOf(c), writeDepsOf(c), {
      userId: fields._userId,
      // The spec's schema is WebAuthn's RegistrationResponseJSON; the library checks the rest.
      response: fields.response as unknown as RegistrationResponseJSON,
      label: fields.label,
    });
    const result = {
      factorId: added.factorId,
      status: 'factor enabled' as const,
      ...(added.recoveryCodes === undefined ? {} : { recoveryCodes: added.recoveryCodes }),
    };
    return c.json({ result } satisfies AddPasskeyFactorResponse, 201);
  },
});
