import { and, eq, type Placeholder } from 'drizzle-orm';
import { users } from '../db/schema.ts';

/**
 * The accounts a site's token may see: created through this interface, and of its own site.
 * Every other row answers exactly as a row that does not exist. The site may be a prepared
 * statement's placeholder.
 */
export const inReachOf = (site: string | Placeholder) => and(eq(users.origin, 'api'), eq(users.site, site));
