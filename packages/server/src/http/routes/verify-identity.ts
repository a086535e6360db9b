import type { components } from '@user-accounts/client';
import { invalidCredentials } from '../../errors.ts';
import { IDENTITY_LOGIN, verifyIdentity as verify } from '../../identities/identities.ts';
import { issueSession } from '../../sessions/issue.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { endUserAddress, sessionDepsOf, validBody } from './shared.ts';

type VerifyIdentityResponse = components['schemas']['VerifyIdentityResponse'];

export const verifyIdentity = defineOperation({
  name: 'verifyIdentity',
  method: 'POST',
  path: '/api/1/user/identity/verify',
  scope: 'verify',
  request: { body: 'VerifyIdentityRequest' },
  writes: 'identity_verify',
  parse: (c) => ({
    fields: validBody(c, 'VerifyIdentityRequest'),
    address: endUserAddress(c.req.header('x-end-user-ip')),
  }),
  // The mock: a login that asked for a session is answered with one (a real token, test-signed: mock.md).
  mockExample: ({ fields }) => (fields.session === undefined ? undefined : 'verified_with_session'),
  async handle(c, { fields, address }) {
    const userId = await verify(writeScopeOf(c), writeDepsOf(c), {
      provider: fields.provider,
      subject: fields.subject,
    });
    // The login is complete: the session its caller asked for (sessions/issue.ts).
    const session =
      fields.session === undefined
        ? undefined
        : await issueSession(writeScopeOf(c), sessionDepsOf(c), {
            userId,
            method: IDENTITY_LOGIN,
            userAgent: fields.session.userAgent,
            ip: address,
            lifetime: fields.session.lifetime,
            // Deleted since: refused as an identity of no account is.
            seen: { stale: () => invalidCredentials('identity') },
          });
    return c.json(
      {
        result: { _userId: userId, ...(session && { session }), status: 'identity verified' },
      } satisfies VerifyIdentityResponse,
      200,
    );
  },
});
