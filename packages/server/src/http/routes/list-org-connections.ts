import type { components } from '@user-accounts/client';
import { listConnections, toConnection } from '../../sso/connections.ts';
import { defineOperation } from '../define-operation.ts';
import { ssoDepsOf, validQuery } from './shared.ts';

const PATH = '/api/1/org/connection/list';

type ListOrgConnectionsResponse = components['schemas']['ListOrgConnectionsResponse'];

export const listOrgConnections = defineOperation({
  name: 'listOrgConnections',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  parse: (c) => validQuery<{ orgId: string }>(c, PATH),
  async handle(c, { orgId }) {
    const rows = await listConnections(c.get('deps').database.db, c.get('token').site, orgId);
    const { publicUrl } = ssoDepsOf(c);
    return c.json(
      { result: { connections: rows.map((row) => toConnection(row, publicUrl)) } } satisfies ListOrgConnectionsResponse,
      200,
    );
  },
});
