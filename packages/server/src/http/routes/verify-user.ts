import type { components } from '@user-accounts/client';
import { and, eq, sql } from 'drizzle-orm';
import { isUuid } from '../../accounts/ids.ts';
import { addressKey } from '../../auth/failed-authentications.ts';
import { users } from '../../db/schema.ts';
import { type LockoutPolicy, type LockoutStore, lockoutKey } from '../../limits/lockout.ts';
import { canonicalAddress } from '../client-address.ts';
import { ApiError, describeError } from '../errors.ts';
import { defineOperation } from '../operation.ts';
import { runWrite } from '../run-write.ts';
import { invalidRequest } from '../validation.ts';
import { inReach, validBody } from './shared.ts';

type VerifyUserResponse = components['schemas']['VerifyUserResponse'];

// One answer for a wrong password and for every account that is not there to be checked.
const invalidCredentials = () =>
  new ApiError(422, 'invalid_credentials', 'The email or id and password do not match an account.');
const accountDisabled = () => new ApiError(403, 'account_disabled', 'This account is disabled.');
/**
 * The lock's 429. Its RateLimit fields name the lock, whose reset is the moment Retry-After names
 * (the RateLimit draft: the two should agree): not the token's budgets, which are not exhausted
 * and would tell a client to come back before the lock ends.
 */
const tooManyAttempts = (seconds: number, name: string, policy: LockoutPolicy) =>
  new ApiError(429, 'too_many_attempts', `Too many failed attempts; try again in ${seconds} s.`, {
    headers: {
      'Retry-After': String(seconds),
      'RateLimit-Policy': `"${name}";q=${policy.limit};w=${policy.windowSeconds}`,
      RateLimit: `"${name}";r=0;t=${seconds}`,
    },
  });

/**
 * The end user's address, when the caller gave one: an IPv4 or IPv6 address in its canonical form
 * (every spelling of an IPv4 address as IPv6 is the IPv4 address, so none escapes its count), or 400.
 */
function endUserAddress(header: string | undefined): string | undefined {
  if (header === undefined) return undefined;
  const value = header.trim();
  // A zone id (`fe80::1%eth0`) names an interface of the caller's machine, not an end user.
  const canonical = value.length > 45 || value.includes('%') ? undefined : canonicalAddress(value);
  if (canonical === undefined) {
    throw invalidRequest('The X-End-User-IP header is not an IP address.', [
      { pointer: 'X-End-User-IP', code: 'invalid_format', message: 'must be an IPv4 or IPv6 address' },
    ]);
  }
  return canonical;
}

export const verifyUser = defineOperation({
  name: 'verifyUser',
  method: 'POST',
  path: '/api/1/user/verify',
  scope: 'verify',
  request: { body: 'VerifyUserRequest' },
  budget: 'hash',
  writes: 'verify',
  parse(c) {
    const body = c.get('body');
    // Said plainly, before the schema's oneOf would report both fields as missing or one as extra.
    if (body !== null && typeof body === 'object' && !Array.isArray(body) && 'email' in body === '_userId' in body) {
      throw invalidRequest('Give exactly one of email or _userId, with the password.', []);
    }
    // The password as sent, before validBody normalizes it: an imported hash may be of that form.
    const sent = body !== null && typeof body === 'object' && 'password' in body ? body.password : undefined;
    const fields = validBody(c, 'VerifyUserRequest');
    return {
      fields,
      sent: typeof sent === 'string' ? sent : fields.password,
      address: endUserAddress(c.req.header('x-end-user-ip')),
    };
  },
  async handle(c, { fields, sent, address }) {
    const { database, hasher, verifyLimits, lockout } = c.get('deps');
    const db = database.db;
    const site = c.get('token').site;
    let match = sql`false`;
    if (fields.email !== undefined) match = sql`lower(${users.email}) = lower(${fields.email})`;
    else if (isUuid(fields._userId!)) match = eq(users.id, fields._userId!);
    // The account first: its failures count once, by its id, whichever identifier named it (10 by
    // email and 10 more by _userId were 20 guesses a window). An identifier no account in reach
    // has counts as given, so an unknown one locks after as many failures, with the same answer.
    const [row] = await db
      .select({ id: users.id, passwordHash: users.passwordHash, disabled: users.disabled })
      .from(users)
      .where(and(match, inReach(c)))
      .limit(1);
    const identifier =
      row !== undefined
        ? lockoutKey(site, 'id', row.id.toLowerCase())
        : fields.email !== undefined
          ? lockoutKey(site, 'email', fields.email.toLowerCase())
          : lockoutKey(site, 'id', fields._userId!.toLowerCase());
    // An address counts by its /64 for IPv6, as the failed-authentication limit does.
    const fromAddress = address === undefined ? undefined : lockoutKey(site, 'address', addressKey(address));
    // Each attempt is counted as a failure before the password is checked (see lockout.ts), and
    // taken back when it was not one.
    const addressWait = fromAddress === undefined ? 0 : await lockout.attempt(fromAddress, verifyLimits.address);
    if (addressWait > 0) throw tooManyAttempts(addressWait, 'failed_verify_address', verifyLimits.address);
    const wait = await lockout.attempt(identifier, verifyLimits.identifier);
    if (wait > 0) {
      if (fromAddress !== undefined) await lockout.undo(fromAddress);
      throw tooManyAttempts(wait, 'failed_verify', verifyLimits.identifier);
    }
    const notAFailure = async () => {
      await lockout.undo(identifier);
      if (fromAddress !== undefined) await lockout.undo(fromAddress);
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
      if (fromAddress !== undefined) await store.undo(fromAddress);
    };

    // No account, or none in reach: the same verification against a stand-in hash, so that the
    // answer takes as long as for a wrong password.
    const right = await unjudged(() =>
      hasher.verify(row?.passwordHash ?? undefined, sent, site, c.get('deadline').signal),
    );
    if (row === undefined || !right) throw invalidCredentials();
    if (row.disabled) {
      await notAFailure();
      throw accountDisabled();
    }

    const stored = row.passwordHash!;
    let rehashed: string | undefined;
    if (hasher.needsRehash(stored)) {
      // Best effort: with the hashing queue full, the login goes on and the rehash waits for the next one.
      rehashed = await hasher.hash(fields.password, site, c.get('deadline').signal).catch((error: unknown) => {
        if (error instanceof ApiError && error.status === 503) return undefined;
        throw error;
      });
    }
    const verified = await unjudged(() =>
      runWrite(c, { userId: row.id, status: 200, outcome: 'password verified' }, async (tx) => {
        // Disabled since it was read: refused, as if it had been disabled before.
        const [now] = await tx
          .select({ disabled: users.disabled })
          .from(users)
          .where(eq(users.id, row.id))
          .for('update');
        if (now === undefined || now.disabled) return undefined;
        // Counts in this database are cleared with the success, atomically; others after it commits.
        const inTransaction = lockout.inTransaction?.(tx);
        if (inTransaction !== undefined) await succeeded(inTransaction);
        if (rehashed !== undefined) {
          // Not a change of the account: the version trigger keeps the ETag, and updatedAt stays.
          await tx.execute(sql`select set_config('user_accounts.rehash', 'on', true)`);
          await tx
            .update(users)
            .set({ passwordHash: rehashed })
            .where(and(eq(users.id, row.id), eq(users.passwordHash, stored)));
        }
        return row.id;
      }),
    );
    if (verified === undefined) {
      await notAFailure();
      throw accountDisabled();
    }
    if (lockout.inTransaction === undefined) {
      // The login stands: a count left behind only makes a later lock come sooner.
      await succeeded(lockout).catch((error: unknown) =>
        c.get('log').warn({ err: describeError(error) }, 'could not clear verify failures after a success'),
      );
    }
    return c.json({ result: { _userId: row.id, status: 'password verified' } } satisfies VerifyUserResponse, 200);
  },
});
