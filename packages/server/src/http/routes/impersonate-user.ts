import type { components } from '@user-accounts/client';
import { impersonate } from '../../sessions/impersonate.ts';
import { defineOperation } from '../define-operation.ts';
import { writeScopeOf } from '../run-write.ts';
import { endUserAddress, sessionDepsOf, validBody } from './shared.ts';

type ImpersonateResponse = components['schemas']['ImpersonateResponse'];

export const impersonateUser = defineOperation({
  name: 'impersonateUser',
  method: 'POST',
  path: '/api/1/session/impersonate',
  scope: 'impersonate',
  request: { body: 'ImpersonateRequest' },
  // No Idempotency-Key: the answer kept for it would keep the session token.
  writes: 'session_impersonate',
  parse(c) {
    const fields = validBody(c, 'ImpersonateRequest');
    // The paper trail as said, without the spaces around it (the schema refused spaces alone).
    fields.actor = fields.actor.trim();
    fields.reason = fields.reason.trim();
    return fields;
  },
  async handle(c, fields) {
    const session = await impersonate(writeScopeOf(c), sessionDepsOf(c), {
      userId: fields._userId,
      actor: fields.actor,
      reason: fields.reason,
      lifetime: fields.lifetime,
      ip: endUserAddress(c.req.header('x-end-user-ip')),
    });
    return c.json({ result: { session, status: 'impersonation started' } } satisfies ImpersonateResponse, 201);
  },
});
