import type { components } from '@user-accounts/client';
import { and, sql } from 'drizzle-orm';
import { users } from '../../db/schema.ts';
import { invalidRequest } from '../../errors.ts';
import { prepareSend } from '../../messages/compose.ts';
import { createInvitation, type DeliverInvitation } from '../../orgs/invitations.ts';
import { defineOperation } from '../define-operation.ts';
import { writeDepsOf, writeScopeOf } from '../run-write.ts';
import { inReach, validBody } from './shared.ts';

type CreateOrgInvitationRequest = components['schemas']['CreateOrgInvitationRequest'];
type CreateOrgInvitationResponse = components['schemas']['CreateOrgInvitationResponse'];

export const createOrgInvitation = defineOperation({
  name: 'createOrgInvitation',
  method: 'POST',
  path: '/api/1/org/invitation/create',
  scope: 'write',
  request: { body: 'CreateOrgInvitationRequest' },
  writes: 'org_invitation_create',
  parse(c): CreateOrgInvitationRequest {
    const input = validBody(c, 'CreateOrgInvitationRequest') as CreateOrgInvitationRequest;
    if (input.send?.channel === 'sms')
      throw invalidRequest('An invitation is a link to an email address: it goes by email.', [
        { pointer: '/send/channel', code: 'not_allowed', message: 'an invitation goes by email' },
      ]);
    return input;
  },
  mockExample: (input) => (input.send === undefined ? 'created' : 'sent'),
  async handle(c, input) {
    let deliver: DeliverInvitation | undefined;
    if (input.send !== undefined) {
      // `send` (issue 60, point 3): as user/ticket's (messages/compose.ts), every check before
      // anything is written; the message belongs to the account holding the address, if any.
      const { database, factorKeys, messages } = c.get('deps');
      const site = c.get('token').site;
      const [account] = await database.db
        .select({ id: users.id, name: users.name })
        .from(users)
        .where(and(inReach(c), sql`lower(${users.email}) = lower(${input.email})`))
        .limit(1);
      const ready = await prepareSend(
        database.db,
        factorKeys,
        messages?.budgets,
        {
          site,
          userId: account?.id ?? null,
          orgId: input.orgId,
          template: 'invitation',
          listed: 'invitation',
          recipient: input.email,
        },
        input.send,
      );
      deliver = (tx, made) =>
        ready.enqueue(
          tx,
          { ticket: made.ticket, expiresIn: made.expiresIn, expiresAt: made.expiresAt },
          { email: input.email, name: account?.name ?? '', orgName: made.orgName },
        );
    }
    const made = await createInvitation(writeScopeOf(c), writeDepsOf(c), input, deliver);
    c.header('Cache-Control', 'no-store');
    if (made.messageId !== undefined) {
      c.get('deps').messages?.kick();
      const result = {
        invitationId: made.invitationId,
        messageId: made.messageId,
        expiresAt: made.expiresAt.toISOString(),
        status: 'invitation sent' as const,
      };
      return c.json({ result } satisfies CreateOrgInvitationResponse, 201);
    }
    const result = {
      invitationId: made.invitationId,
      ticket: made.ticket,
      expiresAt: made.expiresAt.toISOString(),
      status: 'invitation created' as const,
    };
    return c.json({ result } satisfies CreateOrgInvitationResponse, 201);
  },
});
