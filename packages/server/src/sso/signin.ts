// The outcome of a checked enterprise sign-in (issue 61, point 4), as a provider sign-in's: the
// identity (`sso:{connectionId}`, the NameID) linked to an account is a login; not linked, and
// the email in a domain the connection's organization has verified, the site's account of that
// email is linked (the organization's verified domain and its own IdP vouch for the address) or
// an account is made, a member with the connection's defaultRoles if it is not one (just in
// time), and signed in; otherwise 409 identity_unlinked, and nothing is made. Each step is the
// identities' and organizations' own write (audited as theirs); the login is identity/verify's.
import { and, eq, sql } from 'drizzle-orm';
import { orgMemberships, users } from '../db/schema.ts';
import { ApiError } from '../errors.ts';
import {
  accountWithIdentity,
  createFromIdentity,
  type IdentityCreateDeps,
  type IdentityKey,
  linkIdentity,
  verifyIdentity,
} from '../identities/identities.ts';
import { issueLinkTicket } from '../identities/link-tickets.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import type { WriteScope } from '../kernel/unit-of-work.ts';
import { addMember } from '../orgs/members.ts';
import { type ConnectionRow, identityProviderOf } from './connections.ts';
import { orgOfVerifiedDomain } from './domains.ts';

/**
 * 409 identity_unlinked with a link ticket (identities/link-tickets.ts, as provider/callback's): the
 * person proves which account is theirs, then the site links the identity with `linkTicket`. The
 * email is not vouched for here (it is outside the organization's verified domains).
 */
async function identityUnlinked(
  deps: IdentityCreateDeps,
  site: string,
  identity: { provider: string; subject: string; email: string | undefined; name: string | undefined },
): Promise<ApiError> {
  const { linkTicket, expiresAt } = await issueLinkTicket(deps.db, site, { ...identity, emailVerified: false });
  return new ApiError(
    'identity_unlinked',
    "No account has this identity, and its email is not in a domain the connection's organization has verified: have the person prove which account is theirs, then link it with user/identity/link and this linkTicket.",
    {
      members: {
        linkTicket,
        linkTicketExpiresAt: expiresAt.toISOString(),
        identity: {
          provider: identity.provider,
          subject: identity.subject,
          email: identity.email ?? null,
          emailVerified: false,
          name: identity.name ?? null,
        },
      },
    },
  );
}

export interface SignedIn {
  userId: string;
  created: boolean;
}

export async function signInThrough(
  scope: WriteScope,
  deps: IdentityCreateDeps,
  who: { connection: ConnectionRow; nameId: string; email: string | undefined; name: string | undefined },
): Promise<SignedIn> {
  const { connection } = who;
  const key: IdentityKey = { provider: identityProviderOf(connection.id), subject: who.nameId };
  // Its user.identity_linked names the connection and its organization.
  const via = { connectionId: connection.id, orgId: connection.orgId };
  if ((await accountWithIdentity(deps.db, scope.site, key)) !== undefined)
    return { userId: await verifyIdentity(scope, deps, key), created: false };

  const email = who.email;
  if (email === undefined || (await orgOfVerifiedDomain(deps.db, scope.site, email)) !== connection.orgId)
    throw await identityUnlinked(deps, scope.site, { ...key, email, name: who.name });
  const [account] = await deps.db
    .select({ id: users.id })
    .from(users)
    .where(and(inReachOf(scope.site), sql`lower(${users.email}) = lower(${email})`))
    .limit(1);
  let created = false;
  let userId: string;
  if (account !== undefined) {
    userId = account.id;
    await linkIdentity(scope, deps, { ...key, userId, email, emailVerified: true, via });
  } else {
    userId = await createFromIdentity(
      scope,
      deps,
      {
        ...key,
        email,
        name: (who.name ?? email.slice(0, email.indexOf('@'))).slice(0, 200),
        emailVerified: true,
      },
      undefined,
      via,
    );
    created = true;
  }
  const [member] = await deps.db
    .select({ userId: orgMemberships.userId })
    .from(orgMemberships)
    .where(and(eq(orgMemberships.orgId, connection.orgId), eq(orgMemberships.userId, userId)));
  if (member === undefined) {
    try {
      await addMember(scope, deps, { orgId: connection.orgId, _userId: userId, roles: connection.defaultRoles });
    } catch (error) {
      // Made a member meanwhile (another sign-in at once, or the site): as wanted.
      if (!(error instanceof ApiError && error.code === 'already_member')) throw error;
    }
  }
  return { userId: await verifyIdentity(scope, deps, key), created };
}
