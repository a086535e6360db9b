// identity_unlinked's link ticket (issue 59, point 3): what provider/callback (and enterprise SSO,
// issue 61) hand out when nobody has the identity, and user/identity/link takes instead of a raw
// provider and subject. The identity and the profile the provider vouched for, found by the
// ticket's SHA-256 (the ticket itself is shown once), ten minutes, single use, bound to its site.
// Here rather than in providers/ because link (identities.ts) takes it in its own transaction.
import { createHash, randomBytes } from 'node:crypto';
import { and, eq } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { linkTickets } from '../db/schema.ts';
import { ApiError } from '../errors.ts';

/** Ten minutes. */
export const LINK_TICKET_MS = 10 * 60_000;

/** 256 random bits, base64url (43 characters). */
export const randomToken = () => randomBytes(32).toString('base64url');
/** SHA-256, hex: how a state or a link ticket is found without being kept. */
export const hashOf = (value: string) => createHash('sha256').update(value).digest('hex');

/** Who the provider says the person is: the identity and what it said of them. */
export interface ProviderIdentity {
  provider: string;
  subject: string;
  email?: string | undefined;
  /** Only true when the provider said so. */
  emailVerified?: boolean | undefined;
  name?: string | undefined;
}

/** What a link ticket names: the identity and its profile. */
export type LinkTicketContents = ProviderIdentity & { emailVerified: boolean };

/** Keeps a link ticket for the identity; answers the ticket (shown once) and its end. */
export async function issueLinkTicket(
  db: Db,
  site: string,
  identity: ProviderIdentity,
): Promise<{ linkTicket: string; expiresAt: Date }> {
  const linkTicket = randomToken();
  const expiresAt = new Date(Date.now() + LINK_TICKET_MS);
  await db.insert(linkTickets).values({
    ticketHash: hashOf(linkTicket),
    site,
    provider: identity.provider,
    subject: identity.subject,
    email: identity.email ?? null,
    emailVerified: identity.emailVerified === true,
    name: identity.name ?? null,
    expiresAt,
  });
  return { linkTicket, expiresAt };
}

/**
 * Takes the site's link ticket (single use: deleted as read, in `db`, the caller's transaction, so
 * that a link refused rolls it back): 422 invalid_ticket when unknown, used, expired or another
 * site's.
 */
export async function takeLinkTicket(db: Db, site: string, ticket: string): Promise<LinkTicketContents> {
  const [row] =
    ticket.length > 512
      ? []
      : await db
          .delete(linkTickets)
          .where(and(eq(linkTickets.ticketHash, hashOf(ticket)), eq(linkTickets.site, site)))
          .returning();
  if (row === undefined || row.expiresAt.getTime() <= Date.now())
    throw new ApiError(
      'invalid_ticket',
      'This linkTicket is unknown, used, expired or another site’s: sign in with the provider again (provider/start).',
    );
  return {
    provider: row.provider,
    subject: row.subject,
    email: row.email ?? undefined,
    emailVerified: row.emailVerified,
    name: row.name ?? undefined,
  };
}
