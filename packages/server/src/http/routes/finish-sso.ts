import type { components } from '@user-accounts/client';
import { invalidCredentials, invalidRequest } from '../../errors.ts';
import { IDENTITY_LOGIN } from '../../identities/identities.ts';
import { providerBudget } from '../../providers/sign-in.ts';
import { issueSession } from '../../sessions/issue.ts';
import { checkOidcCallback } from '../../sso/oidc.ts';
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
    const body = c.get('body');
    // Said plainly, before the schema's oneOf would report both fields as missing or one as extra.
    if (body !== null && typeof body === 'object' && !Array.isArray(body)) {
      const saml = 'samlResponse' in body;
      if (saml === 'callbackUrl' in body)
        throw invalidRequest('Give exactly one of samlResponse (SAML) and callbackUrl (OpenID Connect).', [
          {
            pointer: saml ? '/callbackUrl' : '/samlResponse',
            code: saml ? 'not_allowed' : 'required',
            message: 'exactly one of samlResponse (SAML) and callbackUrl (OpenID Connect) is required',
          },
        ]);
    }
    const fields = validBody(c, 'FinishSsoRequest');
    return { fields, address: endUserAddress(c.req.header('x-end-user-ip')) };
  },
  async handle(c, { fields, address }) {
    const scope = writeScopeOf(c);
    const deps = { ...writeDepsOf(c), maxAccountsPerSite: c.get('deps').maxAccountsPerSite };
    const checked =
      fields.callbackUrl !== undefined
        ? await checkOidcCallback(
            deps,
            scope.site,
            fields.callbackUrl,
            providerBudget(c.get('deps').requestTimeoutMs ?? 10_000, c.get('deadline').signal),
          )
        : await checkSamlResponse(
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
