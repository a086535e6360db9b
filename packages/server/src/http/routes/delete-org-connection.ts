import type { components } from '@user-accounts/client';
import { deleteConnection } from '../../sso/connections.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type DeleteOrgConnectionResponse = components['schemas']['DeleteOrgConnectionResponse'];

export const deleteOrgConnection = defineOperation({
  name: 'deleteOrgConnection',
  method: 'POST',
  path: '/api/1/org/connection/delete',
  scope: 'write',
  request: { body: 'ConnectionIdRequest' },
  writes: 'org_connection_delete',
  parse: (c) => validBody(c, 'ConnectionIdRequest'),
  async handle(c, input) {
    await deleteConnection(writeScopeOf(c), writeDepsOf(c), input.connectionId);
    return c.json({ result: { status: 'connection deleted' } } satisfies DeleteOrgConnectionResponse, 200);
  },
});
