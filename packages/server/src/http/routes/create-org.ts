import type { components } from '@user-accounts/client';
import { checkMetadata } from '../../accounts/metadata.ts';
import { createOrg as create } from '../../orgs/orgs.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type CreateOrgResponse = components['schemas']['CreateOrgResponse'];

export const createOrg = defineOperation({
  name: 'createOrg',
  method: 'POST',
  path: '/api/1/org/create',
  scope: 'write',
  request: { body: 'CreateOrgRequest' },
  writes: 'org_create',
  parse(c) {
    const input = validBody(c, 'CreateOrgRequest');
    if (input.metadata !== undefined) checkMetadata(input.metadata);
    return input;
  },
  async handle(c, input) {
    const orgId = await create(writeScopeOf(c), writeDepsOf(c), input);
    return c.json({ result: { orgId, status: 'organization created' } } satisfies CreateOrgResponse, 201);
  },
});
