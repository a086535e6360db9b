import type { components } from '@user-accounts/client';
import { removeDomain } from '../../sso/domains.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type RemoveOrgDomainResponse = components['schemas']['RemoveOrgDomainResponse'];

export const removeOrgDomain = defineOperation({
  name: 'removeOrgDomain',
  method: 'POST',
  path: '/api/1/org/domain/remove',
  scope: 'write',
  request: { body: 'OrgDomainRequest' },
  writes: 'org_domain_remove',
  parse: (c) => validBody(c, 'OrgDomainRequest'),
  async handle(c, input) {
    await removeDomain(writeScopeOf(c), writeDepsOf(c), input);
    return c.json({ result: { status: 'domain removed' } } satisfies RemoveOrgDomainResponse, 200);
  },
});
