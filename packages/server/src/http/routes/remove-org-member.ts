import type { components } from '@user-accounts/client';
import { removeMember } from '../../orgs/members.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type RemoveOrgMemberResponse = components['schemas']['RemoveOrgMemberResponse'];

export const removeOrgMember = defineOperation({
  name: 'removeOrgMember',
  method: 'POST',
  path: '/api/1/org/member/remove',
  scope: 'write',
  request: { body: 'RemoveOrgMemberRequest' },
  writes: 'org_member_remove',
  parse: (c) => validBody(c, 'RemoveOrgMemberRequest'),
  async handle(c, input) {
    await removeMember(writeScopeOf(c), writeDepsOf(c), input);
    return c.json({ result: { status: 'member removed' } } satisfies RemoveOrgMemberResponse, 200);
  },
});
