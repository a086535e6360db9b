import type { components } from '@user-accounts/client';
import { checkSession } from '../../sessions/check.ts';
import { defineOperation } from '../define-operation.ts';
import { validBody } from './shared.ts';

type VerifySessionResponse = components['schemas']['VerifySessionResponse'];

export const verifySession = defineOperation({
  name: 'verifySession',
  method: 'POST',
  path: '/api/1/session/verify',
  scope: 'verify',
  request: { body: 'SessionTokenRequest' },
  parse: (c) => validBody(c, 'SessionTokenRequest'),
  async handle(c, { token }) {
    const session = await checkSession(c.get('deps').database.db, c.get('token').site, token);
    return c.json({ result: { ...session, status: 'session valid' } } satisfies VerifySessionResponse, 200);
  },
});
