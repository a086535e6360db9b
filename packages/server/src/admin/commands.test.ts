import { describe, expect, it } from 'vitest';
import { parseExpiry } from './commands.ts';

// A fixed "now", so that relative expiries have exact answers.
const NOW = new Date('2026-05-01T12:00:00.000Z');
const HOUR = 3_600_000;

describe('parseExpiry (token create --expires)', () => {
  it.each([
    ['90d', 90 * 24 * HOUR],
    ['12h', 12 * HOUR],
    ['30m', 30 * 60_000],
    ['1m', 60_000],
    ['99999d', 99_999 * 24 * HOUR],
  ])('reads %s as that long from now', (raw, ms) => {
    expect(parseExpiry(raw, NOW).getTime()).toBe(NOW.getTime() + ms);
  });

  it('defaults now to the current time', () => {
    const before = Date.now();
    const expiry = parseExpiry('1h').getTime();
    expect(expiry).toBeGreaterThanOrEqual(before + HOUR);
    expect(expiry).toBeLessThanOrEqual(Date.now() + HOUR);
  });

  it.each([
    ['a date, as midnight UTC', '2027-01-31', '2027-01-31T00:00:00.000Z'],
    ['an ISO 8601 time', '2027-01-31T08:30:00Z', '2027-01-31T08:30:00.000Z'],
    ['an ISO 8601 time with an offset', '2026-05-01T14:30:00+02:00', '2026-05-01T12:30:00.000Z'],
  ])('reads %s', (_, raw, iso) => {
    expect(parseExpiry(raw, NOW).toISOString()).toBe(iso);
  });

  it.each([
    ['a past date', '2020-01-01'],
    ['the present moment', NOW.toISOString()],
    ['a relative zero', '0d'],
    ['zero minutes', '0m'],
  ])('refuses %s: a token must not be born expired', (_, raw) => {
    expect(() => parseExpiry(raw, NOW)).toThrow('--expires must be in the future');
  });

  it.each([
    ['a number without unit', '90'],
    ['weeks', '2w'],
    ['an upper-case unit', '90D'],
    ['seconds', '30s'],
    ['six digits', '100000d'],
    ['a negative amount', '-1d'],
    ['a word', 'tomorrow'],
    ['an empty value', ''],
    ['a trailing space', '1d '],
    ['a day-first date', '31/01/2027'],
    ['a date followed by text', '2027-01-31garbage'],
    ['a month 13', '2027-13-01'],
    ['a day the month does not have', '2027-02-30'],
    ['a date and a time without the T, in no stated zone', '2027-01-31 12:00'],
    ['a time without a zone', '2027-01-31T12:00:00'],
  ])('refuses %s with the expected forms in the message', (_, raw) => {
    expect(() => parseExpiry(raw, NOW)).toThrow(/^--expires must be like 90d, 12h, 30m or a date like 2027-01-31/);
  });
});
