import { and, eq } from 'drizzle-orm';
import { users } from './db/schema.ts';

/**
 * The accounts a site's token may see: created through this interface, and of its own site.
 * Every other row answers exactly as a row that does not exist.
 */
export const inReachOf = (site: string) => and(eq(users.origin, 'api'), eq(users.site, site));
