// POST /api/1/provider/start (issue 59, point 2): the authorization URL of a sign-in with one of
// the site's providers; the state, PKCE verifier and nonce kept for its callback (providers/).
import type { components } from '@user-accounts/client';
import { providerBudget, startSignIn } from '../../providers/sign-in.ts';
import { defineOperation } from '../define-operation.ts';
import { validBody } from './shared.ts';

type StartProviderSignInResponse = components['schemas']['StartProviderSignInResponse'];

export const startProviderSignIn = defineOperation({
  name: 'startProviderSignIn',
  method: 'POST',
  path: '/api/1/provider/start',
  scope: 'verify',
  request: { body: 'StartProviderSignInRequest' },
  parse: (c) => validBody(c, 'StartProviderSignInRequest'),
  async handle(c, fields) {
    const deps = c.get('deps');
    const started = await startSignIn(
      deps.database.db,
      deps.factorKeys,
      c.get('token').site,
      fields,
      providerBudget(deps.requestTimeoutMs ?? 10_000, c.get('deadline').signal),
    );
    return c.json(
      {
        result: {
          authorizationUrl: started.authorizationUrl,
          expiresAt: started.expiresAt.toISOString(),
          status: 'redirect the person',
        },
      } satisfies StartProviderSignInResponse,
      200,
    );
  },
});
