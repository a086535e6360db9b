// POST /api/1/provider/callback (issue 59, points 3-4): the URL the provider sent the browser
// back to, checked and exchanged (providers/sign-in.ts); the identity's outcome is the login of
// identity/verify (its session here, as that route makes it), an account created, or 409
// identity_unlinked. Each outcome counted per provider; the audit rows name the provider.
import type { components } from '@user-accounts/client';
import { ApiError, invalidCredentials } from '../../errors.ts';
import { IDENTITY_LOGIN } from '../../identities/identities.ts';
import { completeSignIn, providerBudget } from '../../providers/sign-in.ts';
import { issueSession } from '../../sessions/issue.ts';
import { defineOperation } from '../define-operation.ts';
import type { WriteRecord } from '../run-write.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { GET_USER_PATH } from './get-user.ts';
import { endUserAddress, sessionDepsOf, validBody } from './shared.ts';

type Ok = components['schemas']['CompleteProviderSignInResponse'];
type Created = components['schemas']['CompleteProviderSignInCreatedResponse'];

export const completeProviderSignIn = defineOperation({
  name: 'completeProviderSignIn',
  method: 'POST',
  path: '/api/1/provider/callback',
  scope: 'verify',
  request: { body: 'CompleteProviderSignInRequest' },
  writes: 'provider_callback',
  parse: (c) => ({
    fields: validBody(c, 'CompleteProviderSignInRequest'),
    address: endUserAddress(c.req.header('x-end-user-ip')),
  }),
  async handle(c, { fields, address }) {
    const deps = c.get('deps');
    const record = c.get('write') as WriteRecord;
    let provider: string | undefined;
    const count = (outcome: string) => {
      if (provider !== undefined) deps.metrics?.collector.observeProviderCallback(provider, outcome);
    };
    try {
      const done = await completeSignIn(
        writeScopeOf(c),
        { ...writeDepsOf(c), maxAccountsPerSite: deps.maxAccountsPerSite },
        fields,
        providerBudget(deps.requestTimeoutMs ?? 10_000, c.get('deadline').signal),
        (name) => {
          provider = name;
          record.provider = name;
        },
      );
      const session =
        fields.session === undefined
          ? undefined
          : await issueSession(writeScopeOf(c), sessionDepsOf(c), {
              userId: done.userId,
              method: IDENTITY_LOGIN,
              userAgent: fields.session.userAgent,
              ip: address,
              lifetime: fields.session.lifetime,
              // Deleted since: refused as an identity of no account is.
              seen: { stale: () => invalidCredentials('identity') },
            });
      const result = { _userId: done.userId, provider: done.provider, ...(session && { session }) };
      if (done.outcome === 'created') {
        count('user created');
        return c.json({ result: { ...result, status: 'user created' } } satisfies Created, 201, {
          location: `${GET_USER_PATH}?_userId=${done.userId}`,
        });
      }
      count('identity verified');
      return c.json({ result: { ...result, status: 'identity verified' } } satisfies Ok, 200);
    } catch (error) {
      count(error instanceof ApiError ? error.code : 'internal_error');
      throw error;
    }
  },
});
