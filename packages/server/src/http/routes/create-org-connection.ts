import type { components } from '@user-accounts/client';
import { createConnection, toConnection } from '../../sso/connections.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { ssoDepsOf, validBody } from './shared.ts';

type OrgConnectionResponse = components['schemas']['OrgConnectionResponse'];

export const createOrgConnection = defineOperation({
  name: 'createOrgConnection',
  method: 'POST',
  path: '/api/1/org/connection/create',
  scope: 'write',
  request: { body: 'CreateOrgConnectionRequest' },
  writes: 'org_connection_create',
  parse: (c) => validBody(c, 'CreateOrgConnectionRequest'),
  async handle(c, input) {
    const row = await createConnection(writeScopeOf(c), writeDepsOf(c), input);
    return c.json({ result: toConnection(row, ssoDepsOf(c).publicUrl) } satisfies OrgConnectionResponse, 201);
  },
});
