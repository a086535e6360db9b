// Invitations (issue 45, point 5): an organization invites an email address with roles; whoever
// holds the account with that email, verified, accepts with the ticket and becomes a member. The
// ticket is 256 random bits shown once; only its SHA-256 is kept. An accept locks the invitation's
// row and deletes it in its transaction: of concurrent accepts exactly one finds it.
import { createHash, randomBytes } from 'node:crypto';
import { and, asc, eq, gt, lte, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { orgInvitations, orgs, users } from '../db/schema.ts';
import { ApiError, invalidTicket } from '../errors.ts';
import { isUuid, uuidv7 } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { insertMembership, lockOrg, memberEvent } from './members.ts';
import { holdRoles } from './roles.ts';
import {
  INVITATION_LIFETIME,
  invitationNotFound,
  MAX_PENDING_INVITATIONS,
  orgNotFound,
  tooManyInvitations,
} from './rules.ts';

const sha256 = (text: string) => createHash('sha256').update(text).digest('base64url');

export interface CreatedInvitation {
  invitationId: string;
  ticket: string;
  expiresAt: Date;
  /** With `deliver`: the message's id (the ticket is then for it alone, never for the answer). */
  messageId?: string;
}

/**
 * `send` (issue 60): writes the invitation's message in the invitation's own transaction, once the
 * ticket exists; answers the message's id. The organization's name is its template's `orgName`.
 */
export type DeliverInvitation = (
  tx: Db,
  invitation: { ticket: string; expiresIn: number; expiresAt: Date; orgName: string },
) => Promise<string>;

export async function createInvitation(
  scope: WriteScope,
  deps: WriteDeps,
  input: { orgId: string; email: string; roles: string[]; expiresIn?: number | undefined },
  deliver?: DeliverInvitation,
): Promise<CreatedInvitation> {
  const { orgId, email, roles } = input;
  const ticket = randomBytes(32).toString('base64url');
  const invitationId = uuidv7();
  const expiresIn = input.expiresIn ?? INVITATION_LIFETIME;
  const expiresAt = new Date(Date.now() + expiresIn * 1000);
  let messageId: string | undefined;
  const done = {
    userId: undefined,
    status: 201,
    outcome: deliver === undefined ? 'invitation created' : 'invitation sent',
    moreEvents: [{ type: 'org.invitation_created' as const, userId: orgId, data: { orgId, invitationId, roles } }],
  };
  await inWrite(scope, deps, 'org_invitation_create', done, async (tx) => {
    const org = await lockOrg(tx, scope.site, orgId);
    await holdRoles(tx, scope.site, roles);
    // The organization's expired invitations go here: its pending ones stay bounded.
    await tx
      .delete(orgInvitations)
      .where(and(eq(orgInvitations.orgId, orgId), lte(orgInvitations.expiresAt, sql`now()`)));
    const [{ count } = { count: 0 }] = await tx
      .select({ count: sql<number>`count(*)::int` })
      .from(orgInvitations)
      .where(eq(orgInvitations.orgId, orgId));
    if (count >= MAX_PENDING_INVITATIONS) throw tooManyInvitations();
    await tx.insert(orgInvitations).values({
      id: invitationId,
      site: scope.site,
      orgId,
      email,
      roles,
      ticketHash: sha256(ticket),
      expiresAt,
    });
    if (deliver !== undefined) messageId = await deliver(tx, { ticket, expiresIn, expiresAt, orgName: org.name });
    return true;
  });
  return { invitationId, ticket, expiresAt, ...(messageId === undefined ? {} : { messageId }) };
}

/**
 * Accepts the ticket's invitation for the account: 409 email_mismatch or email_unverified (the
 * ticket stays), 409 already_member (the ticket stays), else 422 invalid_ticket for every miss.
 */
export async function acceptInvitation(
  scope: WriteScope,
  deps: WriteDeps,
  input: { ticket: string; _userId: string },
): Promise<string> {
  const userId = input._userId;
  scope.report?.({ userId });
  type Accepted = { orgId: string; invitationId: string; roles: string[] };
  const done = (a: Accepted) => ({
    userId,
    status: 200,
    outcome: 'invitation accepted',
    moreEvents: [
      {
        type: 'org.invitation_accepted' as const,
        userId: a.orgId,
        data: { orgId: a.orgId, invitationId: a.invitationId, _userId: userId, roles: a.roles },
      },
      memberEvent('org.member_added', a.orgId, userId, a.roles),
    ],
  });
  if (!isUuid(userId)) throw invalidTicket();
  const hash = sha256(input.ticket);
  const accepted = await inWrite(
    scope,
    deps,
    'org_invitation_accept',
    done,
    async (tx): Promise<Accepted | undefined> => {
      const [invitation] = await tx
        .select({
          id: orgInvitations.id,
          orgId: orgInvitations.orgId,
          email: orgInvitations.email,
          roles: orgInvitations.roles,
        })
        .from(orgInvitations)
        .where(
          and(
            eq(orgInvitations.ticketHash, hash),
            eq(orgInvitations.site, scope.site),
            gt(orgInvitations.expiresAt, sql`now()`),
          ),
        )
        .for('update');
      if (invitation === undefined) return undefined;
      const [account] = await tx
        .select({ email: users.email, verified: sql<boolean>`${users.emailVerifiedAt} is not null` })
        .from(users)
        .where(and(eq(users.id, userId), inReachOf(scope.site)))
        .for('no key update');
      if (account === undefined) return undefined;
      if (account.email.toLowerCase() !== invitation.email.toLowerCase()) {
        throw new ApiError('email_mismatch', "The account's email is not the one this invitation was sent to.");
      }
      if (!account.verified) {
        throw new ApiError('email_unverified', "The account's email is not verified; verify it, then accept.");
      }
      await lockOrg(tx, scope.site, invitation.orgId);
      // The roles were the site's at the invitation; held now, so that org/roles waits for this.
      await holdRoles(tx, scope.site, invitation.roles);
      await insertMembership(tx, scope.site, invitation.orgId, userId, invitation.roles);
      await tx.delete(orgInvitations).where(eq(orgInvitations.id, invitation.id));
      return { orgId: invitation.orgId, invitationId: invitation.id, roles: invitation.roles };
    },
  );
  if (accepted === undefined) throw invalidTicket();
  return accepted.orgId;
}

export async function revokeInvitation(scope: WriteScope, deps: WriteDeps, invitationId: string): Promise<void> {
  if (!isUuid(invitationId)) throw invitationNotFound();
  const done = { userId: undefined, status: 200, outcome: 'invitation revoked' };
  const revoked = await inWrite(scope, deps, 'org_invitation_revoke', done, async (tx) => {
    const [row] = await tx
      .delete(orgInvitations)
      .where(
        and(
          eq(orgInvitations.id, invitationId),
          eq(orgInvitations.site, scope.site),
          gt(orgInvitations.expiresAt, sql`now()`),
        ),
      )
      .returning({ id: orgInvitations.id });
    return row;
  });
  if (revoked === undefined) throw invitationNotFound();
}

/** The organization's pending invitations, oldest first (at most 1,000); never a ticket. */
export async function listInvitations(db: Db, site: string, orgId: string) {
  if (!isUuid(orgId)) throw orgNotFound();
  const [org] = await db
    .select({ id: orgs.id })
    .from(orgs)
    .where(and(eq(orgs.id, orgId), eq(orgs.site, site)));
  if (org === undefined) throw orgNotFound();
  const found = await db
    .select({
      invitationId: orgInvitations.id,
      email: orgInvitations.email,
      roles: orgInvitations.roles,
      createdAt: orgInvitations.createdAt,
      expiresAt: orgInvitations.expiresAt,
    })
    .from(orgInvitations)
    .where(and(eq(orgInvitations.orgId, orgId), gt(orgInvitations.expiresAt, sql`now()`)))
    .orderBy(asc(orgInvitations.createdAt), asc(orgInvitations.id))
    .limit(MAX_PENDING_INVITATIONS);
  return found.map((i) => ({ ...i, createdAt: i.createdAt.toISOString(), expiresAt: i.expiresAt.toISOString() }));
}
