import type { components } from '@user-accounts/client';
import { invalidRequest } from '../../errors.ts';
import { loginOptions } from '../../factors/passkeys.ts';
import { defineOperation } from '../define-operation.ts';
import { deploymentKeysOfRequest, validBody } from './shared.ts';

type PasskeyLoginOptionsResponse = components['schemas']['PasskeyLoginOptionsResponse'];

export const passkeyLoginOptions = defineOperation({
  name: 'passkeyLoginOptions',
  method: 'POST',
  path: '/api/1/user/passkey/options',
  scope: 'verify',
  request: { body: 'PasskeyLoginOptionsRequest' },
  parse(c) {
    const body = c.get('body');
    // Said plainly, before the schema's `not` would report the body as a whole.
    if (body !== null && typeof body === 'object' && 'email' in body && '_userId' in body)
      throw invalidRequest('Give at most one of email and _userId (neither: a discoverable login).', []);
    return validBody(c, 'PasskeyLoginOptionsRequest');
  },
  async handle(c, fields) {
    const options = await loginOptions(
      c.get('deps').database.db,
      c.get('token').site,
      { email: fields.email, ...(fields._userId === undefined ? {} : { userId: fields._userId }) },
      await deploymentKeysOfRequest(c),
    );
    return c.json({ result: { options } } as PasskeyLoginOptionsResponse, 200);
  },
});
