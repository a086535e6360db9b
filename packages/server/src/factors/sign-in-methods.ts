// An account's ways in, apart from its password: its identities and its enabled passkeys. A write
// that would leave an account with no password and none of these (identity/unlink, factor/remove
// of a passkey) is refused with 409 last_sign_in_method: nobody could sign in to it again.
import { and, eq, isNotNull, sql } from 'drizzle-orm';
import { type Db, rows } from '../db/client.ts';
import { userFactors, userIdentities } from '../db/schema.ts';
import { ApiError } from '../errors.ts';

export const lastSignInMethod = (what: 'identity' | 'passkey') =>
  new ApiError(
    'last_sign_in_method',
    what === 'identity'
      ? 'This identity is the account’s only way to sign in; give it a password or another identity first.'
      : 'This passkey is the account’s only way to sign in; give it a password, another passkey or an identity first.',
  );

/**
 * Throws 409 last_sign_in_method when the account (its row locked by the caller, whose
 * transaction has already removed what goes) has no password, no identity and no enabled passkey
 * left: thrown, the transaction rolls back and what was removed stays.
 */
export async function assertSignInMethodLeft(
  tx: Db,
  account: { id: string; passwordHash: string | null },
  removed: 'identity' | 'passkey',
): Promise<void> {
  if (account.passwordHash !== null) return;
  const [left] = await rows<{ identities: number; passkeys: number }>(
    tx,
    sql`select (select count(*)::int from ${userIdentities} where ${eq(userIdentities.userId, account.id)}) as identities,
      (select count(*)::int from ${userFactors} where ${and(
        eq(userFactors.userId, account.id),
        eq(userFactors.type, 'passkey'),
        isNotNull(userFactors.enabledAt),
      )}) as passkeys`,
  );
  if (left!.identities === 0 && left!.passkeys === 0) throw lastSignInMethod(removed);
}
