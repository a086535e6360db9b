// Tickets (issue 28, point 3): single-use, expiring secrets bound to one account and one purpose,
// for a site's "verify your email", "verify your phone", "forgot your password" and "change your
// email", and (issue 44, point 6) "email me a sign-in link or code". Only a SHA-256 of each is
// stored (a phone or login code, six digits a SHA-256 would give away at once, as an HMAC under
// the deployment's key); a use deletes the row in the statement that finds
// it, so of many concurrent redeems exactly one gets it. A change the ticket stands on deletes it.
import { createHash, randomBytes, randomInt } from 'node:crypto';
import { and, eq, gt, inArray, lt, type SQL, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { tickets, users } from '../db/schema.ts';
import { tooManyAttempts } from '../errors.ts';
import { secondFactorLockoutKey } from '../factors/factors.ts';
import type { DeploymentKeys, MacPurpose } from '../kernel/deployment-keys.ts';
import type { LockoutPolicy, LockoutStore } from '../limits/lockout.ts';

/** The purposes of the API (TicketPurpose): a `login` ticket is a link's, or with delivery `code` a `login_code`. */
export type Purpose = 'verify_email' | 'verify_phone' | 'reset_password' | 'change_email' | 'login' | 'login_code';

/** The purposes whose secret is a 6-digit code: redeemed with its account's id, burned after CODE_TRIES wrong ones. */
const CODES = { verify_phone: 'phone_code', login_code: 'login_code' } as const satisfies Partial<
  Record<Purpose, MacPurpose>
>;
export const isCode = (purpose: Purpose): purpose is keyof typeof CODES => purpose in CODES;

const HOUR = 3600;
/** Seconds: [default, maximum]. A reset is short-lived (it grants the account); a link to verify waits for the user's mail. */
export const LIFETIMES: Record<Purpose, [number, number]> = {
  verify_email: [24 * HOUR, 7 * 24 * HOUR],
  change_email: [24 * HOUR, 7 * 24 * HOUR],
  reset_password: [HOUR, 24 * HOUR],
  verify_phone: [10 * 60, HOUR],
  // A sign-in: minutes, as a second factor's ticket is; a code's tries, not its time, bound its guessing.
  login: [15 * 60, HOUR],
  login_code: [10 * 60, 10 * 60],
};

/** A phone code's wrong tries before it is burned. */
export const CODE_TRIES = 5;

/** What each purpose's ticket dies of: the account's email, its password, its phone changed. */
export const ENDED_BY = {
  email: ['verify_email', 'reset_password', 'change_email', 'login', 'login_code'],
  password: ['reset_password'],
  phone: ['verify_phone'],
  // An unverified email proven by a login ticket (login-tickets.ts): the tickets a stranger who
  // signed up with the address may have asked for that do not go to its inbox, a change_email to
  // their own address and a verify_phone of their own phone (the others are mailed to the owner).
  inbox: ['change_email', 'verify_phone'],
} as const satisfies Record<string, Purpose[]>;

const sha256 = (text: string) => createHash('sha256').update(text).digest('base64url');

/**
 * A code's MAC under the deployment's key (issue 41, F10), with its ticket's id: the same six
 * digits never give the same value twice, and a reader of the database cannot try the million.
 */
const codeMac = (keys: DeploymentKeys, purpose: keyof typeof CODES, ticketId: string, code: string) =>
  keys.mac(CODES[purpose], `${ticketId}:${code}`);

/** Whether `code` is the stored one: a MAC, or a phone code issued before them (a SHA-256, until it expires, an hour at most). */
function codeMatches(
  keys: DeploymentKeys,
  purpose: keyof typeof CODES,
  ticketId: string,
  code: string,
  stored: string,
): boolean {
  if (!stored.includes('.')) return purpose === 'verify_phone' && stored === sha256(`${ticketId}:${code}`);
  return keys.matches(CODES[purpose], `${ticketId}:${code}`, stored);
}

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
  /** The deployment's keys: a phone or login code is stored as an HMAC under them. */
  keys: DeploymentKeys,
): Promise<Issued> {
  const expiresAt = new Date(Date.now() + expiresIn * 1000);
  if (isCode(purpose)) {
    // One live code of a purpose an account: five wrong tries are five, not five a code issued.
    await tx.delete(tickets).where(and(eq(tickets.userId, account.id), eq(tickets.purpose, purpose)));
    const code = String(randomInt(0, 1_000_000)).padStart(6, '0');
    const [row] = await tx
      .insert(tickets)
      .values({ site: account.site, userId: account.id, purpose, secretHash: 'pending', expiresAt })
      .returning({ id: tickets.id });
    await tx
      .update(tickets)
      .set({ secretHash: codeMac(keys, purpose, row!.id, code) })
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
 * undefined. A code's try is counted before it is compared, in the statement that finds the code
 * (issue 41, F3): of any number of tries at once, only CODE_TRIES find it, and the rest find
 * nothing whatever they say; a wrong one's fifth burns it. Nothing is used here.
 */
export async function findTicket(
  db: Db,
  site: string,
  purpose: Purpose,
  secret: string,
  userId: string | undefined,
  keys: DeploymentKeys,
): Promise<Found | undefined> {
  const live = and(eq(tickets.site, site), eq(tickets.purpose, purpose), gt(tickets.expiresAt, sql`now()`));
  const columns = { id: tickets.id, userId: tickets.userId, newEmail: tickets.newEmail };
  if (!isCode(purpose)) {
    const [row] = await db
      .select(columns)
      .from(tickets)
      .where(and(live, eq(tickets.secretHash, sha256(secret))))
      .limit(1);
    return row;
  }
  if (userId === undefined) return undefined;
  return (await tryCode(db, site, purpose, secret, userId, keys)).found;
}

/** A code's try: the code found, and whether a live code was compared at all (a wrong one: `judged`, not found). */
async function tryCode(
  db: Db,
  site: string,
  purpose: keyof typeof CODES,
  secret: string,
  userId: string,
  keys: DeploymentKeys,
): Promise<{ found?: Found; judged: boolean }> {
  const live = and(eq(tickets.site, site), eq(tickets.purpose, purpose), gt(tickets.expiresAt, sql`now()`));
  // One statement takes the try: the row's lock orders tries at once, and each sees the others' count.
  const [row] = await db
    .update(tickets)
    .set({ tries: sql`${tickets.tries} + 1` })
    .where(and(live, eq(tickets.userId, userId), lt(tickets.tries, CODE_TRIES)))
    .returning({
      id: tickets.id,
      userId: tickets.userId,
      newEmail: tickets.newEmail,
      secretHash: tickets.secretHash,
      tries: tickets.tries,
    });
  if (row === undefined) return { judged: false };
  if (codeMatches(keys, purpose, row.id, secret, row.secretHash))
    return { found: { id: row.id, userId: row.userId, newEmail: row.newEmail }, judged: true };
  if (row.tries >= CODE_TRIES) await db.delete(tickets).where(eq(tickets.id, row.id));
  return { judged: true };
}

/**
 * What counts an account's wrong codes (issue 57, G4), on the counter of its wrong second factors
 * (factors/factors.ts secondFactorLockoutKey): the lockout store and its policy (VERIFY_LIMIT's per account).
 */
export interface CodeGuard {
  lockout: LockoutStore;
  policy: LockoutPolicy;
}

/** The account's wrong-code lock in force, in seconds (0: none): no new code is issued while it lasts. */
export async function codeLockWait(guard: CodeGuard, site: string, userId: string): Promise<number> {
  const state = await guard.lockout.read(secondFactorLockoutKey(site, userId));
  const until = state?.lockedUntil?.getTime();
  return until === undefined || until <= Date.now() ? 0 : Math.ceil((until - Date.now()) / 1000);
}

/**
 * findTicket for a code, its try counted per account as well (issue 57, G4): before the code is
 * looked at, as a wrong TOTP code is; while the account is locked, 429 too_many_attempts with
 * Retry-After and the code not looked at (a right one stays good for after the lock). A right
 * code clears the count; a try that found no live code to compare is no guess, and is taken back.
 */
export async function findCodeCounted(
  db: Db,
  site: string,
  purpose: keyof typeof CODES,
  secret: string,
  userId: string,
  keys: DeploymentKeys,
  guard: CodeGuard,
): Promise<Found | undefined> {
  const key = secondFactorLockoutKey(site, userId);
  const wait = await guard.lockout.attempt(key, guard.policy);
  // The wrong-code lock's 429, as factor/verify's: the same lock, named as there.
  if (wait > 0) throw tooManyAttempts(wait, { ...guard.policy, name: 'failed_second_factor' });
  let judged = false;
  try {
    const tried = await tryCode(db, site, purpose, secret, userId, keys);
    judged = tried.judged;
    if (tried.found !== undefined) await guard.lockout.clear(key).catch(() => {});
    else if (!judged) await guard.lockout.undo(key, guard.policy).catch(() => {});
    return tried.found;
  } catch (error) {
    if (!judged) await guard.lockout.undo(key, guard.policy).catch(() => {});
    throw error;
  }
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
