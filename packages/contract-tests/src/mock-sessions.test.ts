// The mock signs people in (issue 64, point 3): a login that asks for a session is answered with
// one, whose access token `verifyAccessToken` accepts against the mock's own JWKS (the test key of
// example-tokens.ts); every example token of the spec is one of that table, and the examples are
// dated in 2099, so that none has expired when an integrator reads it.
import { readFileSync } from 'node:fs';
import { verifyAccessToken } from '@user-accounts/client';
import { createLocalJWKSet, decodeProtectedHeader, jwtVerify } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { EXAMPLE_TOKENS, MOCK_ISSUER, MOCK_SITE } from './example-tokens.ts';
import { mockTarget, type Target } from './targets.ts';

const spec = parse(readFileSync(new URL('../../../spec/openapi.yaml', import.meta.url), 'utf8'));
let mock: Target;
beforeAll(async () => {
  mock = await mockTarget().start();
});
afterAll(async () => {
  await mock?.close();
});

const LOGINS: Record<string, { path: string; body: Record<string, unknown> }> = {
  verifyUser: {
    path: '/api/1/user/verify',
    body: { email: 'Ada.Lovelace@example.com', password: 'any password at all' },
  },
  verifyIdentity: {
    path: '/api/1/user/identity/verify',
    body: { provider: 'google', subject: '110248495921238986420' },
  },
  verifySecondFactor: { path: '/api/1/user/factor/verify', body: { ticket: 'x'.repeat(43), code: '123456' } },
  redeemTicket: {
    path: '/api/1/user/ticket/redeem',
    body: { ticket: '7pLx2nQ9vB4kR8sT1wY6zC3mF5hJ0dG2aE9uK4iN7oS', purpose: 'login' },
  },
  verifyPasskey: {
    path: '/api/1/user/passkey/verify',
    body: {
      response: {
        id: 'cDtq4oZg0wcrYdOLqGqg3w',
        rawId: 'cDtq4oZg0wcrYdOLqGqg3w',
        type: 'public-key',
        clientExtensionResults: {},
        response: { clientDataJSON: 'e30', authenticatorData: 'AA', signature: 'AA' },
      },
    },
  },
};

async function post(path: string, body: unknown) {
  const response = await fetch(`${mock.baseUrl}${path}`, {
    method: 'POST',
    headers: { Authorization: mock.token, 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: response.status, body: (await response.json()) as any };
}

describe('the mock signs people in', () => {
  it.each(Object.entries(LOGINS))(
    '%s with "session": {} answers a session whose access token verifies',
    async (_, login) => {
      const { status, body } = await post(login.path, { ...login.body, session: {} });
      expect(status).toBe(200);
      const { session } = body.result;
      expect(session.token).toMatch(/^uas_/);
      const claims = await verifyAccessToken(session.accessToken, {
        jwksUrl: `${mock.baseUrl}/.well-known/jwks.json`,
        issuer: MOCK_ISSUER,
        site: MOCK_SITE,
      });
      expect(claims.sub).toBe(body.result._userId);
      expect(claims.sid).toBe(session.sessionId);
      expect(new Date(claims.exp * 1000).toISOString()).toBe(session.accessTokenExpiresAt);
    },
  );

  it.each(Object.entries(LOGINS))('%s without session answers none', async (_, login) => {
    const { status, body } = await post(login.path, login.body);
    expect(status).toBe(200);
    expect(body.result.session).toBeUndefined();
  });

  it("the getting-started walk's login, session check and logout run against the mock", async () => {
    const login = await post('/api/1/user/verify', {
      email: 'grace@example.com',
      password: 'a long passphrase',
      session: { userAgent: 'getting-started' },
    });
    const who = await post('/api/1/session/verify', { token: login.body.result.session.token });
    expect(who.status).toBe(200);
    expect(who.body.result.sessionId).toBe(login.body.result.session.sessionId);
    expect(who.body.result._userId).toBe(login.body.result._userId);
    const out = await post('/api/1/session/revoke', { sessionId: login.body.result.session.sessionId });
    expect(out.status).toBe(200);
  });
});

/** Every value of the spec's examples, with the operation and example name it is under. */
function* exampleValues(): Generator<{ where: string; operationId?: string; example?: string; value: unknown }> {
  for (const [path, item] of Object.entries<any>(spec.paths)) {
    for (const [method, op] of Object.entries<any>(item)) {
      if (typeof op !== 'object' || op === null) continue;
      const bodies = [op.requestBody, ...Object.values<any>(op.responses ?? {})];
      for (const body of bodies) {
        for (const media of Object.values<any>(body?.content ?? {})) {
          for (const [name, example] of Object.entries<any>(media.examples ?? {})) {
            yield {
              where: `${method} ${path} ${name}`,
              operationId: op.operationId,
              example: name,
              value: example.value,
            };
          }
        }
      }
    }
  }
  for (const [name, response] of Object.entries<any>(spec.components.responses ?? {})) {
    for (const media of Object.values<any>(response.content ?? {}))
      for (const [example, value] of Object.entries<any>(media.examples ?? {}))
        yield { where: `response ${name} ${example}`, value: value.value };
  }
}

function* leaves(value: unknown, key = ''): Generator<{ key: string; value: unknown }> {
  if (Array.isArray(value)) for (const item of value) yield* leaves(item, key);
  else if (value !== null && typeof value === 'object') for (const [k, v] of Object.entries(value)) yield* leaves(v, k);
  else yield { key, value };
}

/** The access tokens of the sessions in an example (a provider's own tokens, `provider/tokens`, are not ours). */
function* sessionTokens(value: unknown, inSession = false): Generator<{ value: string }> {
  if (Array.isArray(value)) for (const item of value) yield* sessionTokens(item, inSession);
  else if (value !== null && typeof value === 'object')
    for (const [k, v] of Object.entries(value)) {
      if (inSession && k === 'accessToken' && typeof v === 'string') yield { value: v };
      else yield* sessionTokens(v, k === 'session');
    }
}

describe("the spec's examples", () => {
  const jwks =
    spec.paths['/.well-known/jwks.json'].get.responses['200'].content['application/json'].examples.keys.value;

  it('every access token is a token of the table, signed by the JWKS example, with its claims', async () => {
    const found: string[] = [];
    for (const { where, operationId, example, value } of exampleValues()) {
      for (const leaf of sessionTokens(value)) {
        found.push(`${operationId} ${example}`);
        const row = EXAMPLE_TOKENS.find((t) => t.operationId === operationId && t.example === example);
        expect(row, `${where}: its token is in example-tokens.ts`).toBeDefined();
        expect(decodeProtectedHeader(leaf.value)).toEqual({ alg: 'ES256', kid: jwks.keys[0].kid, typ: 'at+jwt' });
        const { payload } = await jwtVerify(leaf.value, createLocalJWKSet(jwks), {
          issuer: MOCK_ISSUER,
          audience: MOCK_SITE,
          typ: 'at+jwt',
        });
        expect(payload, where).toEqual({ ...row!.claims, iss: MOCK_ISSUER, aud: MOCK_SITE });
      }
    }
    expect(found.sort()).toEqual(EXAMPLE_TOKENS.map((t) => `${t.operationId} ${t.example}`).sort());
  });

  it('every time is in 2099 (no example ticket, session or invitation has expired)', () => {
    const early: string[] = [];
    for (const { where, value } of exampleValues())
      for (const leaf of leaves(value))
        if (typeof leaf.value === 'string' && /^\d{4}-\d\d-\d\dT/.test(leaf.value) && !leaf.value.startsWith('2099'))
          early.push(`${where}: ${leaf.key} ${leaf.value}`);
    expect(early).toEqual([]);
  });
});
