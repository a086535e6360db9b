import type { components } from '@user-accounts/client';
import { checkMetadata } from '../../accounts/metadata.ts';
import { updateOrg as update } from '../../orgs/orgs.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type UpdateOrgResponse = components['schemas']['UpdateOrgResponse'];

export const updateOrg = defineOperation({
  name: 'updateOrg',
  method: 'POST',
  path: '/api/1/org/update',
  scope: 'write',
  request: { body: 'UpdateOrgRequest' },
  writes: 'org_update',
  parse(c) {
    const input = validBody(c, 'UpdateOrgRequest');
    if (input.metadata !== undefined) checkMetadata(input.metadata);
    return input;
  },
  async handle(c, input) {
    await update(writeScopeOf(c), writeDepsOf(c), input);
    return c.json({ result: { status: 'organization updated' } } satisfies UpdateOrgResponse, 200);
  },
});
