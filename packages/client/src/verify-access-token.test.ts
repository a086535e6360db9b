// verifyAccessToken refuses to run without the site and issuer it checks against: an unset
// variable (undefined, or an empty string) would otherwise turn the check of `aud` or `iss` off,
// and another site's genuine token would pass. The token here is genuine: signed by the key the
// served key set publishes, for another site.
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, SignJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AccessTokenError, verifyAccessToken } from './index.ts';

const ISSUER = 'https://accounts.example';
let server: Server;
let jwksUrl: string;
let otherSitesToken: string;
let fetches = 0;

beforeAll(async () => {
  const { publicKey, privateKey } = await generateKeyPair('ES256');
  const jwk = { ...(await exportJWK(publicKey)), kid: 'k1', alg: 'ES256', use: 'sig' };
  server = createServer((_request, response) => {
    fetches += 1;
    response.writeHead(200, { 'content-type': 'application/json' });
    response.end(JSON.stringify({ keys: [jwk] }));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  jwksUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/.well-known/jwks.json`;
  const now = Math.floor(Date.now() / 1000);
  otherSitesToken = await new SignJWT({ sid: 's1', amr: ['pwd'], aal: 1 })
    .setProtectedHeader({ alg: 'ES256', kid: 'k1', typ: 'at+jwt' })
    .setIssuer(ISSUER)
    .setAudience('evil')
    .setSubject('u1')
    .setIssuedAt(now)
    .setExpirationTime(now + 120)
    .sign(privateKey);
});
afterAll(async () => {
  await new Promise((resolve) => server.close(resolve));
});

async function refusal(options: Record<string, unknown>): Promise<unknown> {
  return verifyAccessToken(otherSitesToken, { jwksUrl, ...options } as never).then(
    (claims) => expect.fail(`accepted, as ${JSON.stringify(claims)}`),
    (error: unknown) => error,
  );
}

describe('verifyAccessToken without its site or issuer', () => {
  it('the genuine token verifies for its own site, and is refused for another', async () => {
    expect((await verifyAccessToken(otherSitesToken, { jwksUrl, issuer: ISSUER, site: 'evil' })).aud).toBe('evil');
    expect(await refusal({ issuer: ISSUER, site: 'shop' })).toMatchObject({ reason: 'wrong_site' });
  });

  it.each([
    ['site undefined', { issuer: ISSUER, site: undefined }, 'site'],
    ['site left out', { issuer: ISSUER }, 'site'],
    ['site empty', { issuer: ISSUER, site: '' }, 'site'],
    ['issuer undefined', { issuer: undefined, site: 'evil' }, 'issuer'],
    ['issuer empty', { issuer: '', site: 'evil' }, 'issuer'],
    ['both undefined', { issuer: undefined, site: undefined }, 'site'],
  ])('%s: throws a TypeError naming the option, before fetching any key', async (_name, options, named) => {
    const before = fetches;
    const error = await refusal(options);
    expect(error).toBeInstanceOf(TypeError);
    expect(error).not.toBeInstanceOf(AccessTokenError);
    expect((error as TypeError).message).toContain(`options.${named}`);
    expect(fetches).toBe(before);
  });
});
