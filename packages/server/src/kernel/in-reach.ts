import { and, eq, isNull, type Placeholder, sql } from 'drizzle-orm';
import { users } from '../db/schema.ts';

/**
 * The accounts a site's token may see: created through this interface, of its own site, and not
 * deleted (an account in its grace period is reached by restore alone: accounts/delete.ts).
 * Every other row answers exactly as a row that does not exist. The site may be a prepared
 * statement's placeholder.
 */
export const inReachOf = (site: string | Placeholder) =>
  and(eq(users.origin, 'api'), eq(users.site, site), isNull(users.deletedAt));

/** The site's accounts in their grace period: what restore reaches, and nothing else does. */
export const inGraceOf = (site: string) =>
  and(eq(users.origin, 'api'), eq(users.site, site), sql`${users.deletedAt} is not null`);

/**
 * The site's accounts that hold their email: those in reach and those in their grace period. An
 * email stays taken while its account may be restored, so that a restore never collides.
 */
export const holdsEmailOf = (site: string) => and(eq(users.origin, 'api'), eq(users.site, site));
