// Access tokens verifiable without calling us (issue 43, point 4), on a real server over HTTP, on
// the embedded database and on PostgreSQL: GET /.well-known/jwks.json as a verifier fetches it
// (no token, cacheable, ETag), tokens the server signs verified with jose and with the client's
// verifyAccessToken against that served key set, a rotation whose new key is served before it
// signs and whose tokens of both keys verify, a retired key served until its last token expired.
// Until the session operations sign through it, the tests ask the server's signer directly.
import { AccessTokenError, verifyAccessToken } from '@user-accounts/client';
import type { AccessTokenSigner } from '@user-accounts/server/sessions/access-tokens';
import {
  createSigningKeys,
  PUBLISHED_AFTER_RETIREMENT_SECONDS,
  rotateSigningKey,
  sealingRing,
} from '@user-accounts/server/sessions/signing-keys';
import { createRemoteJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { checkedClient } from './harness.ts';
import {
  embeddedServer,
  migratedPostgresDatabase,
  postgresUnavailable,
  serverTarget,
  type Target,
  TEST_FACTOR_KEY,
} from './targets.ts';

const ISSUER = 'https://accounts.example.test';
const env = { ACCESS_TOKEN_ISSUER: ISSUER, ACCESS_TOKEN_LIFETIME: '120' };
const skipPostgres = await postgresUnavailable();

const targets: [string, (() => Promise<Target>) | undefined][] = [
  ['embedded PGlite', () => embeddedServer({ env })],
  [
    'PostgreSQL',
    skipPostgres !== undefined
      ? undefined
      : async () => {
          const database = await migratedPostgresDatabase();
          return serverTarget({ DATABASE_URL: database.url }, database.drop, {
            env: { ...env, FACTOR_ENCRYPTION_KEY: TEST_FACTOR_KEY },
          });
        },
  ],
];

let verifiers = 0;
/** A verifier's own view of the key set: a URL no earlier verifier cached (the query is ignored by the server). */
const freshJwksUrl = (target: Target) => `${target.baseUrl}/.well-known/jwks.json?verifier=${verifiers++}`;

for (const [name, start] of targets) {
  describe.skipIf(start === undefined)(`access tokens on ${name}`, () => {
    let target: Target;
    let signer: AccessTokenSigner;
    beforeAll(async () => {
      target = await start!();
      signer = target.deps!().accessTokens;
    }, 120_000);
    afterAll(() => target?.close());
    const session = (site = 'shop') => ({
      site,
      userId: '0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b',
      sessionId: crypto.randomUUID(),
      amr: ['pwd'],
      aal: 1,
    });
    const kidOf = (jwt: string) => decodeProtectedHeader(jwt).kid;
    /** `ms` pass for the keys: every time of the table moves back by that much. */
    const timePasses = (ms: number) =>
      target.sql(
        `update signing_keys set created_at = created_at - $1::interval, activates_at = activates_at - $1::interval,
           retired_at = retired_at - $1::interval`,
        [`${Math.ceil(ms)} milliseconds`],
      );
    const served = async () => {
      const response = await fetch(`${target.baseUrl}/.well-known/jwks.json`);
      expect(response.status).toBe(200);
      return ((await response.json()) as { keys: { kid: string }[] }).keys.map((k) => k.kid);
    };

    it('serves the key set without a token, cacheable, with an ETag that a copy held gets a 304 for', async () => {
      await signer.sign(session());
      const client = checkedClient(target.baseUrl, 'no token needed');
      const { data, response } = await client.GET('/.well-known/jwks.json');
      expect(response.status).toBe(200);
      expect(response.headers.get('cache-control')).toBe('public, max-age=300');
      const etag = response.headers.get('etag')!;
      expect(etag).toMatch(/^"[A-Za-z0-9_-]+"$/);
      expect(data!.keys).toHaveLength(1);
      expect(data!.keys[0]).toEqual({
        kty: 'EC',
        crv: 'P-256',
        x: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
        y: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
        kid: expect.stringMatching(/^[A-Za-z0-9_-]{43}$/),
        alg: 'ES256',
        use: 'sig',
      });
      const again = await fetch(`${target.baseUrl}/.well-known/jwks.json`, { headers: { 'If-None-Match': etag } });
      expect(again.status).toBe(304);
      expect(again.headers.get('etag')).toBe(etag);
      expect(await again.text()).toBe('');
      const other = await fetch(`${target.baseUrl}/.well-known/jwks.json`, { headers: { 'If-None-Match': '"other"' } });
      expect(other.status).toBe(200);
      // Another method on it: 405 with Allow, as on every path of the spec.
      const post = await fetch(`${target.baseUrl}/.well-known/jwks.json`, { method: 'POST' });
      expect(post.status).toBe(405);
      expect(post.headers.get('allow')).toBe('GET, HEAD');
    });

    it('signs tokens that jose verifies against the served keys: iss, aud, sub, sid, exp, kid, ES256', async () => {
      const asked = session();
      const { accessToken, accessTokenExpiresAt } = await signer.sign({ ...asked, actor: 'agent@support' });
      const jwks = createRemoteJWKSet(new URL(freshJwksUrl(target)));
      const { payload, protectedHeader } = await jwtVerify(accessToken, jwks, {
        issuer: ISSUER,
        audience: 'shop',
        algorithms: ['ES256'],
      });
      expect(protectedHeader).toEqual({ alg: 'ES256', kid: (await served())[0], typ: 'at+jwt' });
      expect(payload).toMatchObject({
        iss: ISSUER,
        aud: 'shop',
        sub: asked.userId,
        sid: asked.sessionId,
        amr: ['pwd'],
        aal: 1,
        act: { sub: 'agent@support' },
      });
      expect(payload.exp! - payload.iat!).toBe(120);
      expect(accessTokenExpiresAt.getTime()).toBe(payload.exp! * 1000);
    });

    it('verifyAccessToken accepts a good token and refuses another site, another issuer, an expired or a tampered one', async () => {
      const jwksUrl = freshJwksUrl(target);
      const asked = session();
      const { accessToken } = await signer.sign(asked);
      const claims = await verifyAccessToken(accessToken, { jwksUrl, issuer: ISSUER, site: 'shop' });
      expect(claims).toEqual({
        iss: ISSUER,
        aud: 'shop',
        sub: asked.userId,
        sid: asked.sessionId,
        iat: claims.iat,
        exp: claims.iat + 120,
        amr: ['pwd'],
        aal: 1,
      });
      const refused = async (jwt: string, options: { issuer?: string; site?: string } = {}) => {
        const error = await verifyAccessToken(jwt, { jwksUrl, issuer: ISSUER, site: 'shop', ...options }).then(
          () => undefined,
          (e: unknown) => e,
        );
        expect(error).toBeInstanceOf(AccessTokenError);
        return (error as AccessTokenError).reason;
      };
      expect(await refused(accessToken, { site: 'other-site' })).toBe('wrong_site');
      expect(await refused((await signer.sign(session('other-site'))).accessToken)).toBe('wrong_site');
      expect(await refused(accessToken, { issuer: 'https://someone-else.example' })).toBe('wrong_issuer');
      // Signed by the server's own key, an hour ago (a signer over the same keys whose clock is behind).
      const deps = target.deps!();
      const past = createSigningKeys({
        db: deps.database.db,
        ring: deps.factorKeys,
        issuer: ISSUER,
        lifetimeSeconds: 120,
        clock: () => Date.now() - 3_600_000,
      });
      const old = await past.sign(asked);
      expect(kidOf(old.accessToken)).toBe(kidOf(accessToken));
      expect(await refused(old.accessToken)).toBe('expired');
      const [header, body, signature] = accessToken.split('.');
      const forged = Buffer.from(
        JSON.stringify({ ...JSON.parse(Buffer.from(body!, 'base64url').toString()), sub: 'someone-else' }),
      ).toString('base64url');
      expect(await refused(`${header}.${forged}.${signature}`)).toBe('bad_signature');
      expect(await refused(`${header}.${body}.${signature!.slice(0, -4)}AAAA`)).toBe('bad_signature');
      expect(await refused('not.a.jwt')).toBe('malformed');
      // alg none, as the placeholder signed: never accepted.
      const none = `${Buffer.from('{"alg":"none"}').toString('base64url')}.${body}.`;
      expect(await refused(none)).toBe('malformed');
    });

    it('rotates: the new key is served before it signs, tokens of both keys verify, the retired key leaves once its last token expired', async () => {
      const deps = target.deps!();
      const db = deps.database.db;
      const before = await signer.sign(session());
      const oldKid = kidOf(before.accessToken)!;
      // As `cli signing-keys rotate` does, from another process: this server reads it when told (or within 60 s).
      const rotation = await rotateSigningKey(db, await sealingRing(db, deps.factorKeys));
      await signer.refresh!();
      expect(await served()).toEqual([rotation.kid, oldKid]);
      const during = await signer.sign(session());
      expect(kidOf(during.accessToken)).toBe(oldKid);
      // The activation delay passes: every time in the table moves back by it, rather than waiting 6 minutes.
      await timePasses(rotation.activatesAt.getTime() - Date.now() + 1000);
      await signer.refresh!();
      const after = await signer.sign(session());
      expect(kidOf(after.accessToken)).toBe(rotation.kid);
      // A verifier that fetched the set once the new key was served: every token verifies, no refetch needed.
      const jwksUrl = freshJwksUrl(target);
      for (const token of [before, during, after])
        expect((await verifyAccessToken(token.accessToken, { jwksUrl, issuer: ISSUER, site: 'shop' })).aud).toBe(
          'shop',
        );
      expect(await served()).toEqual([rotation.kid, oldKid]);

      // Retired longer ago than the longest token lives (an hour, and the stalest server's minute): gone.
      await timePasses(PUBLISHED_AFTER_RETIREMENT_SECONDS * 1000);
      await signer.refresh!();
      expect(await served()).toEqual([rotation.kid]);
      const lateVerifier = freshJwksUrl(target);
      await expect(
        verifyAccessToken(before.accessToken, { jwksUrl: lateVerifier, issuer: ISSUER, site: 'shop' }),
      ).rejects.toMatchObject({ reason: 'unknown_key' });
      expect(
        (await verifyAccessToken(after.accessToken, { jwksUrl: lateVerifier, issuer: ISSUER, site: 'shop' })).sid,
      ).toBeDefined();
    });

    it('verifyAccessToken fetches the key set once, then again only for a kid it lacks (after its 30 s cooldown)', async () => {
      const jwksUrl = freshJwksUrl(target);
      // The server's access log: one line per request, by route.
      const fetchesOf = () =>
        target.logs.filter((line) => line.includes('"route":"/.well-known/jwks.json"') && line.includes('"status":200'))
          .length;
      const before = fetchesOf();
      const known = await signer.sign(session());
      for (let i = 0; i < 5; i++) await verifyAccessToken(known.accessToken, { jwksUrl, issuer: ISSUER, site: 'shop' });
      expect(fetchesOf() - before).toBe(1);
      // A key signing at once (`--now`, as after a theft): its first token names a kid the verifier lacks.
      const deps = target.deps!();
      const rotation = await rotateSigningKey(deps.database.db, await sealingRing(deps.database.db, deps.factorKeys), {
        immediately: true,
      });
      await signer.refresh!();
      const fresh = await signer.sign(session());
      expect(kidOf(fresh.accessToken)).toBe(rotation.kid);
      // Within the cooldown since its fetch, no refetch: the token is refused for now, naming why.
      await expect(
        verifyAccessToken(fresh.accessToken, { jwksUrl, issuer: ISSUER, site: 'shop' }),
      ).rejects.toMatchObject({
        reason: 'unknown_key',
      });
      expect(fetchesOf() - before).toBe(1);
      // 31 s later (the clock moved, not waited for): fetched again, and verified.
      vi.useFakeTimers({ toFake: ['Date'], now: Date.now() + 31_000 });
      try {
        const claims = await verifyAccessToken(fresh.accessToken, { jwksUrl, issuer: ISSUER, site: 'shop' });
        expect(claims.sid).toBeDefined();
      } finally {
        vi.useRealTimers();
      }
      expect(fetchesOf() - before).toBe(2);
    });

    it('keeps no private key readable in the database or the key set', async () => {
      const rows = await target.sql('select kid, public_jwk, private_sealed from signing_keys');
      expect(rows.length).toBeGreaterThan(0);
      for (const row of rows) {
        expect(Object.keys(row.public_jwk as object).sort()).toEqual(['crv', 'kty', 'x', 'y']);
        const sealed = String(row.private_sealed);
        expect(sealed).toMatch(/^v1\.[A-Za-z0-9_@-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
        expect(sealed).not.toContain('"d"');
        expect(Buffer.from(sealed.split('.')[3]!, 'base64url').toString('utf8')).not.toContain('"d"');
      }
      const body = await (await fetch(`${target.baseUrl}/.well-known/jwks.json`)).text();
      expect(body).not.toContain('"d"');
    });
  });
}

// Issue 57: a key made on PostgreSQL without FACTOR_ENCRYPTION_KEY is sealed by the database's own
// key, which a copy of the database holds; once the variable is set, the next start seals it again
// under the ring (the same key: its tokens still verify), rather than wait for a rotation.
describe.skipIf(skipPostgres !== undefined)(
  'a signing key sealed without FACTOR_ENCRYPTION_KEY, once it is set',
  () => {
    it('is sealed under the ring at the next start, and still signs under its kid', async () => {
      const database = await migratedPostgresDatabase();
      const target = await serverTarget({ DATABASE_URL: database.url }, database.drop, { env });
      try {
        const signed = await target.deps!().accessTokens.sign({
          site: 'shop',
          userId: '0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b',
          sessionId: crypto.randomUUID(),
          amr: ['pwd'],
          aal: 1,
        });
        const kid = decodeProtectedHeader(signed.accessToken).kid;
        const sealedWith = async () =>
          (await target.sql('select kid, private_sealed from signing_keys')).map(
            (r) => `${r.kid}:${String(r.private_sealed).split('.')[1]}`,
          );
        expect(await sealedWith()).toEqual([`${kid}:@db`]);
        await target.restart({ env: { FACTOR_ENCRYPTION_KEY: TEST_FACTOR_KEY } });
        expect(await sealedWith()).toEqual([`${kid}:test`]);
        const again = await target.deps!().accessTokens.sign({
          site: 'shop',
          userId: '0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b',
          sessionId: crypto.randomUUID(),
          amr: ['pwd'],
          aal: 1,
        });
        expect(decodeProtectedHeader(again.accessToken).kid).toBe(kid);
        const { payload } = await jwtVerify(again.accessToken, createRemoteJWKSet(new URL(freshJwksUrl(target))), {
          issuer: ISSUER,
          audience: 'shop',
        });
        expect(payload.sub).toBe('0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b');
      } finally {
        await target.close();
      }
    }, 60_000);
  },
);
