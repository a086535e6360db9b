// A new password (create, update, a reset's redeem): the rules that need the account, the breach
// corpus, then the hash in the site's turn. Outside HTTP: what the caller counts a hash against
// (the HTTP token's "hash" budget) comes in as `beforeHash`.
import { ApiError } from '../errors.ts';
import type { WriteScope } from '../kernel/unit-of-work.ts';
import type { PasswordHasher } from '../passwords/hasher.ts';
import {
  type BreachedPasswords,
  breachCheckUnavailable,
  breachedPassword,
  judgeNewPassword,
} from '../passwords/screening.ts';

/** What hashing a new password needs beside the write's own deps. */
export interface NewPasswordDeps {
  hasher: PasswordHasher;
  /** Breached-password screening (BREACHED_PASSWORDS_URL); undefined: off. */
  breachedPasswords?: BreachedPasswords | undefined;
  /**
   * Called once a hash is certain, just before it is computed: the caller's budget of hashes
   * (HTTP: the token's, 429 over it). Nothing is counted for a request refused before.
   */
  beforeHash?: (() => Promise<void>) | undefined;
  /** Told that the corpus did not answer in time and the password was accepted unchecked. */
  warn?: ((message: string) => void) | undefined;
}

export function weakPassword(reason: string): ApiError {
  return new ApiError('weak_password', "The password is too common or too close to the account's details.", {
    errors: [{ pointer: '/password', code: 'weak_password', message: reason }],
  });
}

/**
 * A new password against the breach corpus (nothing when off): 400 breached, or 503
 * breach_check_unavailable when the corpus did not answer and the operator chose closed; with
 * open, the password goes on unchecked, and `warn` says so.
 */
export async function refuseBreached(scope: WriteScope, deps: NewPasswordDeps, password: string): Promise<void> {
  const verdict = await judgeNewPassword(deps.breachedPasswords, password, scope.site, scope.deadline?.signal);
  if (verdict === 'breached') throw breachedPassword();
  if (verdict === 'unavailable') throw breachCheckUnavailable();
  if (verdict === 'unchecked') deps.warn?.('breach corpus did not answer in time: password accepted unchecked');
}

/**
 * The stored hash of a new password: screened, counted (beforeHash), then computed in the
 * scope's site's turn (503 when the site may not wait).
 */
export async function hashNewPassword(scope: WriteScope, deps: NewPasswordDeps, password: string): Promise<string> {
  await refuseBreached(scope, deps, password);
  await deps.beforeHash?.();
  return deps.hasher.hash(password, scope.site, scope.deadline?.signal);
}
