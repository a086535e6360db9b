import type { components } from '@user-accounts/client';
import { invalidCredentials, invalidRequest } from '../../errors.ts';
import { IDENTITY_LOGIN } from '../../identities/identities.ts';
import { issueSession } from '../../sessions/issue.ts';
import { checkSamlResponse } from '../../sso/saml.ts';
import { signInThrough } from '../../sso/signin.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { endUserAddress, sessionDepsOf, ssoDepsOf, validBody } from './shared.ts';

type FinishSsoResponse = components['schemas']['FinishSsoResponse'];

export const finishSso = defineOperation({
  name: 'finishSso',
  method: 'POST',
  path: '/api/1/sso/callback',
  scope: 'verify',
  request: { body: 'FinishSsoRequest' },
  writes: 'sso_callback',
  parse(c) {
    const fields = validBody(c, 'FinishSsoRequest');
    if (fields.samlResponse === undefined)
      throw invalidRequest('The request body is not valid.', [
        {
          pointer: '/samlResponse',
          code: 'required',
          message: 'is required (callbackUrl: OpenID Connect connections are not served yet)',
        },
      ]);
    return { fields, address: endUserAddress(c.req.header('x-end-user-ip')) };
  },
  async handle(c, { fields, address }) {
    const scope = writeScopeOf(c);
    const deps = { ...writeDepsOf(c), maxAccountsPerSite: c.get('deps').maxAccountsPerSite };
    const checked = await checkSamlResponse(
      deps,
      ssoDepsOf(c).publicUrl,
      scope.site,
      {
        samlResponse: fields.samlResponse!,
        relayState: fields.relayState,
        connectionId: fields.connectionId,
      },
      (error) => c.get('log').warn({ err: String(error) }, 'IdP metadata not refreshed'),
    );
    const { userId, created } = await signInThrough(scope, deps, checked);
    const session =
      fields.session === undefined
        ? undefined
        : await issueSession(scope, sessionDepsOf(c), {
            userId,
            method: IDENTITY_LOGIN,
            connectionId: checked.connection.id,
            userAgent: fields.session.userAgent,
            ip: address,
            lifetime: fields.session.lifetime,
            seen: { stale: () => invalidCredentials('identity') },
          });
    return c.json(
      {
        result: {
          _userId: userId,
          connectionId: checked.connection.id,
          orgId: checked.connection.orgId,
          created,
          ...(session && { session }),
          status: 'signed in',
        },
      } satisfies FinishSsoResponse,
      200,
    );
  },
});
