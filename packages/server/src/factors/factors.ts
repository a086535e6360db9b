// An account's second factors (issue 29): TOTP factors added pending, enabled by a first right
// code, listed, removed; recovery codes given with the first factor an account enables. Functions
// of a write scope, as every write (kernel/unit-of-work.ts); each write locks the account's row
// first, so that two confirms cannot both be "the first" and a remove cannot race a confirm.
import type { AuthenticationResponseJSON } from '@simplewebauthn/server';
import { and, asc, count, eq, isNotNull, isNull, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { recoveryCodes, siteSettings, userFactors, users } from '../db/schema.ts';
import { ApiError, accountDisabled, invalidTicket, tooManyAttempts, userNotFound } from '../errors.ts';
import { isUuid, uuidv7 } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import { type KeyRing, open, SealedSecretError, seal } from '../kernel/secret-box.ts';
import { refusalOf, type SignInWay } from '../kernel/sign-in-gate.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { type LockoutStore, lockoutKey, type VerifyLimits } from '../limits/lockout.ts';
import { type FirstStep, generationOf, readLoginTicket } from './login-ticket.ts';
import { checkAssertion, type RelyingParty, relyingPartyOf } from './passkeys.ts';
import { newRecoveryCodes, recoveryCodeHash } from './recovery-codes.ts';
import { assertSignInMethodLeft } from './sign-in-methods.ts';
import { matchingStep, newTotpSecret, totpUri } from './totp.ts';

/**
 * The counter of an account's wrong second factors, apart from its passwords' (lockoutKey's 'id'):
 * the one its TOTP and recovery codes count toward, and its wrong login and phone codes too
 * (accounts/tickets.ts), so that guesses of every 6-digit secret the account is sent or holds add
 * up, across codes (issue 57, G4: a new code gave 5 more tries without end).
 */
export const secondFactorLockoutKey = (site: string, userId: string) =>
  lockoutKey(site, 'id', `${userId.toLowerCase()}\nsecond_factor`);

export interface FactorDeps extends WriteDeps {
  /** FACTOR_ENCRYPTION_KEY's keys; undefined when not configured (PostgreSQL without the variable). */
  factorKeys: KeyRing | undefined;
}

export const factorNotFound = () =>
  new ApiError('factor_not_found', 'The account has no such factor (or none pending, for confirm).');
export const invalidCode = () => new ApiError('invalid_code', 'The code is not right for this factor now.');
/**
 * A right code of a step already used (by factor/confirm, or an earlier login): still
 * `invalid_code`, so that a site's handling stays one case, with a detail that says what to do
 * (issue 64: "not right" sent people to check a code that was right).
 */
export const codeAlreadyUsed = () =>
  new ApiError(
    'invalid_code',
    'This code was already used (each code signs in once); wait for the authenticator app to show the next one, within 30 seconds.',
  );

/**
 * The keys, or a 503 saying what the operator must set: a secret is never stored in the clear.
 * No Retry-After: only a restart with the key changes this (the server warned of it at start).
 */
export function keysOf(deps: FactorDeps): KeyRing {
  if (deps.factorKeys === undefined)
    throw new ApiError(
      'factors_not_configured',
      'Second factors need FACTOR_ENCRYPTION_KEY, which this server was started without; its operator must set it and restart.',
    );
  return deps.factorKeys;
}

/**
 * A factor's secret, opened; a secret the configured keys cannot open (its key dropped from
 * FACTOR_ENCRYPTION_KEY, or another key put in its place) is the operator's to mend: 503 saying
 * so, never a 500, and never taken for a wrong code.
 */
function openSecret(keys: KeyRing, factor: { id: string; secret: string | null }): string {
  // A TOTP factor always has one (the table's CHECK); a passkey has none and is never opened.
  if (factor.secret === null) throw new Error(`factor ${factor.id} has no secret`);
  try {
    return open(keys, factor.secret, factor.id);
  } catch (error) {
    // As a missing key, no retry mends it (no Retry-After): only a restart with the key restored.
    if (error instanceof SealedSecretError)
      throw new ApiError(
        'factors_not_configured',
        `A second-factor secret cannot be opened: ${error.message}; its operator must restore the key.`,
        { cause: error },
      );
    throw error;
  }
}

/** The seconds since the epoch, as TOTP counts them. */
export const nowSeconds = () => Date.now() / 1000;

/** The account's row, locked for the rest of the transaction; undefined when not in reach. */
async function lockAccount(tx: Db, site: string, userId: string) {
  const [row] = await tx
    .select({ id: users.id, email: users.email, disabled: users.disabled, passwordHash: users.passwordHash })
    .from(users)
    .where(and(eq(users.id, userId), inReachOf(site)))
    .for('update');
  return row;
}

export interface NewTotp {
  factorId: string;
  secret: string;
  uri: string;
}

/**
 * A new TOTP factor, pending until confirmed. An account has at most one pending TOTP factor: a
 * new one replaces it (an abandoned setup leaves nothing behind).
 */
export async function addTotp(
  scope: WriteScope,
  deps: FactorDeps,
  request: { userId: string; label?: string | undefined },
): Promise<NewTotp> {
  const keys = keysOf(deps);
  if (!isUuid(request.userId)) throw userNotFound();
  const factorId = uuidv7();
  const secret = newTotpSecret();
  const added = await inWrite(
    scope,
    deps,
    'factor_add',
    // Pending: no factor yet, so no user.factor_added (that comes with confirm).
    { userId: request.userId, status: 201, outcome: 'factor pending', emits: false },
    async (tx) => {
      const account = await lockAccount(tx, scope.site, request.userId);
      if (account === undefined) return undefined;
      await tx
        .delete(userFactors)
        .where(and(eq(userFactors.userId, account.id), eq(userFactors.type, 'totp'), isNull(userFactors.enabledAt)));
      await tx.insert(userFactors).values({
        id: factorId,
        userId: account.id,
        type: 'totp',
        label: request.label ?? null,
        secret: seal(keys, secret, factorId),
      });
      // The issuer an authenticator app shows: the site's display name, else its name.
      const [settings] = await tx
        .select({ displayName: siteSettings.displayName })
        .from(siteSettings)
        .where(eq(siteSettings.site, scope.site))
        .limit(1);
      return { factorId, secret, uri: totpUri(secret, settings?.displayName ?? scope.site, account.email) };
    },
  );
  if (added === undefined) throw userNotFound();
  return added;
}

/**
 * Enables a pending factor with a right code (its step counts as used), and gives the recovery
 * codes when it is the account's first enabled factor. 404 factor_not_found, 422 invalid_code.
 */
export async function confirmFactor(
  scope: WriteScope,
  deps: FactorDeps,
  request: { userId: string; factorId: string; code: string },
): Promise<{ recoveryCodes?: string[] }> {
  const keys = keysOf(deps);
  if (!isUuid(request.userId)) throw userNotFound();
  if (!isUuid(request.factorId)) throw factorNotFound();
  let refusal: ApiError | undefined;
  const confirmed = await inWrite(
    scope,
    deps,
    'factor_confirm',
    {
      userId: request.userId,
      status: 200,
      outcome: 'factor enabled',
      factor: { factorId: request.factorId, type: 'totp' },
    },
    async (tx) => {
      const account = await lockAccount(tx, scope.site, request.userId);
      if (account === undefined) {
        refusal = userNotFound();
        return undefined;
      }
      const [factor] = await tx
        .select()
        .from(userFactors)
        .where(
          and(
            eq(userFactors.id, request.factorId),
            eq(userFactors.userId, account.id),
            eq(userFactors.type, 'totp'),
            isNull(userFactors.enabledAt),
          ),
        );
      if (factor === undefined) {
        refusal = factorNotFound();
        return undefined;
      }
      const step = matchingStep(openSecret(keys, factor), request.code, nowSeconds());
      if (step === undefined) {
        refusal = invalidCode();
        return undefined;
      }
      // Codes come with the first factor enabled: the account has none yet, used or not (removing
      // its last factor removes them). An account whose factor came by import has a factor and no
      // codes: its first confirmed factor brings them (see the spec's import).
      const [codesBefore] = await tx
        .select({ n: count() })
        .from(recoveryCodes)
        .where(eq(recoveryCodes.userId, account.id));
      await tx
        .update(userFactors)
        .set({ enabledAt: sql`now()`, lastStep: step, lastUsedAt: sql`now()` })
        .where(eq(userFactors.id, factor.id));
      if (codesBefore!.n > 0) return {};
      const codes = newRecoveryCodes();
      await tx.delete(recoveryCodes).where(eq(recoveryCodes.userId, account.id));
      await tx
        .insert(recoveryCodes)
        .values(codes.map((code) => ({ userId: account.id, codeHash: recoveryCodeHash(code) })));
      return { recoveryCodes: codes };
    },
  );
  if (confirmed === undefined) throw refusal ?? userNotFound();
  return confirmed;
}

export interface FactorListing {
  factors: {
    factorId: string;
    type: 'totp' | 'passkey';
    label: string | null;
    createdAt: string;
    lastUsedAt: string | null;
  }[];
  recoveryCodesLeft: number;
}

/** The account's enabled factors (a pending one is not yet a factor) and its unused recovery codes. */
export async function listFactors(db: Db, site: string, userId: string): Promise<FactorListing> {
  if (!isUuid(userId)) throw userNotFound();
  const [account] = await db
    .select({ id: users.id })
    .from(users)
    .where(and(eq(users.id, userId), inReachOf(site)));
  if (account === undefined) throw userNotFound();
  const rows = await db
    .select()
    .from(userFactors)
    .where(and(eq(userFactors.userId, userId), isNotNull(userFactors.enabledAt)))
    .orderBy(asc(userFactors.id));
  const [left] = await db
    .select({ n: count() })
    .from(recoveryCodes)
    .where(and(eq(recoveryCodes.userId, userId), isNull(recoveryCodes.usedAt)));
  return {
    factors: rows.map((row) => ({
      factorId: row.id,
      type: row.type as 'totp' | 'passkey',
      label: row.label,
      createdAt: row.createdAt.toISOString(),
      lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
    })),
    recoveryCodesLeft: left!.n,
  };
}

/**
 * Removes a factor, pending or enabled; with the last enabled one go the recovery codes. 409
 * last_sign_in_method for the last passkey of an account with no password and no identity.
 */
export async function removeFactor(
  scope: WriteScope,
  deps: FactorDeps,
  request: { userId: string; factorId: string },
): Promise<void> {
  if (!isUuid(request.userId)) throw userNotFound();
  if (!isUuid(request.factorId)) throw factorNotFound();
  scope.report?.({ userId: request.userId });
  let refusal: ApiError | undefined;
  const removed = await inWrite(
    scope,
    deps,
    'factor_remove',
    (removed: { type: string }) => ({
      userId: request.userId,
      status: 200,
      outcome: 'factor removed',
      factor: { factorId: request.factorId, type: removed.type },
    }),
    async (tx) => {
      const account = await lockAccount(tx, scope.site, request.userId);
      if (account === undefined) {
        refusal = userNotFound();
        return undefined;
      }
      const [gone] = await tx
        .delete(userFactors)
        .where(and(eq(userFactors.id, request.factorId), eq(userFactors.userId, account.id)))
        .returning({ type: userFactors.type });
      if (gone === undefined) {
        refusal = factorNotFound();
        return undefined;
      }
      // An account's last passkey, with no password and no identity, is its last way in: thrown,
      // the transaction rolls back and the passkey stays (as identity/unlink's last identity).
      if (gone.type === 'passkey') await assertSignInMethodLeft(tx, account, 'passkey');
      const [left] = await tx
        .select({ n: count() })
        .from(userFactors)
        .where(and(eq(userFactors.userId, account.id), isNotNull(userFactors.enabledAt)));
      if (left!.n === 0) await tx.delete(recoveryCodes).where(eq(recoveryCodes.userId, account.id));
      return gone;
    },
  );
  if (removed === undefined) throw refusal ?? factorNotFound();
}

/** The kinds of the account's enabled factors, for the login's 403 (`["totp"]`). */
export async function enabledFactorTypes(db: Db, userId: string): Promise<string[]> {
  const rows = await db
    .selectDistinct({ type: userFactors.type })
    .from(userFactors)
    .where(and(eq(userFactors.userId, userId), isNotNull(userFactors.enabledAt)));
  return rows.map((r) => r.type).sort();
}

/** The sign-in gate's way for a ticket's first step (an identity's without its provider: none passes). */
function firstStepWay(read: { first: FirstStep; provider?: string }): SignInWay {
  if (read.first === 'otp') return { kind: 'login_ticket' };
  if (read.first === 'fed') return { kind: 'identity', provider: read.provider ?? '' };
  return { kind: 'password' };
}

export interface SecondFactorDeps extends FactorDeps {
  verifyLimits: VerifyLimits;
  lockout: LockoutStore;
}

/**
 * The login's second step: the ticket of `verify`'s 403 and a TOTP code of an enabled factor (each
 * time step once: a replay is 422 invalid_code) or an unused recovery code (used up here). Wrong
 * codes are counted per account as password failures are (VERIFY_LIMIT), before the code is
 * looked at; a success clears them and spends the ticket. 422 invalid_ticket for a ticket that is
 * not ours, of another site, expired or spent.
 */
export async function verifySecondFactor(
  scope: WriteScope,
  deps: SecondFactorDeps,
  request: {
    ticket: string;
    code?: string | undefined;
    recoveryCode?: string | undefined;
    passkey?: AuthenticationResponseJSON | undefined;
  },
): Promise<{ userId: string; first: FirstStep; passwordHash: string | null }> {
  const read = await readLoginTicket(deps, scope.site, request.ticket);
  if (read === undefined) throw invalidTicket('second factor');
  const { userId } = read;
  scope.report?.({ userId });
  const keys = request.code === undefined ? undefined : keysOf(deps);
  const rp: RelyingParty | undefined =
    request.passkey === undefined ? undefined : await relyingPartyOf(deps.db, scope.site);
  const key = secondFactorLockoutKey(scope.site, userId);
  const policy = deps.verifyLimits.identifier;
  const wait = await deps.lockout.attempt(key, policy);
  if (wait > 0) throw tooManyAttempts(wait, { ...policy, name: 'failed_second_factor' });
  let refusal: ApiError = invalidCode();
  let judged = false;
  // The password as the ticket stands on it (its generation covers it), read under the lock.
  let passwordHash: string | null = null;
  try {
    const verified = await inWrite(
      scope,
      deps,
      'factor_verify',
      { userId, status: 200, outcome: 'second factor verified' },
      async (tx) => {
        const account = await lockAccount(tx, scope.site, userId);
        // Spent (a success since), or the account gone: the ticket is no more.
        if (account === undefined || (await generationOf(tx, userId)) !== read.generation) {
          refusal = invalidTicket('second factor');
          return undefined;
        }
        // Disabled since its first step (issue 43's review): refused as verify refuses it, before
        // any code is judged, so that a ticket never completes the login of a disabled account.
        if (account.disabled) {
          refusal = accountDisabled();
          return undefined;
        }
        // Single sign-on enforced since its first step (issue 61, point 5): the gate asks again,
        // of the way the first step went, so that a ticket begun with a password (or another
        // provider) never completes once the account's organization wants its own IdP.
        const gated = await refusalOf(deps, tx, scope.site, { userId }, firstStepWay(read));
        if (gated !== undefined) {
          refusal = gated;
          return undefined;
        }
        judged = true;
        passwordHash = account.passwordHash;
        if (request.passkey !== undefined) {
          // A passkey of this account: its challenge taken, its counter moved on (so the ticket is spent).
          const checked = await checkAssertion(tx, scope.site, rp!, request.passkey, userId);
          return checked === undefined ? undefined : userId;
        }
        if (request.recoveryCode !== undefined) {
          const [used] = await tx
            .update(recoveryCodes)
            .set({ usedAt: sql`now()` })
            .where(
              and(
                eq(recoveryCodes.userId, userId),
                eq(recoveryCodes.codeHash, recoveryCodeHash(request.recoveryCode)),
                isNull(recoveryCodes.usedAt),
              ),
            )
            .returning({ userId: recoveryCodes.userId });
          return used === undefined ? undefined : userId;
        }
        const factors = await tx
          .select({ id: userFactors.id, secret: userFactors.secret })
          .from(userFactors)
          .where(and(eq(userFactors.userId, userId), eq(userFactors.type, 'totp'), isNotNull(userFactors.enabledAt)));
        const now = nowSeconds();
        for (const factor of factors) {
          const step = matchingStep(openSecret(keys!, factor), request.code!, now);
          if (step === undefined) continue;
          // Each step once: a code already accepted (or an older one) is a replay.
          const [accepted] = await tx
            .update(userFactors)
            .set({ lastStep: step, lastUsedAt: sql`now()` })
            .where(
              and(
                eq(userFactors.id, factor.id),
                sql`(${userFactors.lastStep} is null or ${userFactors.lastStep} < ${step})`,
              ),
            )
            .returning({ id: userFactors.id });
          if (accepted !== undefined) return userId;
          refusal = codeAlreadyUsed();
        }
        return undefined;
      },
    );
    if (verified === undefined) throw refusal;
    await deps.lockout.clear(key).catch(() => {});
    return { userId: verified, first: read.first, passwordHash };
  } catch (error) {
    // Only a code that was judged wrong counts: a spent ticket or a failure of ours is no guess.
    if (!judged || !(error instanceof ApiError && error.code === 'invalid_code'))
      await deps.lockout.undo(key, policy).catch(() => {});
    throw error;
  }
}
