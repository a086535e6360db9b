// The access tokens of the spec's examples (issue 64, point 3): real ES256 JWTs, signed by the
// TEST KEY below, whose public half is the first key of the `/.well-known/jwks.json` example, so
// that `verifyAccessToken(jwt, { jwksUrl: <mock>/.well-known/jwks.json, issuer: MOCK_ISSUER,
// site: MOCK_SITE })` accepts them against the mock, as it would a server's.
//
// THE KEY IS A TEST KEY. It signs only the examples of a public document: anybody can sign with
// it, so it must never be trusted anywhere else (a server's keys are its own, made by
// `cli signing-keys rotate`, and never this one).
//
// `node packages/contract-tests/src/example-tokens.ts` prints a fresh token for each example
// below (ES256 signatures differ run to run; each one verifies); paste them into the spec after
// changing a claim. mock-sessions.test.ts holds every example to this table.
import { importJWK, SignJWT } from 'jose';

/** The issuer of the examples' tokens (the mock's address, as a server's default is its PUBLIC_URL). */
export const MOCK_ISSUER = 'http://127.0.0.1:4010';
/** The site the examples' tokens are for (`aud`): the site of the mock's token. */
export const MOCK_SITE = 'default';

export const TEST_SIGNING_KEY = {
  kty: 'EC',
  crv: 'P-256',
  x: 'kgI7R63PbNuu-hSuzO-DNrRpoIYLPRF5P3Pmg69yxtw',
  y: 'ZUVHOxDaStGj4NLNhC55aZeT8MZXdmzn_Ao8H2yg3a0',
  d: 'My3DseFnEGGg9-kCoCBxh9Go6X-znO6R--ExcrBvLHw',
  kid: 'VFKoGBfuDGrU04uqGf2g98Ga6hZ4Y4OvNT-Fm1e9I-Q',
} as const;

const ADA = '0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b';
const SESSION = '0193a1e4-7d8e-7f90-a1b2-c3d4e5f6a7b8';
const at = (iso: string) => Date.parse(iso) / 1000;

export interface ExampleToken {
  /** The operation and the name of its 200/201 example that carries the token. */
  operationId: string;
  example: string;
  claims: { sub: string; sid: string; amr: string[]; aal: 1 | 2; iat: number; exp: number; act?: { sub: string } };
}

/** Every example access token of the spec, with the claims it carries. */
export const EXAMPLE_TOKENS: readonly ExampleToken[] = [
  ['verifyUser', 'verified_with_session', ['pwd'], 1, '2099-11-21T10:15:00Z'],
  ['verifyIdentity', 'verified_with_session', ['fed'], 1, '2099-11-21T10:15:00Z'],
  ['verifySecondFactor', 'verified_with_session', ['pwd', 'otp', 'mfa'], 2, '2099-11-21T10:15:00Z'],
  ['verifyPasskey', 'verified_with_session', ['hwk', 'user', 'mfa'], 2, '2099-11-21T10:15:00Z'],
  ['redeemTicket', 'login', ['otp'], 1, '2099-11-21T10:15:00Z'],
  ['refreshSession', 'refreshed', ['pwd'], 1, '2099-11-24T10:00:00Z'],
  ['impersonateUser', 'started', [], 1, '2099-11-24T10:00:00Z'],
  ['completeProviderSignIn', 'verified', ['fed'], 1, '2099-12-03T10:00:00Z'],
].map(([operationId, example, amr, aal, iat]) => ({
  operationId: operationId as string,
  example: example as string,
  claims: {
    sub: ADA,
    sid: SESSION,
    amr: amr as string[],
    aal: aal as 1 | 2,
    iat: at(iat as string),
    exp: at(iat as string) + 300,
    ...(operationId === 'impersonateUser' && { act: { sub: 'grace@support.example.com' } }),
  },
}));

/** A token as the server signs one: header `{alg: ES256, kid, typ: at+jwt}`, the claims, iss and aud. */
export async function signExample(claims: ExampleToken['claims']): Promise<string> {
  const key = await importJWK(TEST_SIGNING_KEY, 'ES256');
  return new SignJWT({ ...claims, aud: MOCK_SITE, iss: MOCK_ISSUER })
    .setProtectedHeader({ alg: 'ES256', kid: TEST_SIGNING_KEY.kid, typ: 'at+jwt' })
    .sign(key);
}

if (import.meta.url === `file://${process.argv[1]}`) {
  for (const token of EXAMPLE_TOKENS)
    console.log(`${token.operationId} ${token.example}: ${await signExample(token.claims)}`);
}
