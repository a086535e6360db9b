import type { components } from '@user-accounts/client';
import { updateMember } from '../../orgs/members.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type UpdateOrgMemberResponse = components['schemas']['UpdateOrgMemberResponse'];

export const updateOrgMember = defineOperation({
  name: 'updateOrgMember',
  method: 'POST',
  path: '/api/1/org/member/update',
  scope: 'write',
  request: { body: 'UpdateOrgMemberRequest' },
  writes: 'org_member_update',
  parse: (c) => validBody(c, 'UpdateOrgMemberRequest'),
  async handle(c, input) {
    await updateMember(writeScopeOf(c), writeDepsOf(c), input);
    return c.json({ result: { status: 'member updated' } } satisfies UpdateOrgMemberResponse, 200);
  },
});
