import type { components } from '@user-accounts/client';
import { invalidRequest } from '../../errors.ts';
import { revokeSession as revoke, revokeSessionsOfAccount } from '../../sessions/manage.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type RevokeSessionResponse = components['schemas']['RevokeSessionResponse'];

export const revokeSession = defineOperation({
  name: 'revokeSession',
  method: 'POST',
  path: '/api/1/session/revoke',
  scope: 'write',
  request: { body: 'RevokeSessionRequest' },
  writes: 'session_revoke',
  parse(c) {
    const body = c.get('body');
    // Said plainly, before the schema's oneOf would report both fields as missing or one as extra.
    if (
      body !== null &&
      typeof body === 'object' &&
      !Array.isArray(body) &&
      'sessionId' in body === '_userId' in body
    ) {
      throw invalidRequest(
        'Give exactly one of sessionId (one session) or _userId (every session of the account).',
        [],
      );
    }
    return validBody(c, 'RevokeSessionRequest');
  },
  async handle(c, fields) {
    if (fields.sessionId !== undefined) {
      await revoke(writeScopeOf(c), writeDepsOf(c), fields.sessionId);
      return c.json({ result: { status: 'session revoked' } } satisfies RevokeSessionResponse, 200);
    }
    const revoked = await revokeSessionsOfAccount(writeScopeOf(c), writeDepsOf(c), fields._userId!);
    return c.json({ result: { revoked, status: 'sessions revoked' } } satisfies RevokeSessionResponse, 200);
  },
});
