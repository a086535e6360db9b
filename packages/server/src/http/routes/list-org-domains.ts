import type { components } from '@user-accounts/client';
import { listDomains } from '../../sso/domains.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

const PATH = '/api/1/org/domain/list';

type ListOrgDomainsResponse = components['schemas']['ListOrgDomainsResponse'];

export const listOrgDomains = defineOperation({
  name: 'listOrgDomains',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  parse: (c) => validQuery<{ orgId: string }>(c, PATH),
  async handle(c, { orgId }) {
    const domains = await listDomains(c.get('deps').database.db, c.get('token').site, orgId);
    return c.json({ result: { domains } } satisfies ListOrgDomainsResponse, 200);
  },
});
