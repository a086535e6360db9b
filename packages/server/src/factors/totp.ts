// TOTP (RFC 6238) as every authenticator app reads it: SHA-1, 6 digits, 30-second steps, a
// 160-bit secret in base32. otplib computes and compares the codes (in constant time); which
// steps were already used is the database's to say (factors.ts), so that two requests with one
// code cannot both pass.
import { generateSecret, generateSync, generateURI, verifySync } from 'otplib';

export const TOTP = { algorithm: 'sha1', digits: 6, period: 30 } as const;

/** A new secret, base32 (20 random bytes, RFC 4226's recommended length). */
export const newTotpSecret = (): string => generateSecret({ length: 20 });

/** The otpauth:// URI an authenticator app scans: the issuer is the site. */
export function totpUri(secret: string, issuer: string, label: string): string {
  return generateURI({ issuer, label, secret, ...TOTP });
}

/** The code for `secret` at `epochSeconds` (tests, and the benchmark's client). */
export function totpCode(secret: string, epochSeconds: number, digits: 6 | 8 = TOTP.digits): string {
  return generateSync({ secret, epoch: epochSeconds, algorithm: TOTP.algorithm, digits, period: TOTP.period });
}

/**
 * The time step `code` matches at `epochSeconds`, within one step either way (a phone's clock a
 * little off, a code typed as it changes), or undefined.
 */
export function matchingStep(secret: string, code: string, epochSeconds: number): number | undefined {
  if (!/^\d{6}$/.test(code)) return undefined;
  const result = verifySync({ secret, token: code, epoch: epochSeconds, epochTolerance: TOTP.period, ...TOTP });
  return result.valid && 'timeStep' in result ? result.timeStep : undefined;
}
