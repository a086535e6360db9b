// Organizations' rules (issue 45): their bounds, their errors, and how a row is shown.
import { ApiError, invalidRequest } from '../errors.ts';

/** An account belongs to at most this many organizations (409 org_limit_reached beyond). */
export const MAX_ORGS_PER_ACCOUNT = 1_000;
/** An organization has at most this many pending invitations (409 too_many_invitations beyond). */
export const MAX_PENDING_INVITATIONS = 1_000;
/** An invitation's lifetime in seconds when none is given: 7 days (at most 30, the spec's bound). */
export const INVITATION_LIFETIME = 7 * 24 * 3600;

export const orgNotFound = () => new ApiError('org_not_found', 'No organization of this site has this orgId or slug.');
export const memberNotFound = () =>
  new ApiError('member_not_found', 'The account is not a member of this organization.');
export const invitationNotFound = () =>
  new ApiError('invitation_not_found', 'No pending invitation of this site has this invitationId.');
export const slugTaken = () =>
  new ApiError('slug_taken', 'Another organization of this site has this slug.', {
    errors: [{ pointer: '/slug', code: 'conflict', message: 'is already in use' }],
  });
export const alreadyMember = () =>
  new ApiError('already_member', 'The account is a member of this organization already.');
export const orgLimitReached = () =>
  new ApiError(
    'org_limit_reached',
    `The account belongs to ${MAX_ORGS_PER_ACCOUNT.toLocaleString('en')} organizations, the most it may.`,
  );
export const tooManyInvitations = () =>
  new ApiError(
    'too_many_invitations',
    `The organization has ${MAX_PENDING_INVITATIONS.toLocaleString('en')} pending invitations; revoke some first.`,
  );

/** 400 at each role named that is not one of the site's (`pointer` is the roles' array). */
export const unknownRoles = (pointer: string, indexes: number[]) =>
  invalidRequest(
    'A role named is not one of the site\u2019s roles (org/roles).',
    indexes.map((i) => ({
      pointer: `${pointer}/${i}`,
      code: 'not_allowed',
      message: "is not one of the site's roles (org/roles)",
    })),
  );

const iso = (d: Date) => d.toISOString();

export interface OrgRow {
  id: string;
  name: string;
  slug: string | null;
  metadata: Record<string, unknown>;
  memberCount: number;
  createdAt: Date;
  updatedAt: Date;
}

/** An organization as the spec's Org, field by field. */
export const toOrg = (row: OrgRow) => ({
  orgId: row.id,
  name: row.name,
  slug: row.slug,
  metadata: row.metadata,
  memberCount: row.memberCount,
  createdAt: iso(row.createdAt),
  updatedAt: iso(row.updatedAt),
});
