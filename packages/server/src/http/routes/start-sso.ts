import type { components } from '@user-accounts/client';
import { invalidRequest } from '../../errors.ts';
import { providerBudget } from '../../providers/sign-in.ts';
import { connectionForStart } from '../../sso/connections.ts';
import { startOidc } from '../../sso/oidc.ts';
import { startSaml } from '../../sso/saml.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf } from '../run-write.ts';
import { ssoDepsOf, validBody } from './shared.ts';

type StartSsoResponse = components['schemas']['StartSsoResponse'];

export const startSso = defineOperation({
  name: 'startSso',
  method: 'POST',
  path: '/api/1/sso/start',
  scope: 'verify',
  request: { body: 'StartSsoRequest' },
  parse(c) {
    const body = validBody(c, 'StartSsoRequest');
    const named = [body.email, body.orgId, body.connectionId].filter((v) => v !== undefined).length;
    if (named !== 1)
      throw invalidRequest('The request body is not valid.', [
        { pointer: '/email', code: 'required', message: 'exactly one of email, orgId and connectionId is required' },
      ]);
    return body;
  },
  async handle(c, input) {
    const deps = writeDepsOf(c);
    const row = await connectionForStart(deps.db, c.get('token').site, input);
    if (!row.redirectUris.includes(input.redirectUri))
      throw invalidRequest('The request body is not valid.', [
        { pointer: '/redirectUri', code: 'not_allowed', message: "is not one of the connection's redirectUris" },
      ]);
    const { authorizationUrl } =
      row.kind === 'oidc'
        ? await startOidc(
            deps,
            row,
            input.redirectUri,
            input.email,
            providerBudget(c.get('deps').requestTimeoutMs ?? 10_000, c.get('deadline').signal),
          )
        : await startSaml(deps, ssoDepsOf(c).publicUrl, row, input.redirectUri);
    return c.json(
      { result: { authorizationUrl, connectionId: row.id, status: 'redirect the person' } } satisfies StartSsoResponse,
      200,
    );
  },
});
