// verify: checks an account's password under the guessing limits (limits/lockout.ts), and on a
// success clears its failures and replaces a hash made otherwise than ours are now.
import { and, eq, sql } from 'drizzle-orm';
import { addressKey } from '../auth/failed-authentications.ts';
import { type Db, rows } from '../db/client.ts';
import { userFactors, users } from '../db/schema.ts';
import { ApiError, accountDisabled, invalidCredentials, secondFactorRequired, tooManyAttempts } from '../errors.ts';
import { enabledFactorTypes } from '../factors/factors.ts';
import { generationOf, generationSql, makeLoginTicket } from '../factors/login-ticket.ts';
import { isUuid } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import { refusalOf } from '../kernel/sign-in-gate.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { type LockoutStore, lockoutKey, lookUpAndAttempt, successParts, type VerifyLimits } from '../limits/lockout.ts';
import type { PasswordHasher } from '../passwords/hasher.ts';

/**
 * The right password of an account entered through its inbox since that password was set, before
 * anyone proved the inbox (users.password_unproven): it may be a stranger's who signed up first.
 */
export const passwordResetRequired = () =>
  new ApiError(
    'password_reset_required',
    'This password was set before the email was proven and no longer signs in by itself; set a new one (a reset_password ticket, or update).',
  );

export interface VerifyDeps extends WriteDeps {
  hasher: PasswordHasher;
  verifyLimits: VerifyLimits;
  /** Where the failure counts live (the database, or Redis). */
  lockout: LockoutStore;
  /** Told what could not be cleared after a success (the login stands). */
  warn: (error: unknown, message: string) => void;
  /**
   * Told of a right password of an enabled account, with the hash it now has, once the login is
   * decided: breached-password screening looks it up from here, beside the answer (never before it).
   */
  rightPassword?: (userId: string, passwordHash: string, password: string) => void;
}

export interface VerifyRequest {
  /** Exactly one of email and _userId names the account. */
  email?: string | undefined;
  _userId?: string | undefined;
  /** The password, normalized as the spec says. */
  password: string;
  /** The password as sent, before normalizing: an imported hash may be of that form. */
  sent: string;
  /** The end user's address in its canonical form, when the caller gave one. */
  address?: string | undefined;
}

/** A right password's account, and the hash its password was checked against (or the login's rehash of it). */
export interface VerifiedPassword {
  userId: string;
  /** What a session made of this login checks is still the account's (sessions/issue.ts). */
  passwordHash: string;
}

/**
 * The account whose password `request` gives, in the scope's site: its id, or 422
 * invalid_credentials (no such account in reach, or a wrong password: one answer, in the same
 * time), 403 account_disabled, 429 too_many_attempts when its identifier or the end user's
 * address is locked. The success is a write: audited, with the deadline's commit point.
 */
export async function verifyPassword(
  scope: WriteScope,
  deps: VerifyDeps,
  request: VerifyRequest,
): Promise<VerifiedPassword> {
  const { db, hasher, verifyLimits, lockout } = deps;
  const { site } = scope;
  const signal = scope.deadline?.signal;
  let match = sql`false`;
  if (request.email !== undefined) match = sql`lower(${users.email}) = lower(${request.email})`;
  else if (isUuid(request._userId!)) match = eq(users.id, request._userId!);
  // The account first: its failures count once, by its id, whichever identifier named it (10 by
  // email and 10 more by _userId were 20 guesses a window). An identifier no account in reach
  // has counts as given, so an unknown one locks after as many failures, with the same answer.
  const lookup = db
    .select({
      id: users.id,
      passwordHash: users.passwordHash,
      disabled: users.disabled,
      passwordUnproven: users.passwordUnproven,
    })
    .from(users)
    .where(and(match, inReachOf(site)))
    .limit(1);
  const given =
    request.email !== undefined
      ? lockoutKey(site, 'email', request.email.toLowerCase())
      : lockoutKey(site, 'id', request._userId!.toLowerCase());
  // An address counts by its /64 for IPv6, as the failed-authentication limit does.
  const fromAddress =
    request.address === undefined ? undefined : lockoutKey(site, 'address', addressKey(request.address));
  // Each attempt is counted as a failure before the password is checked (see lockout.ts), and
  // taken back when it was not one. With the counts in this database, the account and the
  // attempts are one round trip before the hash (lookUpAndAttempt); with Redis, the account
  // first, then the attempts there.
  const inDatabase = lockout.db === db;
  let row: Account | undefined;
  let identifier: string;
  let addressWait = 0;
  let wait = 0;
  if (inDatabase) {
    const looked = await lookUpAndAttempt<Account>(
      db,
      lookup.getSQL(),
      sql`account.id, account.password_hash as "passwordHash", account.disabled,
        account.password_unproven as "passwordUnproven"`,
      site,
      given,
      verifyLimits.identifier,
      fromAddress === undefined ? undefined : { key: fromAddress, policy: verifyLimits.address },
    );
    ({ row, identifier, addressWait, wait } = looked);
  } else {
    [row] = await lookup;
    identifier = row !== undefined ? lockoutKey(site, 'id', row.id.toLowerCase()) : given;
    if (fromAddress !== undefined) addressWait = await lockout.attempt(fromAddress, verifyLimits.address);
    if (addressWait === 0) wait = await lockout.attempt(identifier, verifyLimits.identifier);
  }
  // An account in reach is named in the audit row of every outcome from here, its failures too
  // (issue 64: a lockout showed nothing in the account's trail); the caller's answer is the same
  // as for an unknown email, and the row is written either way, so neither says more.
  if (row !== undefined) scope.report?.({ userId: row.id });
  if (addressWait > 0) throw tooManyAttempts(addressWait, { ...verifyLimits.address, name: 'failed_verify_address' });
  if (wait > 0) {
    if (fromAddress !== undefined) await lockout.undo(fromAddress, verifyLimits.address);
    throw tooManyAttempts(wait, { ...verifyLimits.identifier, name: 'failed_verify' });
  }
  // Both attempts went on: taken back, a lock that only their counts set goes with them.
  const notAFailure = async () => {
    await lockout.undo(identifier, verifyLimits.identifier);
    if (fromAddress !== undefined) await lockout.undo(fromAddress, verifyLimits.address);
  };
  // Work that can fail for want of the server (database, hashing queue, deadline): a failure
  // there judged no password, so it is no guess either.
  const unjudged = async <T>(work: () => Promise<T>): Promise<T> => {
    try {
      return await work();
    } catch (error) {
      await notAFailure().catch(() => {});
      throw error;
    }
  };
  const succeeded = async (store: LockoutStore) => {
    await store.clear(identifier);
    if (fromAddress !== undefined) await store.undo(fromAddress, verifyLimits.address);
  };

  // No account, or none in reach: the same verification against a stand-in hash, so that the
  // answer takes as long as for a wrong password. A costly imported hash whose check ran out of
  // time (the deadline passed, or the caller left, while it waited or ran) is the exception: it
  // stays a failure, else its account could be tried for ever, each try costing seconds of a
  // core and never counted (issue 41, F8).
  const costly = row?.passwordHash != null && hasher.isCostly(row.passwordHash);
  const right = await (async () => {
    try {
      return await hasher.verify(row?.passwordHash ?? undefined, request.sent, site, signal);
    } catch (error) {
      if (!(costly && signal?.aborted)) await notAFailure().catch(() => {});
      throw error;
    }
  })();
  if (row === undefined || !right) throw invalidCredentials('password');
  if (row.disabled) {
    await notAFailure();
    throw accountDisabled();
  }
  // Right, but set before the inbox was proven by someone else's way in: no guess, and no login.
  if (row.passwordUnproven) {
    await notAFailure();
    throw passwordResetRequired();
  }
  // Right, but the account's organization wants it signed in through its IdP (sso/enforcement.ts):
  // no guess, and no login.
  const refused = await unjudged(() => refusalOf(deps, db, site, { userId: row.id }, { kind: 'password' }));
  if (refused !== undefined) {
    await notAFailure();
    throw refused;
  }

  const stored = row.passwordHash!;
  let rehashed: string | undefined;
  if (hasher.needsRehash(stored)) {
    // Best effort: with the hashing queue full, the login goes on and the rehash waits for the next one.
    rehashed = await hasher.hash(request.password, site, signal).catch((error: unknown) => {
      if (error instanceof ApiError && error.status === 503) return undefined;
      throw error;
    });
  }
  // Not a change of the account: the version trigger keeps the ETag, and updatedAt stays. The
  // setting is the transaction's; on the database store it is set in the success's statement.
  const rehashSetting = sql`set_config('user_accounts.rehash', 'on', true)`;
  const rehash = async (tx: Db, settingDone = false) => {
    if (rehashed === undefined) return;
    if (!settingDone) await tx.execute(sql`select ${rehashSetting}`);
    await tx
      .update(users)
      .set({ passwordHash: rehashed })
      .where(and(eq(users.id, row.id), eq(users.passwordHash, stored)));
  };
  // With an enabled second factor the right password is only the first step: audited as the 403
  // it answers, with the ticket for the second (factors/login-ticket.ts).
  const done = (w: Verified) =>
    w.factors === undefined
      ? { userId: row.id, status: 200, outcome: 'password verified' }
      : { userId: row.id, status: 403, outcome: 'second_factor_required' };
  scope.report?.({ userId: row.id });
  // Deleted for good since it was read, rather than disabled: answered as if it had been before.
  let gone = false;
  const verified = await unjudged(() =>
    inWrite(scope, deps, 'verify', done, async (tx, tools): Promise<Verified | undefined> => {
      if (inDatabase) {
        // One statement: the account locked (disabled since it was read: refused, as if it had
        // been disabled before), its counts cleared with the success, atomically, its enabled
        // factors with their generation, for the ticket of the second step, and the audit row,
        // which says 200 or the 403 of the second step by those factors (as `done` does).
        const enabled = sql`exists (select 1 from locked_account where not disabled)`;
        const address = fromAddress === undefined ? undefined : { key: fromAddress, policy: verifyLimits.address };
        const twoStep = sql`cardinality((select types from enabled_factors)) > 0`;
        const [now] = await rows<{ disabled: boolean | null; factors: string[]; generation: string }>(
          tx,
          sql`with locked_account as (
              select ${users.disabled} as disabled from ${users} where ${users.id} = ${row.id} for update
            ), ${successParts(identifier, address, enabled)},
            enabled_factors as (
              select array(select distinct ${userFactors.type} from ${userFactors}
                where ${userFactors.userId} = ${row.id} and ${userFactors.enabledAt} is not null
                order by 1) as types
            ), audited as (${tools.auditIn({
              userId: row.id,
              status: sql`case when ${twoStep} then 403 else 200 end`,
              outcome: sql`case when ${twoStep} then 'second_factor_required' else 'password verified' end`,
              when: enabled,
            })})
            select (select disabled from locked_account) as disabled,
              (select types from enabled_factors) as factors,
              ${generationSql(row.id)} as generation
              ${rehashed === undefined ? sql`` : sql`, ${rehashSetting} as rehash`}`,
        );
        if (now === undefined || now.disabled === null || now.disabled) {
          gone = now?.disabled !== true;
          return undefined;
        }
        await rehash(tx, true);
        if (now.factors.length === 0) return { userId: row.id };
        // After a rehash, read again: the generation covers the password (factors/login-ticket.ts).
        const generation = rehashed === undefined ? now.generation : await generationOf(tx, row.id);
        return { userId: row.id, factors: [...now.factors].sort(), generation };
      }
      // Disabled since it was read: refused, as if it had been disabled before.
      const [now] = await tx.select({ disabled: users.disabled }).from(users).where(eq(users.id, row.id)).for('update');
      if (now === undefined || now.disabled) {
        gone = now === undefined;
        return undefined;
      }
      // Counts in this database are cleared with the success, atomically; others after it commits.
      const inTransaction = lockout.inTransaction?.(tx);
      if (inTransaction !== undefined) await succeeded(inTransaction);
      await rehash(tx);
      const factors = await enabledFactorTypes(tx, row.id);
      if (factors.length === 0) return { userId: row.id };
      return { userId: row.id, factors, generation: await generationOf(tx, row.id) };
    }),
  );
  if (verified === undefined) {
    await notAFailure();
    throw gone ? invalidCredentials('password') : accountDisabled();
  }
  if (lockout.inTransaction === undefined) {
    // The login stands: a count left behind only makes a later lock come sooner.
    await succeeded(lockout).catch((error: unknown) =>
      deps.warn(error, 'could not clear verify failures after a success'),
    );
  }
  deps.rightPassword?.(row.id, rehashed ?? stored, request.password);
  if (verified.factors !== undefined) {
    const ticket = await makeLoginTicket(deps, site, row.id, verified.generation!);
    throw secondFactorRequired('password', ticket, verified.factors);
  }
  return { userId: row.id, passwordHash: rehashed ?? stored };
}

interface Account {
  id: string;
  passwordHash: string | null;
  disabled: boolean;
  passwordUnproven: boolean;
}

interface Verified {
  userId: string;
  /** The types of the account's enabled second factors, when it has any. */
  factors?: string[];
  generation?: string;
}
