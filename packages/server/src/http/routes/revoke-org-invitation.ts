import type { components } from '@user-accounts/client';
import { revokeInvitation } from '../../orgs/invitations.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type RevokeOrgInvitationResponse = components['schemas']['RevokeOrgInvitationResponse'];

export const revokeOrgInvitation = defineOperation({
  name: 'revokeOrgInvitation',
  method: 'POST',
  path: '/api/1/org/invitation/revoke',
  scope: 'write',
  request: { body: 'RevokeOrgInvitationRequest' },
  writes: 'org_invitation_revoke',
  parse: (c) => validBody(c, 'RevokeOrgInvitationRequest'),
  async handle(c, { invitationId }) {
    await revokeInvitation(writeScopeOf(c), writeDepsOf(c), invitationId);
    return c.json({ result: { status: 'invitation revoked' } } satisfies RevokeOrgInvitationResponse, 200);
  },
});
