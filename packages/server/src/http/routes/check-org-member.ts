import type { components } from '@user-accounts/client';
import { checkMember } from '../../orgs/check.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

const PATH = '/api/1/org/member/check';

type CheckOrgMemberResponse = components['schemas']['CheckOrgMemberResponse'];

export const checkOrgMember = defineOperation({
  name: 'checkOrgMember',
  method: 'GET',
  path: PATH,
  // A site's request path may hold a verify-only token (as for session/verify): either will do.
  scope: ['read', 'verify'],
  request: { query: true },
  parse: (c) => validQuery<{ orgId: string; _userId: string; permission?: string }>(c, PATH),
  async handle(c, { orgId, _userId, permission }) {
    const result = await checkMember(c.get('deps').database.db, c.get('token').site, orgId, _userId, permission);
    return c.json({ result } satisfies CheckOrgMemberResponse, 200);
  },
});
