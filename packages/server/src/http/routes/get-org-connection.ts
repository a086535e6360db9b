import type { components } from '@user-accounts/client';
import { connectionOf, toConnection } from '../../sso/connections.ts';
import { defineOperation } from '../define-operation.ts';
import { ssoDepsOf, validQuery } from './shared.ts';

const PATH = '/api/1/org/connection/get';

type OrgConnectionResponse = components['schemas']['OrgConnectionResponse'];

export const getOrgConnection = defineOperation({
  name: 'getOrgConnection',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  parse: (c) => validQuery<{ connectionId: string }>(c, PATH),
  async handle(c, { connectionId }) {
    const row = await connectionOf(c.get('deps').database.db, c.get('token').site, connectionId);
    return c.json({ result: toConnection(row, ssoDepsOf(c).publicUrl) } satisfies OrgConnectionResponse, 200);
  },
});
