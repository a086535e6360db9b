import type { components } from '@user-accounts/client';
import { addDomain } from '../../sso/domains.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type AddOrgDomainResponse = components['schemas']['AddOrgDomainResponse'];

export const addOrgDomain = defineOperation({
  name: 'addOrgDomain',
  method: 'POST',
  path: '/api/1/org/domain/add',
  scope: 'write',
  request: { body: 'AddOrgDomainRequest' },
  writes: 'org_domain_add',
  parse: (c) => validBody(c, 'AddOrgDomainRequest'),
  async handle(c, input) {
    const added = await addDomain(writeScopeOf(c), writeDepsOf(c), input);
    return c.json({ result: { ...added, status: 'publish this record' } } satisfies AddOrgDomainResponse, 201);
  },
});
