import type { components } from '@user-accounts/client';
import { linkIdentity as link } from '../../identities/identities.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type LinkIdentityResponse = components['schemas']['LinkIdentityResponse'];

export const linkIdentity = defineOperation({
  name: 'linkIdentity',
  method: 'POST',
  path: '/api/1/user/identity/link',
  scope: 'write',
  request: { body: 'LinkIdentityRequest' },
  writes: 'identity_link',
  parse: (c) => validBody(c, 'LinkIdentityRequest'),
  async handle(c, fields) {
    await link(writeScopeOf(c), writeDepsOf(c), {
      userId: fields._userId,
      provider: fields.provider,
      subject: fields.subject,
      email: fields.email,
      emailVerified: fields.emailVerified,
    });
    return c.json({ result: { status: 'identity linked' } } satisfies LinkIdentityResponse, 200);
  },
});
