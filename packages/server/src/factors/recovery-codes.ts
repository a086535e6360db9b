// Recovery codes: what the first enabled second factor (TOTP or passkey) gives its owner, each
// usable once. Their own module so that factors.ts and passkeys.ts both use them without
// importing each other.
import { createHash, randomBytes } from 'node:crypto';

export const RECOVERY_CODES = 10;

/** A recovery code's stored form: 120 random bits need no slow hash (NIST SP 800-63B 5.1.2.2 asks one below 112). */
export const recoveryCodeHash = (code: string) =>
  createHash('sha256').update(code.toUpperCase().replace(/[\s-]/g, '')).digest('base64url');

/** Ten codes of 24 base32 characters (120 bits), in groups of four for reading aloud. */
export function newRecoveryCodes(): string[] {
  const alphabet = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';
  return Array.from({ length: RECOVERY_CODES }, () => {
    const bytes = randomBytes(24);
    const chars = [...bytes].map((b) => alphabet[b & 31]).join('');
    return chars.match(/.{4}/g)!.join('-');
  });
}
