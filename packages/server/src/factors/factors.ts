// An account's second factors (issue 29): TOTP factors added pending, enabled by a first right
// code, listed, removed; recovery codes given with the first factor an account enables. Functions
// of a write scope, as every write (accounts/unit-of-work.ts); each write locks the account's row
// first, so that two confirms cannot both be "the first" and a remove cannot race a confirm.
import { createHash, randomBytes } from 'node:crypto';
import { and, asc, count, eq, isNotNull, isNull, sql } from 'drizzle-orm';
import { isUuid, uuidv7 } from '../accounts/ids.ts';
import { inReachOf } from '../accounts/in-reach.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../accounts/unit-of-work.ts';
import type { Db } from '../db/client.ts';
import { recoveryCodes, userFactors, users } from '../db/schema.ts';
import { ApiError, serviceUnavailable, userNotFound } from '../http/errors.ts';
import { type KeyRing, open, seal } from './secret-box.ts';
import { matchingStep, newTotpSecret, totpUri } from './totp.ts';

export const RECOVERY_CODES = 10;

export interface FactorDeps extends WriteDeps {
  /** FACTOR_ENCRYPTION_KEY's keys; undefined when not configured (PostgreSQL without the variable). */
  factorKeys: KeyRing | undefined;
}

export const factorNotFound = () =>
  new ApiError(404, 'factor_not_found', 'The account has no such factor (or none pending, for confirm).');
export const invalidCode = () => new ApiError(422, 'invalid_code', 'The code is not right for this factor now.');

/** The keys, or a 503 saying what the operator must set: a secret is never stored in the clear. */
export function keysOf(deps: FactorDeps): KeyRing {
  if (deps.factorKeys === undefined)
    throw serviceUnavailable(
      'Second factors need FACTOR_ENCRYPTION_KEY, which this server was started without; its operator must set it.',
    );
  return deps.factorKeys;
}

/** The seconds since the epoch, as TOTP counts them. */
export const nowSeconds = () => Date.now() / 1000;

/** The account's row, locked for the rest of the transaction; undefined when not in reach. */
async function lockAccount(tx: Db, site: string, userId: string) {
  const [row] = await tx
    .select({ id: users.id, email: users.email })
    .from(users)
    .where(and(eq(users.id, userId), inReachOf(site)))
    .for('update');
  return row;
}

/** A recovery code's stored form: 120 random bits need no slow hash (NIST SP 800-63B 5.1.2.2 asks one below 112). */
export const recoveryCodeHash = (code: string) =>
  createHash('sha256').update(code.toUpperCase().replace(/[\s-]/g, '')).digest('base64url');

/** Ten codes of 24 base32 characters (120 bits), in groups of four for reading aloud. */
function newRecoveryCodes(): string[] {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  return Array.from({ length: RECOVERY_CODES }, () => {
    const bytes = randomBytes(24);
    const chars = [...bytes].map((b) => alphabet[b & 31]).join('');
    return chars.match(/.{4}/g)!.join('-');
  });
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
    { userId: request.userId, status: 201, outcome: 'factor pending' },
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
      return { factorId, secret, uri: totpUri(secret, scope.site, account.email) };
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
    { userId: request.userId, status: 200, outcome: 'factor enabled' },
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
          and(eq(userFactors.id, request.factorId), eq(userFactors.userId, account.id), isNull(userFactors.enabledAt)),
        );
      if (factor === undefined) {
        refusal = factorNotFound();
        return undefined;
      }
      const step = matchingStep(open(keys, factor.secret, factor.id), request.code, nowSeconds());
      if (step === undefined) {
        refusal = invalidCode();
        return undefined;
      }
      const [enabledBefore] = await tx
        .select({ n: count() })
        .from(userFactors)
        .where(and(eq(userFactors.userId, account.id), isNotNull(userFactors.enabledAt)));
      await tx
        .update(userFactors)
        .set({ enabledAt: sql`now()`, lastStep: step, lastUsedAt: sql`now()` })
        .where(eq(userFactors.id, factor.id));
      if (enabledBefore!.n > 0) return {};
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
  factors: { factorId: string; type: 'totp'; label: string | null; createdAt: string; lastUsedAt: string | null }[];
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
      type: row.type as 'totp',
      label: row.label,
      createdAt: row.createdAt.toISOString(),
      lastUsedAt: row.lastUsedAt?.toISOString() ?? null,
    })),
    recoveryCodesLeft: left!.n,
  };
}

/** Removes a factor, pending or enabled; with the last enabled one go the recovery codes. */
export async function removeFactor(
  scope: WriteScope,
  deps: FactorDeps,
  request: { userId: string; factorId: string },
): Promise<void> {
  if (!isUuid(request.userId)) throw userNotFound();
  if (!isUuid(request.factorId)) throw factorNotFound();
  let refusal: ApiError | undefined;
  const removed = await inWrite(
    scope,
    deps,
    'factor_remove',
    { userId: request.userId, status: 200, outcome: 'factor removed' },
    async (tx) => {
      const account = await lockAccount(tx, scope.site, request.userId);
      if (account === undefined) {
        refusal = userNotFound();
        return undefined;
      }
      const [gone] = await tx
        .delete(userFactors)
        .where(and(eq(userFactors.id, request.factorId), eq(userFactors.userId, account.id)))
        .returning({ id: userFactors.id });
      if (gone === undefined) {
        refusal = factorNotFound();
        return undefined;
      }
      const [left] = await tx
        .select({ n: count() })
        .from(userFactors)
        .where(and(eq(userFactors.userId, account.id), isNotNull(userFactors.enabledAt)));
      if (left!.n === 0) await tx.delete(recoveryCodes).where(eq(recoveryCodes.userId, account.id));
      return true;
    },
  );
  if (removed === undefined) throw refusal ?? factorNotFound();
}
