import type { components } from '@user-accounts/client';
import { registrationOptions } from '../../factors/passkeys.ts';
import { defineOperation } from '../define-operation.ts';
import { validBody } from './shared.ts';

type AddPasskeyOptionsResponse = components['schemas']['AddPasskeyOptionsResponse'];

/** Registration's first step: options with a challenge kept for the account (no audit row: nothing of it changes). */
export const addPasskeyOptions = defineOperation({
  name: 'addPasskeyOptions',
  method: 'POST',
  path: '/api/1/user/factor/passkey/options',
  scope: 'write',
  request: { body: 'AddPasskeyOptionsRequest' },
  parse: (c) => validBody(c, 'AddPasskeyOptionsRequest'),
  async handle(c, fields) {
    const options = await registrationOptions(c.get('deps').database.db, c.get('token').site, fields._userId);
    return c.json({ result: { options } } as AddPasskeyOptionsResponse, 200);
  },
});
