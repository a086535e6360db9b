import type { components } from '@user-accounts/client';
import { invalidRequest } from '../../errors.ts';
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
  parse(c) {
    const fields = validBody(c, 'LinkIdentityRequest');
    const raw = fields.provider !== undefined || fields.subject !== undefined;
    if (
      fields.linkTicket !== undefined
        ? raw || fields.email !== undefined || fields.emailVerified !== undefined
        : fields.provider === undefined || fields.subject === undefined
    )
      throw invalidRequest(
        'Give either linkTicket (from provider/callback) or provider and subject (with email and emailVerified), not both.',
      );
    return fields;
  },
  async handle(c, fields) {
    await link(
      writeScopeOf(c),
      writeDepsOf(c),
      fields.linkTicket !== undefined
        ? { userId: fields._userId, linkTicket: fields.linkTicket }
        : {
            userId: fields._userId,
            provider: fields.provider!,
            subject: fields.subject!,
            email: fields.email,
            emailVerified: fields.emailVerified,
          },
    );
    return c.json({ result: { status: 'identity linked' } } satisfies LinkIdentityResponse, 200);
  },
});
