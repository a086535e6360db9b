// The keys that sign access tokens (issue 43, point 4), on the embedded database and on PostgreSQL:
// one key made whichever servers ask at once, JWTs that jose verifies against the published keys,
// a rotation's phases (published before it signs, unpublished after its last token expired), the
// private key sealed (never in the database in clear), and no database round trip per token.
import { randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { createLocalJWKSet, decodeProtectedHeader, type JWK, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { type Database, type Db, openPostgres } from '../db/client.ts';
import { signingKeys } from '../db/schema.ts';
import { DATABASE_KEY_ID } from '../kernel/deployment-keys.ts';
import { type KeyRing, open, parseKeyRing } from '../kernel/secret-box.ts';
import { postgresUnavailable } from '../testing/postgres.ts';
import { migratedPostgresDatabase, openMigratedPglite } from '../testing/templates.ts';
import type { PublishedKeys } from './access-tokens.ts';
import {
  ACTIVATION_DELAY_SECONDS,
  createSigningKeys,
  listSigningKeys,
  PUBLISHED_AFTER_RETIREMENT_SECONDS,
  REFRESH_MS,
  rotateSigningKey,
  sealingRing,
} from './signing-keys.ts';

const ISSUER = 'https://accounts.example.com';
const ring = parseKeyRing(`k1:${randomBytes(32).toString('base64')}`) as KeyRing;
const request = {
  site: 'shop',
  userId: '0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b',
  sessionId: '0193a1e4-9a8b-7c6d-8e5f-4a3b2c1d0e9f',
  amr: ['pwd', 'otp', 'mfa'],
  aal: 2,
};

/** The claims and header of `jwt` if the published keys verify it at `at` (ms), else the error. */
async function verified(jwt: string, published: PublishedKeys, at: number, audience = 'shop') {
  const { payload, protectedHeader } = await jwtVerify(jwt, createLocalJWKSet({ keys: published.keys as JWK[] }), {
    issuer: ISSUER,
    audience,
    algorithms: ['ES256'],
    currentDate: new Date(at),
  });
  return { payload, protectedHeader };
}

const skipPostgres = await postgresUnavailable();
if (skipPostgres !== undefined) console.warn(`\n[signing-keys.test] PostgreSQL: SKIPPED, ${skipPostgres}\n`);

/** A new migrated database per test: the table starts empty. */
type Opened = { db: Db; close(): Promise<void> };
const databases: Record<string, (() => Promise<Opened>) | undefined> = {
  'embedded PGlite': async () => {
    const database: Database = await openMigratedPglite();
    return { db: database.db, close: () => database.close() };
  },
  PostgreSQL:
    skipPostgres === undefined
      ? async () => {
          const own = await migratedPostgresDatabase();
          const database = await openPostgres(own.url, { max: 4 });
          await database.migrate();
          return {
            db: database.db,
            async close() {
              await database.close();
              await own.drop();
            },
          };
        }
      : undefined,
};

for (const [name, openDatabase] of Object.entries(databases)) {
  describe.skipIf(openDatabase === undefined)(`signing keys on ${name}`, () => {
    let opened: Opened;
    let db: Db;
    beforeAll(async () => {
      opened = await openDatabase!();
      db = opened.db;
    }, 60_000);
    afterAll(() => opened?.close());
    const clear = () => db.delete(signingKeys);

    it('makes one key whichever of several servers signs first, and signs JWTs jose verifies against the published keys', async () => {
      await clear();
      const servers = [1, 2, 3].map(() => createSigningKeys({ db, ring, issuer: ISSUER, lifetimeSeconds: 300 }));
      const tokens = await Promise.all(servers.flatMap((server) => [server.sign(request), server.sign(request)]));
      expect(await db.select({ kid: signingKeys.kid }).from(signingKeys)).toHaveLength(1);
      const published = await servers[0]!.publishedKeys();
      expect(published.keys).toHaveLength(1);
      const [key] = published.keys;
      expect(key).toEqual({ kty: 'EC', crv: 'P-256', x: key!.x, y: key!.y, kid: key!.kid, alg: 'ES256', use: 'sig' });
      expect(Object.keys(key!)).not.toContain('d');
      const now = Date.now();
      for (const { accessToken, accessTokenExpiresAt } of tokens) {
        const { payload, protectedHeader } = await verified(accessToken, published, now);
        expect(protectedHeader).toEqual({ alg: 'ES256', kid: key!.kid, typ: 'at+jwt' });
        expect(payload).toEqual({
          iss: ISSUER,
          aud: 'shop',
          sub: request.userId,
          sid: request.sessionId,
          iat: payload.iat,
          exp: payload.iat! + 300,
          amr: ['pwd', 'otp', 'mfa'],
          aal: 2,
        });
        expect(Math.abs(payload.iat! * 1000 - now)).toBeLessThan(60_000);
        expect(accessTokenExpiresAt.getTime()).toBe(payload.exp! * 1000);
        // Another site's audience, a later time, another issuer: refused.
        await expect(verified(accessToken, published, now, 'other-site')).rejects.toThrow(/aud/);
        await expect(verified(accessToken, published, now + 301_000)).rejects.toThrow(/exp/);
      }
      const tampered = tokens[0]!.accessToken.replace(/\.([^.]+)\./, (_, body: string) => {
        const claims = JSON.parse(Buffer.from(body, 'base64url').toString());
        return `.${Buffer.from(JSON.stringify({ ...claims, sub: 'someone-else' })).toString('base64url')}.`;
      });
      await expect(verified(tampered, published, now)).rejects.toThrow(/signature/);
    });

    it('says who impersonates in act, and caps the lifetime at an hour', async () => {
      const signer = createSigningKeys({ db, ring, issuer: ISSUER, lifetimeSeconds: 7200 });
      const { accessToken } = await signer.sign({ ...request, aal: 1, amr: ['pwd'], actor: 'agent@support' });
      const { payload } = await verified(accessToken, await signer.publishedKeys(), Date.now());
      expect(payload.act).toEqual({ sub: 'agent@support' });
      expect(payload.exp! - payload.iat!).toBe(3600);
    });

    it('signs from memory: no query per token once the keys are read', async () => {
      let selects = 0;
      const counted = new Proxy(db, {
        get(target, property, receiver) {
          const value = Reflect.get(target, property, receiver);
          if (property !== 'select' || typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            selects++;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      }) as Db;
      const signer = createSigningKeys({ db: counted, ring, issuer: ISSUER, lifetimeSeconds: 300 });
      await signer.sign(request);
      const afterFirst = selects;
      for (let i = 0; i < 50; i++) await signer.sign(request);
      await signer.publishedKeys();
      expect(afterFirst).toBeGreaterThan(0);
      expect(selects).toBe(afterFirst);
    });

    it('rotates: the new key is published before it signs, tokens of both verify, the old one leaves after its last token expired', async () => {
      await clear();
      let now = Date.now();
      const signer = createSigningKeys({ db, ring, issuer: ISSUER, lifetimeSeconds: 300, clock: () => now });
      const before = await signer.sign(request);
      const oldKid = decodeProtectedHeader(before.accessToken).kid!;

      // Another server's CLI rotates: this one reads it once its view is older than REFRESH_MS, unasked.
      const rotation = await rotateSigningKey(db, ring, { now: new Date(now) });
      expect(rotation.retired).toEqual([oldKid]);
      expect(rotation.activatesAt.getTime()).toBe(now + ACTIVATION_DELAY_SECONDS * 1000);
      now += REFRESH_MS + 1;
      // The view in memory answers at once (never a wait on the database), and is read again behind.
      expect((await signer.publishedKeys()).keys.map((k) => k.kid)).toEqual([oldKid]);
      await vi.waitFor(async () =>
        expect((await signer.publishedKeys()).keys.map((k) => k.kid)).toEqual([rotation.kid, oldKid]),
      );
      const published = await signer.publishedKeys();
      // Published, not yet signing.
      const during = await signer.sign(request);
      expect(decodeProtectedHeader(during.accessToken).kid).toBe(oldKid);

      now = rotation.activatesAt.getTime();
      const after = await signer.sign(request);
      expect(decodeProtectedHeader(after.accessToken).kid).toBe(rotation.kid);
      const both = await signer.publishedKeys();
      expect(both.etag).toBe(published.etag);
      for (const token of [before, during, after]) {
        const { payload } = await verified(token.accessToken, both, token.accessTokenExpiresAt.getTime() - 1000);
        expect(payload.sub).toBe(request.userId);
      }

      // The old key's last token (signed just before it retired) expires long before it is unpublished.
      const retiredAt = rotation.activatesAt.getTime();
      const unpublishedAt = retiredAt + PUBLISHED_AFTER_RETIREMENT_SECONDS * 1000;
      expect(during.accessTokenExpiresAt.getTime()).toBeLessThan(unpublishedAt);
      now = unpublishedAt - 1000;
      await signer.refresh();
      expect((await signer.publishedKeys()).keys.map((k) => k.kid)).toEqual([rotation.kid, oldKid]);
      now = unpublishedAt;
      const later = await signer.publishedKeys();
      expect(later.keys.map((k) => k.kid)).toEqual([rotation.kid]);
      expect(later.etag).not.toBe(published.etag);
      expect((await listSigningKeys(db, now)).map((k) => [k.kid, k.state])).toEqual([
        [rotation.kid, 'signing'],
        [oldKid, 'unpublished'],
      ]);
      // The next rotation deletes what is no longer published.
      const next = await rotateSigningKey(db, ring, { now: new Date(now), immediately: true });
      expect(next.removed).toBe(1);
      expect(next.activatesAt.getTime()).toBe(now);
      await signer.refresh();
      expect(decodeProtectedHeader((await signer.sign(request)).accessToken).kid).toBe(next.kid);
    });

    it('keeps the private key sealed: not in clear in the database, and bound to its kid', async () => {
      await clear();
      const signer = createSigningKeys({ db, ring, issuer: ISSUER, lifetimeSeconds: 300 });
      await signer.sign(request);
      const [row] = await db.select().from(signingKeys);
      const seal = await sealingRing(db, ring);
      const privateJwk = JSON.parse(open(seal, row!.privateSealed, row!.kid)) as JWK;
      expect(privateJwk.d).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const d = privateJwk.d!;
      const dump = JSON.stringify(
        await db.execute(sql`select row_to_json(k)::text as row from signing_keys k`),
      ).toString();
      for (const form of [
        d,
        Buffer.from(d, 'base64url').toString('hex'),
        Buffer.from(d, 'base64url').toString('base64'),
      ])
        expect(dump).not.toContain(form);
      expect(row!.privateSealed.split('.')[1]).toBe('k1');
      expect(row!.publicJwk).toEqual({ kty: 'EC', crv: 'P-256', x: privateJwk.x, y: privateJwk.y });
      // Copied onto another kid, it does not open; with another ring, not at all.
      expect(() => open(seal, row!.privateSealed, 'another-kid')).toThrow();
      const stranger = parseKeyRing(`k1:${randomBytes(32).toString('base64')}`) as KeyRing;
      const elsewhere = createSigningKeys({ db, ring: stranger, issuer: ISSUER, lifetimeSeconds: 300 });
      await expect(elsewhere.sign(request)).rejects.toMatchObject({ status: 503, code: 'service_unavailable' });
    });

    it("without FACTOR_ENCRYPTION_KEY seals with the database's own key, which still opens once the ring is set", async () => {
      await clear();
      const bare = createSigningKeys({ db, ring: undefined, issuer: ISSUER, lifetimeSeconds: 300 });
      const first = await bare.sign(request);
      const [row] = await db.select().from(signingKeys);
      expect(row!.privateSealed.split('.')[1]).toBe(DATABASE_KEY_ID);
      const keyed = createSigningKeys({ db, ring, issuer: ISSUER, lifetimeSeconds: 300 });
      const second = await keyed.sign(request);
      expect(decodeProtectedHeader(second.accessToken).kid).toBe(row!.kid);
      const published = await keyed.publishedKeys();
      for (const token of [first, second]) await verified(token.accessToken, published, Date.now());
      // The next key, rotated in with the ring, is sealed with it.
      const next = await rotateSigningKey(db, await sealingRing(db, ring), { immediately: true });
      const rows = await db.select().from(signingKeys);
      expect(rows.find((r) => r.kid === next.kid)!.privateSealed.split('.')[1]).toBe('k1');
    });
  });
}
