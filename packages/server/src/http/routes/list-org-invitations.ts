import type { components } from '@user-accounts/client';
import { listInvitations } from '../../orgs/invitations.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

const PATH = '/api/1/org/invitation/list';

type ListOrgInvitationsResponse = components['schemas']['ListOrgInvitationsResponse'];

export const listOrgInvitations = defineOperation({
  name: 'listOrgInvitations',
  method: 'GET',
  path: PATH,
  scope: 'read',
  request: { query: true },
  parse: (c) => validQuery<{ orgId: string }>(c, PATH),
  async handle(c, { orgId }) {
    const invitations = await listInvitations(c.get('deps').database.db, c.get('token').site, orgId);
    return c.json({ result: { invitations } } satisfies ListOrgInvitationsResponse, 200);
  },
});
