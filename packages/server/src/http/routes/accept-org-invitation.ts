import type { components } from '@user-accounts/client';
import { acceptInvitation } from '../../orgs/invitations.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type AcceptOrgInvitationResponse = components['schemas']['AcceptOrgInvitationResponse'];

export const acceptOrgInvitation = defineOperation({
  name: 'acceptOrgInvitation',
  method: 'POST',
  path: '/api/1/org/invitation/accept',
  scope: 'write',
  request: { body: 'AcceptOrgInvitationRequest' },
  writes: 'org_invitation_accept',
  parse: (c) => validBody(c, 'AcceptOrgInvitationRequest'),
  async handle(c, input) {
    const orgId = await acceptInvitation(writeScopeOf(c), writeDepsOf(c), input);
    return c.json({ result: { orgId, status: 'invitation accepted' } } satisfies AcceptOrgInvitationResponse, 200);
  },
});
