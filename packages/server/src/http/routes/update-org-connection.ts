import type { components } from '@user-accounts/client';
import { toConnection, updateConnection } from '../../sso/connections.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { ssoDepsOf, validBody } from './shared.ts';

type OrgConnectionResponse = components['schemas']['OrgConnectionResponse'];

export const updateOrgConnection = defineOperation({
  name: 'updateOrgConnection',
  method: 'POST',
  path: '/api/1/org/connection/update',
  scope: 'write',
  request: { body: 'UpdateOrgConnectionRequest' },
  writes: 'org_connection_update',
  parse: (c) => validBody(c, 'UpdateOrgConnectionRequest'),
  async handle(c, input) {
    const row = await updateConnection(writeScopeOf(c), writeDepsOf(c), input);
    return c.json({ result: toConnection(row, ssoDepsOf(c).publicUrl) } satisfies OrgConnectionResponse, 200);
  },
});
