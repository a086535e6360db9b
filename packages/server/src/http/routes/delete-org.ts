import type { components } from '@user-accounts/client';
import { deleteOrg as remove } from '../../orgs/orgs.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type DeleteOrgResponse = components['schemas']['DeleteOrgResponse'];

export const deleteOrg = defineOperation({
  name: 'deleteOrg',
  method: 'DELETE',
  path: '/api/1/org/delete',
  scope: 'write',
  request: { body: 'DeleteOrgRequest' },
  writes: 'org_delete',
  parse: (c) => validBody(c, 'DeleteOrgRequest'),
  async handle(c, { orgId }) {
    await remove(writeScopeOf(c), writeDepsOf(c), orgId);
    return c.json({ result: { status: 'organization deleted' } } satisfies DeleteOrgResponse, 200);
  },
});
