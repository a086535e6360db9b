import type { AuthenticationResponseJSON } from '@simplewebauthn/server';
import type { components } from '@user-accounts/client';
import { invalidCredentials } from '../../errors.ts';
import { verifyPasskey as verify } from '../../factors/passkeys.ts';
import { issueSession } from '../../sessions/issue.ts';
import { PASSKEY_LOGIN } from '../../sessions/rules.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { endUserAddress, sessionDepsOf, validBody } from './shared.ts';

type VerifyPasskeyResponse = components['schemas']['VerifyPasskeyResponse'];

export const verifyPasskey = defineOperation({
  name: 'verifyPasskey',
  method: 'POST',
  path: '/api/1/user/passkey/verify',
  scope: 'verify',
  request: { body: 'VerifyPasskeyRequest' },
  writes: 'passkey_verify',
  parse: (c) => ({
    fields: validBody(c, 'VerifyPasskeyRequest'),
    address: endUserAddress(c.req.header('x-end-user-ip')),
  }),
  // The mock: a login that asked for a session is answered with one (a real token, test-signed: mock.md).
  mockExample: ({ fields }) => (fields.session === undefined ? undefined : 'verified_with_session'),
  async handle(c, { fields, address }) {
    const userId = await verify(writeScopeOf(c), writeDepsOf(c), {
      // The spec's schema is WebAuthn's AuthenticationResponseJSON; the library checks the rest.
      response: fields.response as unknown as AuthenticationResponseJSON,
    });
    // The login is complete: the session its caller asked for (sessions/issue.ts).
    const session =
      fields.session === undefined
        ? undefined
        : await issueSession(writeScopeOf(c), sessionDepsOf(c), {
            userId,
            method: PASSKEY_LOGIN,
            userAgent: fields.session.userAgent,
            ip: address,
            lifetime: fields.session.lifetime,
            // Deleted since: refused as a passkey of no account is. No password was checked.
            seen: { stale: () => invalidCredentials('passkey') },
          });
    return c.json(
      {
        result: { _userId: userId, ...(session && { session }), status: 'passkey verified' },
      } satisfies VerifyPasskeyResponse,
      200,
    );
  },
});
