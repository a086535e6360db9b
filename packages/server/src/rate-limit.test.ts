import { describe, expect, it } from 'vitest';
import { parseRateLimit } from './rate-limit.ts';

describe('parseRateLimit', () => {
  it.each([
    ['600/60s', 600, 60],
    ['100/1m', 100, 60],
    ['5000/1h', 5000, 3600],
    ['1/1s', 1, 1],
    ['10/24h', 10, 86_400],
    ['10/1440m', 10, 86_400],
    ['10/86400s', 10, 86_400],
    ['999999999/1s', 999_999_999, 1],
  ])('reads %s', (raw, limit, windowSeconds) => {
    expect(parseRateLimit('all', raw)).toEqual({ name: 'all', limit, windowSeconds });
    expect(parseRateLimit('hash', raw)).toEqual({ name: 'hash', limit, windowSeconds });
  });

  it('reads off as no limit, for the hash budget only', () => {
    expect(parseRateLimit('hash', 'off')).toBeNull();
    // Every answer promises the "all" fields, so that budget cannot be switched off.
    const all = parseRateLimit('all', 'off');
    expect(all).toBeInstanceOf(Error);
    expect((all as Error).message).not.toContain('be off');
  });

  it.each([
    ['a zero limit', '0/60s'],
    ['a zero window', '10/0s'],
    ['a window over 24 h in hours', '10/25h'],
    ['a window over 24 h in minutes', '10/1441m'],
    ['a window over 24 h in seconds', '10/86401s'],
  ])('refuses %s as out of bounds', (_, raw) => {
    const result = parseRateLimit('all', raw);
    expect(result).toBeInstanceOf(Error);
    expect((result as Error).message).toContain('from 1 s to 24 h');
    expect((result as Error).message).toContain(raw);
  });

  it.each([
    ['no window', '600'],
    ['no unit', '600/60'],
    ['days', '600/1d'],
    ['an upper-case unit', '600/60S'],
    ['spaces', ' 600/60s'],
    ['a spelled-out unit', '600/60sec'],
    ['a negative limit', '-1/60s'],
    ['a fractional limit', '1.5/60s'],
    ['a limit of ten digits', '1234567890/1s'],
    ['a window of seven digits', '1/1000000s'],
    ['nothing', ''],
    ['Off in capitals', 'Off'],
  ])('refuses %s as malformed', (_, raw) => {
    const result = parseRateLimit('hash', raw);
    expect(result).toBeInstanceOf(Error);
    expect((result as Error).message).toMatch(/^must look like 600\/60s, 100\/1m or 5000\/1h, or be off/);
    expect((result as Error).message).toContain(`"${raw}"`);
  });
});
