import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from './env.ts';

describe('AUTH_FAILURE_LIMIT', () => {
  it.each([
    [undefined, { limit: 100, windowSeconds: 10 }],
    ['20/1m', { limit: 20, windowSeconds: 60 }],
    ['off', null],
  ])('%s gives %o', (raw, limit) => {
    expect(loadConfig(raw === undefined ? {} : { AUTH_FAILURE_LIMIT: raw }).authFailureLimit).toEqual(limit);
  });

  it.each(['lots', '0/10s', '10/0s', '100/10d'])('refuses %s, naming the variable', (raw) => {
    expect(() => loadConfig({ AUTH_FAILURE_LIMIT: raw })).toThrow(ConfigError);
    expect(() => loadConfig({ AUTH_FAILURE_LIMIT: raw })).toThrow(/AUTH_FAILURE_LIMIT must look like 100\/10s/);
  });
});

describe('RATE_LIMIT_HASH', () => {
  it('defaults to one server’s hash rate, a minute long', () => {
    const config = loadConfig({});
    expect(config.rateLimits.hash).toEqual({ name: 'hash', limit: 6000, windowSeconds: 60 });
    expect(config.warnings).toEqual([]);
  });

  it.each([
    ['50/1m', { name: 'hash', limit: 50, windowSeconds: 60 }],
    ['off', null],
  ])('%s gives %o', (raw, policy) => {
    expect(loadConfig({ RATE_LIMIT_HASH: raw }).rateLimits.hash).toEqual(policy);
  });

  it('still reads RATE_LIMIT_CREATE, its old name, and says at start that it is deprecated', () => {
    const config = loadConfig({ RATE_LIMIT_CREATE: '300/60s' });
    expect(config.rateLimits.hash).toEqual({ name: 'hash', limit: 300, windowSeconds: 60 });
    expect(config.warnings).toEqual([expect.stringContaining('RATE_LIMIT_CREATE is deprecated')]);
    expect(loadConfig({ RATE_LIMIT_CREATE: 'off' }).rateLimits.hash).toBeNull();
    expect(() => loadConfig({ RATE_LIMIT_CREATE: 'lots' })).toThrow(/RATE_LIMIT_CREATE must look like 600\/60s/);
  });

  it('refuses both names at once, rather than guess which one is meant', () => {
    expect(() => loadConfig({ RATE_LIMIT_HASH: '50/1m', RATE_LIMIT_CREATE: '300/60s' })).toThrow(
      /RATE_LIMIT_CREATE is the old name of RATE_LIMIT_HASH; set only RATE_LIMIT_HASH/,
    );
  });
});
