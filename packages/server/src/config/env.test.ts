import { describe, expect, it } from 'vitest';
import { TRUST_NOBODY } from '../auth/client-address.ts';
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

describe('TRUSTED_PROXIES', () => {
  it('trusts nobody when unset (auth/client-address.test.ts: what trusting nobody means)', () => {
    expect(loadConfig({}).trustedProxies).toBe(TRUST_NOBODY);
  });

  it.each(['127.0.0.1/33', '10.0.0.0/x', '2001:db8::/129', 'localhost', '10.0.0.0/8/8', '127.1'])(
    'refuses to start with %j, naming the variable',
    (entry) => {
      expect(() => loadConfig({ TRUSTED_PROXIES: `127.0.0.1,${entry}` })).toThrow(/TRUSTED_PROXIES entries must be/);
    },
  );
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

describe('true/false switches', () => {
  it('WEBHOOK_ALLOW_PRIVATE is true or false, and refuses anything else', () => {
    expect(loadConfig({ WEBHOOK_ALLOW_PRIVATE: 'true' })).toMatchObject({ webhookAllowPrivate: true });
    expect(loadConfig({ WEBHOOK_ALLOW_PRIVATE: 'false' })).toMatchObject({ webhookAllowPrivate: false });
    for (const bad of ['yes', '1', 'TRUE']) {
      expect(() => loadConfig({ WEBHOOK_ALLOW_PRIVATE: bad })).toThrow(/WEBHOOK_ALLOW_PRIVATE must be true or false/);
    }
  });

  it('has no switch that turns change events off: OUTBOX_DISABLED is not configuration', () => {
    const config = loadConfig({ OUTBOX_DISABLED: 'true' });
    expect(config).toEqual(loadConfig({}));
    expect(config.warnings).toEqual([]);
  });

  it('SHUTDOWN_DRAIN_MS is 0 unless told, at most a minute', () => {
    expect(loadConfig({}).shutdownDrainMs).toBe(0);
    expect(loadConfig({ SHUTDOWN_DRAIN_MS: '3000' }).shutdownDrainMs).toBe(3000);
    expect(() => loadConfig({ SHUTDOWN_DRAIN_MS: '60001' })).toThrow(
      /SHUTDOWN_DRAIN_MS must be a whole number from 0 to 60000/,
    );
  });
});

describe('DATABASE_POOL_SIZE', () => {
  it('is 10 connections unless told, a whole number from 1 to 1000', () => {
    expect(loadConfig({}).databasePoolSize).toBe(10);
    expect(loadConfig({ DATABASE_POOL_SIZE: '4' }).databasePoolSize).toBe(4);
    for (const bad of ['0', '1001', 'ten', '2.5']) {
      expect(() => loadConfig({ DATABASE_POOL_SIZE: bad })).toThrow(/DATABASE_POOL_SIZE must be a whole number/);
    }
  });
});

describe('DATABASE_LISTEN_URL', () => {
  it('is a postgres:// URL beside DATABASE_URL, and nothing without it', () => {
    const both = { DATABASE_URL: 'postgres://a@db:6432/x', DATABASE_LISTEN_URL: 'postgres://a@db:5432/x' };
    expect(loadConfig(both).databaseListenUrl).toBe('postgres://a@db:5432/x');
    expect(loadConfig({ DATABASE_URL: both.DATABASE_URL }).databaseListenUrl).toBeUndefined();
    expect(() => loadConfig({ ...both, DATABASE_LISTEN_URL: 'mysql://x' })).toThrow(
      /DATABASE_LISTEN_URL must be a postgres/,
    );
    expect(() => loadConfig({ DATABASE_LISTEN_URL: both.DATABASE_LISTEN_URL })).toThrow(
      /DATABASE_LISTEN_URL needs DATABASE_URL/,
    );
  });
});

describe('DEPLOYMENT', () => {
  // deploy/user-accounts.env sets it: a replica whose DATABASE_URL was left out ran on an
  // embedded database of its own (issue 32), its accounts unseen by the others.
  it('production refuses the embedded database, saying what it needs', () => {
    expect(() => loadConfig({ DEPLOYMENT: 'production' })).toThrow(
      /DEPLOYMENT is production, which needs DATABASE_URL \(postgres:\/\/…\)/,
    );
    expect(loadConfig({ DEPLOYMENT: 'production', DATABASE_URL: 'postgres://a@db/x' }).deployment).toBe('production');
  });

  it('production refuses the test profile of password hashes, saying why and what to do', () => {
    const production = { DEPLOYMENT: 'production', DATABASE_URL: 'postgres://a@db/x' };
    expect(() => loadConfig({ ...production, PASSWORD_HASH_PROFILE: 'test' })).toThrow(
      /PASSWORD_HASH_PROFILE is test, which DEPLOYMENT=production refuses: its hashes \(argon2id:m=1024,t=1,p=1\) are far below OWASP's minimum; unset it/,
    );
    expect(loadConfig({ ...production, PASSWORD_HASH_PROFILE: 'owasp' }).passwordHash).toEqual({
      memoryCost: 19456,
      timeCost: 2,
      parallelism: 1,
    });
  });

  it('is development unless told, where the embedded database is fine', () => {
    expect(loadConfig({}).deployment).toBe('development');
    expect(loadConfig({}).databaseUrl).toBeUndefined();
    expect(() => loadConfig({ DEPLOYMENT: 'prod' })).toThrow(/DEPLOYMENT must be production or development/);
  });
});

describe('WEBHOOK_ENDPOINT_CONCURRENCY and AUDIT_RETENTION', () => {
  it('bounds deliveries in flight per endpoint at 4 unless told, a whole number from 1 to 256', () => {
    expect(loadConfig({}).webhookEndpointConcurrency).toBe(4);
    expect(loadConfig({ WEBHOOK_ENDPOINT_CONCURRENCY: '1' }).webhookEndpointConcurrency).toBe(1);
    for (const bad of ['0', '257', 'four']) {
      expect(() => loadConfig({ WEBHOOK_ENDPOINT_CONCURRENCY: bad })).toThrow(
        /WEBHOOK_ENDPOINT_CONCURRENCY must be a whole number from 1 to 256/,
      );
    }
  });

  it('gives a webhook endpoint 10 s to answer unless told, a whole number of seconds from 1 to 30', () => {
    expect(loadConfig({}).webhookTimeoutMs).toBe(10_000);
    expect(loadConfig({ WEBHOOK_TIMEOUT: '2' }).webhookTimeoutMs).toBe(2_000);
    for (const bad of ['0', '31', '2.5', '10s']) {
      expect(() => loadConfig({ WEBHOOK_TIMEOUT: bad })).toThrow(/WEBHOOK_TIMEOUT must be a whole number from 1 to 30/);
    }
  });

  it('keeps audit rows 365 days unless told: Nd or Nh from a day to 100 years, or off for ever', () => {
    expect(loadConfig({}).auditRetentionMs).toBe(365 * 86_400_000);
    expect(loadConfig({ AUDIT_RETENTION: '24h' }).auditRetentionMs).toBe(86_400_000);
    expect(loadConfig({ AUDIT_RETENTION: '2555d' }).auditRetentionMs).toBe(2555 * 86_400_000);
    expect(loadConfig({ AUDIT_RETENTION: 'off' }).auditRetentionMs).toBeNull();
    for (const bad of ['23h', '0d', '36501d', 'year', '365']) {
      expect(() => loadConfig({ AUDIT_RETENTION: bad })).toThrow(/AUDIT_RETENTION must be/);
    }
  });
});

describe('PASSWORD_HASH_PROFILE', () => {
  it("is OWASP's baseline unless told; PASSWORD_HASH below OWASP's minimum is still refused", () => {
    expect(loadConfig({}).passwordHash).toEqual({ memoryCost: 19456, timeCost: 2, parallelism: 1 });
    expect(loadConfig({ PASSWORD_HASH: 'argon2id:m=65536,t=3,p=1' }).passwordHash).toEqual({
      memoryCost: 65536,
      timeCost: 3,
      parallelism: 1,
    });
    expect(() => loadConfig({ PASSWORD_HASH: 'argon2id:m=1024,t=1,p=1' })).toThrow(
      /PASSWORD_HASH is below OWASP's minimum/,
    );
    expect(() => loadConfig({ PASSWORD_HASH_PROFILE: 'cheap' })).toThrow(/PASSWORD_HASH_PROFILE must be owasp or test/);
  });

  it("test: new hashes at m=1024,t=1, imported hashes' lanes as in production, and a warning at start", () => {
    const config = loadConfig({ PASSWORD_HASH_PROFILE: 'test' });
    expect(config.passwordHash).toEqual({ memoryCost: 1024, timeCost: 1, parallelism: 1 });
    expect(config.passwordHashCostReference).toEqual({ memoryCost: 19456, timeCost: 2, parallelism: 1 });
    expect(config.warnings).toEqual([expect.stringMatching(/PASSWORD_HASH_PROFILE is test: .* for test suites only/)]);
    expect(loadConfig({}).warnings).toEqual([]);
  });

  it('test: refused together with PASSWORD_HASH, which it replaces', () => {
    expect(() => loadConfig({ PASSWORD_HASH_PROFILE: 'test', PASSWORD_HASH: 'argon2id:m=19456,t=2,p=1' })).toThrow(
      /PASSWORD_HASH_PROFILE is test, which sets the cost of new hashes itself/,
    );
  });
});

describe('access tokens (PUBLIC_URL, ACCESS_TOKEN_ISSUER, ACCESS_TOKEN_LIFETIME)', () => {
  it('name the server its own address by default, PUBLIC_URL when set, ACCESS_TOKEN_ISSUER above both', () => {
    expect(loadConfig({}).accessTokens).toEqual({ issuer: 'http://127.0.0.1:3000', lifetimeSeconds: 300 });
    expect(loadConfig({ HOST: '0.0.0.0', PORT: '8080' }).accessTokens.issuer).toBe('http://127.0.0.1:8080');
    expect(loadConfig({ HOST: '::1' }).publicUrl).toBe('http://[::1]:3000');
    const behind = loadConfig({ PUBLIC_URL: 'https://accounts.example.com/' });
    expect(behind.publicUrl).toBe('https://accounts.example.com');
    expect(behind.accessTokens.issuer).toBe('https://accounts.example.com');
    expect(
      loadConfig({ PUBLIC_URL: 'https://accounts.example.com', ACCESS_TOKEN_ISSUER: 'urn:example:accounts' })
        .accessTokens.issuer,
    ).toBe('urn:example:accounts');
  });

  it('takes a lifetime from 10 s to an hour, and refuses the rest naming the variable', () => {
    expect(loadConfig({ ACCESS_TOKEN_LIFETIME: '3600' }).accessTokens.lifetimeSeconds).toBe(3600);
    for (const bad of ['3601', '9', '5m', '-1'])
      expect(() => loadConfig({ ACCESS_TOKEN_LIFETIME: bad })).toThrow(
        /ACCESS_TOKEN_LIFETIME must be a whole number from 10 to 3600/,
      );
    expect(() => loadConfig({ PUBLIC_URL: 'accounts.example.com' })).toThrow(/PUBLIC_URL must be an http/);
    expect(() => loadConfig({ ACCESS_TOKEN_ISSUER: 'has space' })).toThrow(/ACCESS_TOKEN_ISSUER must be/);
  });

  it('warns a production start without PUBLIC_URL that tokens name the server’s own address', () => {
    const production = { DEPLOYMENT: 'production', DATABASE_URL: 'postgres://db/accounts' };
    expect(loadConfig(production).warnings).toEqual([expect.stringMatching(/^PUBLIC_URL is not set/)]);
    expect(loadConfig({ ...production, PUBLIC_URL: 'https://a.example' }).warnings).toEqual([]);
  });
});
