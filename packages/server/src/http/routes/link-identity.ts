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
    // Said plainly, before the schema's anyOf and nots would report the body as a whole.
    const body = c.get('body');
    if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
      const given = (name: string) => name in body;
      const raw = given('provider') || given('subject') || given('email') || given('emailVerified');
      if (given('linkTicket') ? raw : !(given('provider') && given('subject')))
        throw invalidRequest(
          'Give either linkTicket (from provider/callback) or provider and subject (with email and emailVerified), not both.',
          [],
        );
    }
    return validBody(c, 'LinkIdentityRequest');
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
