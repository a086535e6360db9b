import type { components } from '@user-accounts/client';
import { addMember } from '../../orgs/members.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type AddOrgMemberResponse = components['schemas']['AddOrgMemberResponse'];

export const addOrgMember = defineOperation({
  name: 'addOrgMember',
  method: 'POST',
  path: '/api/1/org/member/add',
  scope: 'write',
  request: { body: 'AddOrgMemberRequest' },
  writes: 'org_member_add',
  parse: (c) => validBody(c, 'AddOrgMemberRequest'),
  async handle(c, input) {
    await addMember(writeScopeOf(c), writeDepsOf(c), input);
    return c.json({ result: { status: 'member added' } } satisfies AddOrgMemberResponse, 200);
  },
});
