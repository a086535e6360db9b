import type { components } from '@user-accounts/client';
import { invalidRequest } from '../../errors.ts';
import { getOrg as get } from '../../orgs/orgs.ts';
import { toOrg } from '../../orgs/rules.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

const PATH = '/api/1/org/get';

type GetOrgResponse = components['schemas']['GetOrgResponse'];

export const getOrg = defineOperation({
  name: 'getOrg',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  parse(c) {
    const query = validQuery<{ orgId?: string; slug?: string }>(c, PATH);
    if ((query.orgId === undefined) === (query.slug === undefined)) {
      throw invalidRequest('Give exactly one of the query parameters orgId or slug.', []);
    }
    return query;
  },
  async handle(c, query) {
    const row = await get(c.get('deps').database.db, c.get('token').site, query);
    return c.json({ result: toOrg(row) } satisfies GetOrgResponse, 200);
  },
});
