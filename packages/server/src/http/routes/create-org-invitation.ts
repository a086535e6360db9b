import type { components } from '@user-accounts/client';
import { createInvitation } from '../../orgs/invitations.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { validBody } from './shared.ts';

type CreateOrgInvitationResponse = components['schemas']['CreateOrgInvitationResponse'];

export const createOrgInvitation = defineOperation({
  name: 'createOrgInvitation',
  method: 'POST',
  path: '/api/1/org/invitation/create',
  scope: 'write',
  request: { body: 'CreateOrgInvitationRequest' },
  writes: 'org_invitation_create',
  parse: (c) => validBody(c, 'CreateOrgInvitationRequest'),
  async handle(c, input) {
    const made = await createInvitation(writeScopeOf(c), writeDepsOf(c), input);
    const result = {
      invitationId: made.invitationId,
      ticket: made.ticket,
      expiresAt: made.expiresAt.toISOString(),
      status: 'invitation created' as const,
    };
    return c.json({ result } satisfies CreateOrgInvitationResponse, 201);
  },
});
