import { describe, expect, it } from 'vitest';
import { matchingStep, newTotpSecret, totpCode, totpUri } from './totp.ts';

// RFC 6238 Appendix B, SHA-1: the secret is the ASCII "12345678901234567890".
const RFC_SECRET = 'GEZDGNBVGY3TQOJQGEZDGNBVGY3TQOJQ';
const RFC_VECTORS: [number, string][] = [
  [59, '94287082'],
  [1111111109, '07081804'],
  [1111111111, '14050471'],
  [1234567890, '89005924'],
  [2000000000, '69279037'],
  [20000000000, '65353130'],
];

describe('TOTP', () => {
  it.each(RFC_VECTORS)("gives RFC 6238 Appendix B's SHA-1 code at T=%i", (t, code) => {
    expect(totpCode(RFC_SECRET, t, 8)).toBe(code);
    // Six digits are the last six of the eight (the same truncation, modulo 10^6).
    expect(totpCode(RFC_SECRET, t)).toBe(code.slice(2));
  });

  it('accepts a code within one 30 s step either way, and says which step it matched', () => {
    const t = 1111111111;
    const step = Math.floor(t / 30);
    expect(matchingStep(RFC_SECRET, '050471', t)).toBe(step);
    expect(matchingStep(RFC_SECRET, '050471', t + 30)).toBe(step);
    expect(matchingStep(RFC_SECRET, '050471', t - 30)).toBe(step);
    expect(matchingStep(RFC_SECRET, '050471', t + 60)).toBeUndefined();
    expect(matchingStep(RFC_SECRET, '050471', t - 60)).toBeUndefined();
  });

  it('refuses what is not six digits', () => {
    expect(matchingStep(RFC_SECRET, '14050471', 1111111111)).toBeUndefined();
    expect(matchingStep(RFC_SECRET, ' 50471', 1111111111)).toBeUndefined();
    expect(matchingStep(RFC_SECRET, '', 1111111111)).toBeUndefined();
  });

  it('makes 160-bit base32 secrets and an otpauth URI naming the site as issuer', () => {
    const secret = newTotpSecret();
    expect(secret).toMatch(/^[A-Z2-7]{32}$/);
    const uri = new URL(totpUri(secret, 'shop', 'ada@example.com'));
    expect(uri.protocol).toBe('otpauth:');
    expect(uri.host).toBe('totp');
    expect(uri.searchParams.get('secret')).toBe(secret);
    expect(uri.searchParams.get('issuer')).toBe('shop');
    expect(decodeURIComponent(uri.pathname)).toBe('/shop:ada@example.com');
  });
});
