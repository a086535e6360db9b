// The login's ticket between its two steps (issue 29, point 2): what `verify` answers with its 403
// second_factor_required, and `factor/verify` takes. Self-contained rather than a row of the
// tickets table (accounts/tickets.ts), whose purposes a CHECK fixes and whose change would need a
// migration racing others': an HMAC-signed {account, site, expiry, generation}, under the
// deployment's key for this purpose (kernel/deployment-keys.ts: derived from
// FACTOR_ENCRYPTION_KEY's ring, on the embedded database from its key file; issue 57, G7: it
// was a key kept in the database, service_keys `second_factor`, from which a copy minted a
// ticket for any account). A ticket checks under every key of the ring (one made before a
// rotation still serves for its five minutes), never under the database's own key beside a
// ring (a copy of the database has that one). Single use: `generation` is the account's second-factor state when the ticket was made
// (its factors' last accepted step and use, its used recovery codes), which every second-factor
// success changes, under the account's row lock; so a ticket is spent by the first success, and a
// concurrent second one finds the generation moved.
import { timingSafeEqual } from 'node:crypto';
import { and, eq, isNotNull, type SQL, sql } from 'drizzle-orm';
import { type Db, rows } from '../db/client.ts';
import { recoveryCodes, serviceKeys, userFactors, users } from '../db/schema.ts';
import { deploymentKeysOf } from '../kernel/deployment-keys.ts';
import type { KeyRing } from '../kernel/secret-box.ts';

/** Five minutes: time to open an authenticator app, never a session. */
export const LOGIN_TICKET_MS = 5 * 60_000;

/**
 * What the login's first step was: a password (`verify`), a login link or code (`ticket/redeem`,
 * issue 44, point 6), or another provider (`identity/verify`), for the session's amr once the
 * second step completes it.
 */
export type FirstStep = 'pwd' | 'otp' | 'fed';

interface Claims {
  u: string;
  s: string;
  e: number;
  g: string;
  /** The first step when it was not a password (absent in every ticket made before it existed). */
  f?: FirstStep;
  /** The provider of an identity's first step (`fed`): the sign-in gate asks it again at the second. */
  p?: string;
}

/** What makes and reads tickets: the database, and FACTOR_ENCRYPTION_KEY's ring (undefined: none). */
export interface TicketKeys {
  db: Db;
  factorKeys?: KeyRing | undefined;
}

/**
 * The key service_keys held before issue 57 (G7): deleted at each start (a server of the version
 * before, in a rolling upgrade, makes it again; its tickets then fail on the new servers, and the
 * person logs in again). A ticket of it is refused from the upgrade on.
 */
export async function dropStoredTicketKey(db: Db): Promise<boolean> {
  const gone = await db.delete(serviceKeys).where(eq(serviceKeys.name, 'second_factor')).returning();
  return gone.length > 0;
}

/** The account's second-factor generation (see above), read in `db` (the caller's transaction). */
export async function generationOf(db: Db, userId: string): Promise<string> {
  const [row] = await rows<{ generation: string }>(db, sql`select ${generationSql(userId)} as generation`);
  return row!.generation;
}

/**
 * The generation as an SQL text expression, for a caller's own statement (verify reads it with the
 * account's factors): `step:used:codes:password`, as generationOf answers it.
 */
export function generationSql(userId: string): SQL {
  const factors = sql`(select coalesce(max(${userFactors.lastStep}), 0)::text || ':' ||
    coalesce(floor(extract(epoch from max(${userFactors.lastUsedAt})) * 1000), 0)::text
    from ${userFactors} where ${userFactors.userId} = ${userId})`;
  const codes = sql`(select count(*)::text from ${recoveryCodes}
    where ${and(eq(recoveryCodes.userId, userId), isNotNull(recoveryCodes.usedAt))})`;
  // The password too (issue 43's review): a password changed between the two steps spends the
  // ticket, so that a login begun with the old password makes no session after the change. 48
  // bits of an MD5 of the stored hash tell a change; the ticket, which the site sees, shows no more.
  const password = sql`(select left(md5(coalesce(${users.passwordHash}, '')), 12) from ${users}
    where ${users.id} = ${userId})`;
  return sql`(${factors} || ':' || ${codes} || ':' || coalesce(${password}, ''))`;
}

export async function makeLoginTicket(
  deps: TicketKeys,
  site: string,
  userId: string,
  generation: string,
  first: FirstStep = 'pwd',
  provider?: string,
): Promise<string> {
  const claims: Claims = {
    u: userId,
    s: site,
    e: Date.now() + LOGIN_TICKET_MS,
    g: generation,
    ...(first !== 'pwd' && { f: first }),
    ...(provider !== undefined && { p: provider }),
  };
  const body = Buffer.from(JSON.stringify(claims)).toString('base64url');
  const keys = await deploymentKeysOf(deps.db, deps.factorKeys);
  return `${body}.${keys.bytes('login_ticket', body).toString('base64url')}`;
}

/** The ticket's account, generation and first step when it is ours, of this site and not expired; else undefined. */
export async function readLoginTicket(
  deps: TicketKeys,
  site: string,
  ticket: string,
): Promise<{ userId: string; generation: string; first: FirstStep; provider?: string } | undefined> {
  const [body, signature, ...rest] = ticket.split('.');
  if (body === undefined || signature === undefined || rest.length > 0) return undefined;
  const given = Buffer.from(signature, 'base64url');
  const keys = await deploymentKeysOf(deps.db, deps.factorKeys);
  const signed = keys
    .bytesAll('login_ticket', body)
    .some(
      ({ bytes, own }) => (!own || !keys.external) && bytes.length === given.length && timingSafeEqual(bytes, given),
    );
  if (!signed) return undefined;
  const claims = JSON.parse(Buffer.from(body, 'base64url').toString()) as Claims;
  if (claims.s !== site || claims.e <= Date.now()) return undefined;
  return {
    userId: claims.u,
    generation: claims.g,
    first: claims.f ?? 'pwd',
    ...(claims.p !== undefined && { provider: claims.p }),
  };
}
