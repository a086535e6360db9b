import type { components } from '@user-accounts/client';
import { refreshSession as refresh } from '../../sessions/refresh.ts';
import { defineOperation } from '../define-operation.ts';
import { writeScopeOf } from '../run-write.ts';
import { deploymentKeysOfRequest, sessionDepsOf, validBody } from './shared.ts';

type RefreshSessionResponse = components['schemas']['RefreshSessionResponse'];

export const refreshSession = defineOperation({
  name: 'refreshSession',
  method: 'POST',
  path: '/api/1/session/refresh',
  scope: 'verify',
  request: { body: 'SessionTokenRequest' },
  writes: 'session_refresh',
  // A miss (unknown, expired, revoked, another site's token) writes nothing: made-up tokens must
  // not turn into audit rows. A replayed token's revocation (theft) is audited in its transaction.
  unaudited: ['invalid_session'],
  parse: (c) => validBody(c, 'SessionTokenRequest'),
  async handle(c, { token }) {
    const keys = await deploymentKeysOfRequest(c);
    const session = await refresh(writeScopeOf(c), { ...sessionDepsOf(c), keys }, token);
    return c.json({ result: { session, status: 'session refreshed' } } satisfies RefreshSessionResponse, 200);
  },
});
