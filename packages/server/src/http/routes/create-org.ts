import type { components } from '@user-accounts/client';
import { checkMetadata } from '../../accounts/metadata.ts';
import { createOrg as create } from '../../orgs/orgs.ts';
import { defineOperation } from '../define-operation.ts';
import { answerWith, jsonAnswer, writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type CreateOrgResponse = components['schemas']['CreateOrgResponse'];

export const createOrg = defineOperation({
  name: 'createOrg',
  method: 'POST',
  path: '/api/1/org/create',
  scope: 'write',
  request: { body: 'CreateOrgRequest' },
  idempotent: true,
  writes: 'org_create',
  parse(c) {
    const input = validBody(c, 'CreateOrgRequest');
    if (input.metadata !== undefined) checkMetadata(input.metadata);
    return input;
  },
  async handle(c, input) {
    const answer = (orgId: string) =>
      jsonAnswer({ result: { orgId, status: 'organization created' } } satisfies CreateOrgResponse);
    const orgId = await create(writeScopeOf(c), writeDepsOf(c), input, answer);
    return answerWith(c, 201, answer(orgId));
  },
});
