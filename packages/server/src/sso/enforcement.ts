// Enforcement (issue 61, point 5): the sign-in gate (kernel/sign-in-gate.ts) that assemble.ts
// hands to every login. An account whose email is in a domain an organization of the site has
// verified, when one of that organization's connections has `enforce`, signs in only through the
// organization's connections (its identity `sso:{connectionId}`): a password, a login link or
// code, a passkey, a social sign-in (an account made by one too) or identity/verify of another
// provider answers 403 sso_required with the connection, so that the site sends the person
// through sso/start. Only logins ask: the site's operators still act on the account through the
// API (update, tickets issued, sessions, identities linked) and the CLI.
import { sql } from 'drizzle-orm';
import { rows } from '../db/client.ts';
import { ApiError } from '../errors.ts';
import type { SignInGate } from '../kernel/sign-in-gate.ts';

const SSO_PREFIX = 'sso:';

export const ssoRequired = (connectionId: string) =>
  new ApiError(
    'sso_required',
    "This account's email is in a domain whose organization requires single sign-on: send the person through sso/start with this connectionId.",
    { members: { connectionId } },
  );

/**
 * One statement, by the account's id or by an email: the oldest enforcing connection of the
 * organization that verified the email's domain, and whether the identity's connection (when the
 * login is by an `sso:` identity) is one of that organization's. A site without an enforcing
 * connection finds no row at its first index probe (org_domains' verified key).
 */
export const ssoSignInGate: SignInGate = {
  async refusal(db, site, account, way) {
    const email =
      'email' in account
        ? sql`${account.email}::text`
        : sql`(select u.email from users u where u.id = ${account.userId}::uuid and u.site = ${site})`;
    const through =
      way.kind === 'identity' && way.provider.startsWith(SSO_PREFIX) ? way.provider.slice(SSO_PREFIX.length) : null;
    const [row] = await rows<{ connectionId: string; own: boolean }>(
      db,
      sql`select c.id as "connectionId",
          ${through === null ? sql`false` : sql`exists (select 1 from sso_connections x where x.id::text = ${through} and x.org_id = d.org_id)`} as own
        from org_domains d
        join sso_connections c on c.org_id = d.org_id and c.enforce
        where d.site = ${site} and d.verified_at is not null
          and d.domain = lower(substring(${email} from '@([^@]*)$'))
        order by c.created_at, c.id
        limit 1`,
    );
    if (row === undefined || row.own) return undefined;
    return ssoRequired(row.connectionId);
  },
};
