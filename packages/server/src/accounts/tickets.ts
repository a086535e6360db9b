// Tickets (issue 28, point 3): single-use, expiring secrets bound to one account and one purpose,
// for a site's "verify your email", "verify your phone", "forgot your password" and "change your
// email". Only a SHA-256 of each is stored; a use deletes the row in the statement that finds it,
// so of many concurrent redeems exactly one gets it. A change the ticket stands on deletes it.
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { and, eq, gt, inArray, type SQL, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { tickets, users } from '../db/schema.ts';

export type Purpose = 'verify_email' | 'verify_phone' | 'reset_password' | 'change_email';

const HOUR = 3600;
/** Seconds: [default, maximum]. A reset is short-lived (it grants the account); a link to verify waits for the user's mail. */
export const LIFETIMES: Record<Purpose, [number, number]> = {
  verify_email: [24 * HOUR, 7 * 24 * HOUR],
  change_email: [24 * HOUR, 7 * 24 * HOUR],
  reset_password: [HOUR, 24 * HOUR],
  verify_phone: [10 * 60, HOUR],
};

/** A phone code's wrong tries before it is burned. */
export const CODE_TRIES = 5;

/** What each purpose's ticket dies of: the account's email, its password, its phone changed. */
export const ENDED_BY = {
  email: ['verify_email', 'reset_password', 'change_email'],
  password: ['reset_password'],
  phone: ['verify_phone'],
} as const satisfies Record<string, Purpose[]>;

const sha256 = (text: string) => createHash('sha256').update(text).digest('base64url');

/** A code is hashed with its ticket's id: the same six digits never give the same hash twice. */
const codeHash = (ticketId: string, code: string) => sha256(`${ticketId}:${code}`);

export interface Issued {
  ticket: string;
  expiresAt: Date;
}

/**
 * Stores a new ticket of `purpose` for the account, in the caller's transaction, and returns the
 * secret (its only copy). A phone code replaces the account's earlier one.
 */
export async function issueTicket(
  tx: Db,
  account: { id: string; site: string },
  purpose: Purpose,
  expiresIn: number,
  newEmail: string | undefined,
): Promise<Issued> {
  const expiresAt = new Date(Date.now() + expiresIn * 1000);
  if (purpose === 'verify_phone') {
    await tx.delete(tickets).where(and(eq(tickets.userId, account.id), eq(tickets.purpose, 'verify_phone')));
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const [row] = await tx
      .insert(tickets)
      .values({ site: account.site, userId: account.id, purpose, secretHash: 'pending', expiresAt })
      .returning({ id: tickets.id });
    await tx
      .update(tickets)
      .set({ secretHash: codeHash(row!.id, code) })
      .where(eq(tickets.id, row!.id));
    return { ticket: code, expiresAt };
  }
  const ticket = randomBytes(32).toString('base64url');
  await tx.insert(tickets).values({
    site: account.site,
    userId: account.id,
    purpose,
    secretHash: sha256(ticket),
    newEmail: newEmail ?? null,
    expiresAt,
  });
  return { ticket, expiresAt };
}

export interface Found {
  id: string;
  userId: string;
  newEmail: string | null;
}

/**
 * The live ticket this secret is, of this site and purpose (and, for a code, of this account), or
 * undefined. A wrong code counts a try, and its fifth burns the code. Nothing is used here.
 */
export async function findTicket(
  db: Db,
  site: string,
  purpose: Purpose,
  secret: string,
  userId: string | undefined,
): Promise<Found | undefined> {
  const live = and(eq(tickets.site, site), eq(tickets.purpose, purpose), gt(tickets.expiresAt, sql`now()`));
  const columns = { id: tickets.id, userId: tickets.userId, newEmail: tickets.newEmail };
  if (purpose !== 'verify_phone') {
    const [row] = await db
      .select(columns)
      .from(tickets)
      .where(and(live, eq(tickets.secretHash, sha256(secret))))
      .limit(1);
    return row;
  }
  if (userId === undefined) return undefined;
  const [row] = await db
    .select({ ...columns, secretHash: tickets.secretHash })
    .from(tickets)
    .where(and(live, eq(tickets.userId, userId)))
    .limit(1);
  if (row === undefined) return undefined;
  if (row.secretHash === codeHash(row.id, secret)) return row;
  // A wrong code: one try more (counted in the row: tries at once all count), and the fifth burns it.
  const [tried] = await db
    .update(tickets)
    .set({ tries: sql`${tickets.tries} + 1` })
    .where(eq(tickets.id, row.id))
    .returning({ tries: tickets.tries });
  if (tried !== undefined && tried.tries >= CODE_TRIES) await db.delete(tickets).where(eq(tickets.id, row.id));
  return undefined;
}

/** Uses the ticket: deletes it if it is still there, in the caller's transaction. True for the one caller that did. */
export async function useTicket(tx: Db, id: string): Promise<boolean> {
  const used = await tx
    .delete(tickets)
    .where(and(eq(tickets.id, id), gt(tickets.expiresAt, sql`now()`)))
    .returning({ id: tickets.id });
  return used.length === 1;
}

/** Ends the account's tickets of these purposes (a change they stood on), in the caller's transaction. */
export async function endTickets(tx: Db, userId: string, purposes: readonly Purpose[]): Promise<void> {
  await tx.delete(tickets).where(and(eq(tickets.userId, userId), inArray(tickets.purpose, [...purposes])));
}

/**
 * The purposes an update ends, worked out against the row as it was (before the UPDATE, in its
 * transaction): a new email (not a change of letter case), a new password, a changed phone.
 */
export async function endTicketsOfUpdate(
  tx: Db,
  /** The account as the update names it (in reach, and If-Match's versions): no other's tickets end. */
  account: SQL | undefined,
  userId: string,
  change: { email?: string; password?: boolean; phone?: string | null },
): Promise<void> {
  if (change.email === undefined && change.password !== true && change.phone === undefined) return;
  const [row] = await tx.select({ email: users.email, phone: users.phone }).from(users).where(account).for('update');
  if (row === undefined) return;
  const ended = new Set<Purpose>();
  if (change.email !== undefined && change.email.toLowerCase() !== row.email.toLowerCase())
    for (const p of ENDED_BY.email) ended.add(p);
  if (change.password === true) for (const p of ENDED_BY.password) ended.add(p);
  if (change.phone !== undefined && change.phone !== row.phone) for (const p of ENDED_BY.phone) ended.add(p);
  if (ended.size > 0) await endTickets(tx, userId, [...ended]);
}
