import type { components } from '@user-accounts/client';
import { unlinkIdentity as unlink } from '../../identities/identities.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type UnlinkIdentityResponse = components['schemas']['UnlinkIdentityResponse'];

export const unlinkIdentity = defineOperation({
  name: 'unlinkIdentity',
  method: 'POST',
  path: '/api/1/user/identity/unlink',
  scope: 'write',
  request: { body: 'UnlinkIdentityRequest' },
  writes: 'identity_unlink',
  parse: (c) => validBody(c, 'UnlinkIdentityRequest'),
  async handle(c, fields) {
    await unlink(writeScopeOf(c), writeDepsOf(c), {
      userId: fields._userId,
      provider: fields.provider,
      subject: fields.subject,
    });
    return c.json({ result: { status: 'identity unlinked' } } satisfies UnlinkIdentityResponse, 200);
  },
});
