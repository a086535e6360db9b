// The deployment's HMAC keys (issue 41, F4, F6, F10): one key per purpose, derived from each key
// of FACTOR_ENCRYPTION_KEY's ring; stored MACs name their key; without a ring, the database's own.
import { createHmac, randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../db/client.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { DATABASE_KEY_ID, deploymentKeysFrom, deploymentKeysOf, sealingRingFor } from './deployment-keys.ts';
import { type KeyRing, open, parseKeyRing, seal } from './secret-box.ts';

const root = randomBytes(32);
const keys = deploymentKeysFrom([['k1', root]], true);

describe('deploymentKeysFrom', () => {
  it('makes a MAC of its own per purpose, never the root key used as is', () => {
    const message = 'POST /api/1/user/create\n{"password":"x"}';
    const fingerprint = keys.mac('idempotency_fingerprint', message);
    expect(fingerprint).toMatch(/^k1\.[A-Za-z0-9_-]{43}$/);
    expect(fingerprint).not.toBe(keys.mac('phone_code', message));
    expect(fingerprint.slice(3)).not.toBe(createHmac('sha256', root).update(message).digest('base64url'));
    expect(keys.matches('idempotency_fingerprint', message, fingerprint)).toBe(true);
    expect(keys.matches('phone_code', message, fingerprint)).toBe(false);
    expect(keys.matches('idempotency_fingerprint', `${message} `, fingerprint)).toBe(false);
  });

  it('checks what any key of the ring made, and nothing a key it lacks made', () => {
    const rotated = deploymentKeysFrom(
      [
        ['k2', randomBytes(32)],
        ['k1', root],
      ],
      true,
    );
    const old = keys.mac('phone_code', 'id:123456');
    expect(rotated.mac('phone_code', 'id:123456')).toMatch(/^k2\./);
    expect(rotated.matches('phone_code', 'id:123456', old)).toBe(true);
    expect(rotated.macs('phone_code', 'id:123456')).toEqual([rotated.mac('phone_code', 'id:123456'), old]);
    const other = deploymentKeysFrom([['k1', randomBytes(32)]], true);
    expect(other.matches('phone_code', 'id:123456', old)).toBe(false);
    for (const stored of ['', 'k1.', 'k9.abc', 'no-dot', `.${old.slice(3)}`])
      expect(keys.matches('phone_code', 'id:123456', stored)).toBe(false);
  });
});

describe('deploymentKeysOf', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openMigratedPglite();
  }, 60_000);
  afterAll(() => database?.close());

  it("without a ring uses the database's own key, made once; with one, the ring's first and still the database's", async () => {
    const own = await deploymentKeysOf(database.db, undefined);
    expect(own.external).toBe(false);
    const made = own.mac('idempotency_fingerprint', 'body');
    expect(made.startsWith(`${DATABASE_KEY_ID}.`)).toBe(true);
    const rows = (await database.db.execute(
      sql`select count(*)::int as n from service_keys where name = 'deployment'`,
    )) as unknown as { n: number }[];
    expect(rows[0]!.n).toBe(1);
    const ring = parseKeyRing(`k1:${root.toString('base64')}`) as KeyRing;
    const keyed = await deploymentKeysOf(database.db, ring);
    expect(keyed.external).toBe(true);
    expect(keyed.mac('idempotency_fingerprint', 'body')).toBe(keys.mac('idempotency_fingerprint', 'body'));
    expect(keyed.matches('idempotency_fingerprint', 'body', made)).toBe(true);
    expect(await deploymentKeysOf(database.db, ring)).toBe(keyed);
  });
});

describe('sealingRingFor', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openMigratedPglite();
  }, 60_000);
  afterAll(() => database?.close());

  it("reads the database's own key once, not at every seal and open (issue 59's lead)", async () => {
    const statements: string[] = [];
    const counting = new Proxy(database.db, {
      get(target, name, receiver) {
        if (name === 'select' || name === 'insert') statements.push(String(name));
        return Reflect.get(target, name, receiver);
      },
    });
    const first = await sealingRingFor(counting, undefined, 'provider_flow');
    const sealed = seal(first, 'a state', 'test');
    const read = statements.length;
    expect(read).toBeGreaterThan(0);
    for (let i = 0; i < 5; i++)
      expect(open(await sealingRingFor(counting, undefined, 'provider_flow'), sealed, 'test')).toBe('a state');
    expect(statements.length).toBe(read);
    // Another purpose derives another key from the same root, still without asking the database.
    const other = await sealingRingFor(counting, undefined, 'webhook_secret');
    expect(other.keys.get(DATABASE_KEY_ID)).not.toEqual(first.keys.get(DATABASE_KEY_ID));
    expect(statements.length).toBe(read);
  });
});
