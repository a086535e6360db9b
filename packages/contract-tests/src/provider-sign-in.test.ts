// "Sign in with Google" done by us (issue 59, points 2-4) through the client, on PGlite and
// PostgreSQL, against a real OpenID provider started here (oidc-provider, on a loopback port), a
// plain OAuth 2.0 provider shaped like GitHub's, and a forging OpenID provider whose ID tokens the
// tests mint with jose (oauth-peers.ts): provider/start, provider/callback with each of its
// outcomes and refusals, user/identity/link with a linkTicket, provider/tokens, the audit rows and
// the outcome counter; then a search of what the service keeps and says for the secrets it handled.
import type { Problem, UserAccountsClient } from '@user-accounts/client';
import { checkProvider } from '@user-accounts/server/providers/options';
import { setProvider } from '@user-accounts/server/providers/providers';
import { createLocalJWKSet, jwtVerify, SignJWT, UnsecuredJWT } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nowSeconds, totpAt } from './factors-suite.ts';
import { useTarget } from './harness.ts';
import { type Person, signInAt, startOidcProvider, startPeers } from './oauth-peers.ts';
import { pgliteTarget, postgresTarget, type TargetSpec, TEST_METRICS_TOKEN } from './targets.ts';

const CALLBACK = 'https://shop.example.com/auth/callback';
const OP_SECRET = 'op-client-secret-that-no-answer-holds-0001';
const FORGE_SECRET = 'forge-client-secret-that-no-answer-holds-02';
const GH_SECRET = 'github-client-secret-that-no-answer-holds-3';

type Unlinked = Problem & {
  linkTicket: string;
  linkTicketExpiresAt: string;
  identity: { provider: string; subject: string; email: string | null; emailVerified: boolean; name: string | null };
};
type ProviderProblem = Problem & { providerError?: string; providerErrorDescription?: string };

let seq = 0;
const tag = () => `${Date.now().toString(36)}${seq++}`;

function defineSignInSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) {
    describe.skip(`${spec.name}: sign-in with a provider (${spec.skip ?? 'stateless'})`, () => {
      it('skipped', () => {});
    });
    return;
  }

  describe(`${spec.name}: sign-in with a provider`, () => {
    const h = useTarget(spec);
    const people = new Map<string, Person>();
    let op: Awaited<ReturnType<typeof startOidcProvider>>;
    let peers: Awaited<ReturnType<typeof startPeers>>;
    /** Every state, code and provider token the tests saw: none may be kept or said by the service. */
    const secretsSeen: string[] = [];

    beforeAll(async () => {
      peers = await startPeers();
      op = await startOidcProvider(
        [{ client_id: 'op-client', client_secret: OP_SECRET, redirect_uris: [CALLBACK] }],
        people,
      );
    }, 60_000);
    afterAll(async () => {
      await Promise.all([op?.close(), peers?.close()]);
    });

    const newSite = async (
      scopes: ('read' | 'write' | 'verify' | 'export' | 'events')[] = ['read', 'write', 'verify'],
    ) => {
      const site = `signin-${tag()}`;
      const { token } = await h.target.createToken({ site, scopes, label: 'sign-in' });
      return { site, client: h.clientFor(token) };
    };
    /** Sets a provider as `cli provider set` does (providers/). */
    const configure = async (
      site: string,
      which: 'op' | 'forge' | 'github',
      more: Record<string, string | boolean> = {},
    ) => {
      const deps = h.target.deps!();
      const options =
        which === 'op'
          ? { name: 'idp', issuer: op.issuer, clientId: 'op-client', scopes: 'openid,email,profile' }
          : which === 'forge'
            ? { name: 'forge', issuer: peers.issuer, clientId: 'forge-client', scopes: 'openid,email' }
            : {
                name: 'github',
                kind: 'oauth2',
                clientId: 'gh-client',
                authorizationUrl: peers.github.authorization,
                tokenUrl: peers.github.token,
                userinfoUrl: peers.github.userinfo,
                emailsUrl: peers.github.emails,
                userinfoMap: 'subject=/id,email=/email,name=/name',
                scopes: 'read:user,user:email',
              };
      const config = checkProvider({
        site,
        redirectUris: `${CALLBACK},http://localhost:3000/cb`,
        ...options,
        ...more,
      } as never);
      const secret = which === 'op' ? OP_SECRET : which === 'forge' ? FORGE_SECRET : GH_SECRET;
      await setProvider(deps.database.db, config, secret, deps.factorKeys);
      return config.name;
    };
    const start = async (client: UserAccountsClient, provider: string, redirectUri = CALLBACK) => {
      const { data, error, response } = await client.POST('/api/1/provider/start', {
        body: { provider, redirectUri },
      });
      expect(error, JSON.stringify(error)).toBeUndefined();
      expect(response.status).toBe(200);
      const url = new URL(data!.result.authorizationUrl);
      const state = url.searchParams.get('state')!;
      secretsSeen.push(state);
      return { url: url.href, state, nonce: url.searchParams.get('nonce') ?? '', result: data!.result };
    };
    const callback = (
      client: UserAccountsClient,
      callbackUrl: string,
      more: { session?: { userAgent?: string }; formPost?: string } = {},
    ) => {
      const code = new URL(callbackUrl).searchParams.get('code');
      if (code !== null) secretsSeen.push(code);
      return client.POST('/api/1/provider/callback', {
        body: { callbackUrl, ...more },
        headers: { 'X-End-User-IP': '203.0.113.7' },
      });
    };
    /** A whole sign-in at the real provider as `sub`. */
    const signIn = async (client: UserAccountsClient, person: Person, session = true) => {
      people.set(person.sub, person);
      const started = await start(client, 'idp');
      const back = await signInAt(started.url, person.sub, CALLBACK);
      return callback(client, back, session ? { session: { userAgent: 'provider test' } } : {});
    };
    const userCount = async (site: string) => {
      const [row] = await h.target.sql('select count(*)::int as n from users where site = $1', [site]);
      return (row as { n: number }).n;
    };
    /** The forging provider's next ID token, its callback. */
    const forged = async (
      client: UserAccountsClient,
      mint: (claims: Record<string, unknown>, sign: typeof peers.signer) => Promise<string>,
      callbackIss?: string,
    ) => {
      const started = await start(client, 'forge');
      peers.state.mode = {
        kind: 'id_token',
        mint: async (signer, expected) =>
          mint(
            {
              iss: expected.issuer,
              aud: expected.audience,
              sub: `forged-${tag()}`,
              nonce: started.nonce,
              iat: Math.floor(Date.now() / 1000),
              exp: Math.floor(Date.now() / 1000) + 300,
              email: `forged-${tag()}@example.org`,
              email_verified: true,
            },
            signer,
          ),
      };
      const back = new URL(CALLBACK);
      back.searchParams.set('code', `forge-code-${tag()}`);
      back.searchParams.set('state', started.state);
      back.searchParams.set('iss', callbackIss ?? peers.issuer);
      return callback(client, back.href);
    };

    it('signs a new person in end to end (create): 201 with a session whose access token jose verifies; then 200 with amr fed', async () => {
      const { site, client } = await newSite();
      await configure(site, 'op', { onNewPerson: 'create' });
      const person = {
        sub: `ada-${tag()}`,
        email: `ada-${tag()}@example.org`,
        email_verified: true,
        name: 'Ada Lovelace',
      };
      const first = await signIn(client, person);
      expect(first.error, JSON.stringify(first.error)).toBeUndefined();
      expect(first.response.status).toBe(201);
      const created = first.data as unknown as {
        result: { _userId: string; provider: string; status: string; session: { accessToken: string; token: string } };
      };
      expect(created.result).toMatchObject({ provider: 'idp', status: 'user created' });
      const got = await client.GET('/api/1/user/get', { params: { query: { _userId: created.result._userId } } });
      expect(got.data!.result).toMatchObject({ email: person.email, name: 'Ada Lovelace', emailVerified: true });

      const jwks = (await (await fetch(`${h.target.baseUrl}/.well-known/jwks.json`)).json()) as { keys: never[] };
      const verified = await jwtVerify(created.result.session.accessToken, createLocalJWKSet({ keys: jwks.keys }));
      expect(verified.payload).toMatchObject({ sub: created.result._userId, amr: ['fed'], aud: site });

      const again = await signIn(client, person);
      expect(again.response.status).toBe(200);
      expect(again.data!.result).toMatchObject({ _userId: created.result._userId, status: 'identity verified' });
      const checked = await client.POST('/api/1/session/verify', {
        body: { token: again.data!.result.session!.token },
      });
      expect(checked.data!.result).toMatchObject({ _userId: created.result._userId, aal: 1, amr: ['fed'] });

      const audit = await h.target.sql(
        `select operation, status, outcome, provider from audit_log where site = $1 and operation <> 'session_create' order by id`,
        [site],
      );
      expect(audit).toEqual([
        { operation: 'identity_create', status: 201, outcome: 'user created', provider: 'idp' },
        { operation: 'identity_verify', status: 200, outcome: 'identity verified', provider: 'idp' },
      ]);
      if (spec.name.includes('PGlite')) {
        const metrics = await fetch(`${h.target.baseUrl}/metrics`, {
          headers: { authorization: `Bearer ${TEST_METRICS_TOKEN}` },
        });
        const text = await metrics.text();
        expect(text).toMatch(/provider_callbacks_total\{[^}]*provider="idp",outcome="user created"[^}]*\} [1-9]/);
        expect(text).toMatch(/provider_callbacks_total\{[^}]*provider="idp",outcome="identity verified"[^}]*\} [1-9]/);
      }
    });

    it('refuses a new person by default: 409 identity_unlinked with a linkTicket and nothing created; the ticket links once', async () => {
      const { site, client } = await newSite();
      await configure(site, 'op');
      const person = { sub: `bob-${tag()}`, email: `bob-${tag()}@example.org`, email_verified: true, name: 'Bob' };
      const before = await userCount(site);
      const refused = await signIn(client, person);
      expect(refused.response.status).toBe(409);
      const problem = refused.error as Unlinked;
      expect(problem.code).toBe('identity_unlinked');
      expect(problem.identity).toEqual({
        provider: 'idp',
        subject: person.sub,
        email: person.email,
        emailVerified: true,
        name: 'Bob',
      });
      secretsSeen.push(problem.linkTicket);
      expect(await userCount(site)).toBe(before);

      // The person proves an account is theirs (here: the site made it), then the site links.
      const account = await h.createUser({ email: person.email }, client);
      const linked = await client.POST('/api/1/user/identity/link', {
        body: { _userId: account.id, linkTicket: problem.linkTicket },
      });
      expect(linked.error, JSON.stringify(linked.error)).toBeUndefined();
      expect(linked.data!.result.status).toBe('identity linked');
      const twice = await client.POST('/api/1/user/identity/link', {
        body: { _userId: account.id, linkTicket: problem.linkTicket },
      });
      expect(twice.response.status).toBe(422);
      expect((twice.error as Problem).code).toBe('invalid_ticket');
      const both = await client.POST('/api/1/user/identity/link', {
        body: { _userId: account.id, linkTicket: 'x', provider: 'idp', subject: 's' },
      });
      expect(both.response.status).toBe(400);

      const now = await signIn(client, person);
      expect(now.response.status).toBe(200);
      expect(now.data!.result._userId).toBe(account.id);
      const [row] = await h.target.sql(
        `select outcome, provider from audit_log where site = $1 and operation = 'provider_callback'`,
        [site],
      );
      expect(row).toEqual({ outcome: 'identity_unlinked', provider: 'idp' });
    });

    it('never links on an email match, even with create: 409 identity_unlinked, the account untouched', async () => {
      const { site, client } = await newSite();
      await configure(site, 'op', { onNewPerson: 'create' });
      const email = `carol-${tag()}@example.org`;
      const account = await h.createUser({ email }, client);
      const refused = await signIn(client, { sub: `carol-${tag()}`, email, email_verified: true, name: 'Carol' });
      expect(refused.response.status).toBe(409);
      expect((refused.error as Unlinked).code).toBe('identity_unlinked');
      expect((refused.error as Unlinked).detail).toContain('never linked on an email alone');
      const [identities] = await h.target.sql('select count(*)::int as n from user_identities where user_id = $1', [
        account.id,
      ]);
      expect(identities).toEqual({ n: 0 });
    });

    it('refuses a social sign-in into a domain whose organization enforces SSO, new person or linked: 403 sso_required', async () => {
      const { site, client } = await newSite();
      await configure(site, 'op', { onNewPerson: 'create' });
      const org = await client.POST('/api/1/org/create', { body: { name: 'Enforcing' } });
      expect(org.error, JSON.stringify(org.error)).toBeUndefined();
      const orgId = org.data!.result.orgId;
      const domain = `enforced-${tag()}.example`;
      // The organization's verified domain and enforcing connection, as org/domain/verify and
      // org/connection/create leave them (sso.test.ts goes through those).
      await h.target.sql(
        `insert into org_domains (org_id, site, domain, token, verified_at) values ($1, $2, $3, 'token', now())`,
        [orgId, site, domain],
      );
      const [connection] = await h.target.sql(
        `insert into sso_connections (id, site, org_id, kind, enforce, redirect_uris, default_roles, oidc_issuer, oidc_client_id)
         values (gen_random_uuid(), $1, $2, 'oidc', true, '{https://shop.example.com/sso/cb}', '{}', 'https://idp.example', 'c')
         returning id::text as id`,
        [site, orgId],
      );
      const sub = `ada-${tag()}`;
      const created = await signIn(client, { sub, email: `ada@${domain}`, email_verified: true, name: 'Ada' });
      expect(created.response.status, JSON.stringify(created.error)).toBe(403);
      expect(created.error).toMatchObject({ code: 'sso_required', connectionId: connection!.id });
      expect(await userCount(site)).toBe(0);

      const bob = await h.createUser({ email: `bob@${domain}` }, client);
      const bobSub = `bob-${tag()}`;
      const linked = await client.POST('/api/1/user/identity/link', {
        body: { _userId: bob.id, provider: 'idp', subject: bobSub, email: bob.email, emailVerified: true },
      });
      expect(linked.error, JSON.stringify(linked.error)).toBeUndefined();
      const login = await signIn(client, { sub: bobSub, email: bob.email });
      expect(login.error).toMatchObject({ code: 'sso_required', connectionId: connection!.id });
    });

    it('still asks for a second factor (403 with a ticket), and refuses a disabled account (403)', async () => {
      const { site, client } = await newSite();
      await configure(site, 'op', { onNewPerson: 'create' });
      const person = { sub: `dan-${tag()}`, email: `dan-${tag()}@example.org`, email_verified: true, name: 'Dan' };
      const made = await signIn(client, person, false);
      const userId = (made.data as unknown as { result: { _userId: string } }).result._userId;
      const added = (await client.POST('/api/1/user/factor/totp', { body: { _userId: userId } })).data!.result;
      await client.POST('/api/1/user/factor/confirm', {
        body: { _userId: userId, factorId: added.factorId, code: totpAt(added.secret, nowSeconds()) },
      });
      const second = await signIn(client, person);
      expect(second.response.status).toBe(403);
      expect(second.error).toMatchObject({ code: 'second_factor_required', factors: ['totp'] });
      const done = await client.POST('/api/1/user/factor/verify', {
        body: {
          ticket: (second.error as { ticket: string }).ticket,
          code: totpAt(added.secret, nowSeconds() + 30),
          session: {},
        },
      });
      expect(done.data!.result.session).toBeDefined();

      await client.POST('/api/1/user/disable', { body: { _userId: userId } });
      const disabled = await signIn(client, person);
      expect(disabled.response.status).toBe(403);
      expect((disabled.error as Problem).code).toBe('account_disabled');
      // Each 403 has its audit row, naming the provider.
      const refusals = await h.target.sql(
        `select operation, outcome, provider from audit_log where site = $1 and status = 403 order by id`,
        [site],
      );
      expect(refusals).toEqual([
        { operation: 'identity_verify', outcome: 'second_factor_required', provider: 'idp' },
        { operation: 'provider_callback', outcome: 'account_disabled', provider: 'idp' },
      ]);
    });

    it('refuses a state reused, expired, unknown or another site’s with one 422 invalid_state, and a code replayed', async () => {
      const { site, client } = await newSite();
      await configure(site, 'op', { onNewPerson: 'create' });
      const person = { sub: `eve-${tag()}`, email: `eve-${tag()}@example.org`, email_verified: true };
      people.set(person.sub, person);
      const started = await start(client, 'idp');
      const back = await signInAt(started.url, person.sub, CALLBACK);
      expect((await callback(client, back)).response.status).toBe(201);
      const reused = await callback(client, back);
      expect(reused.response.status).toBe(422);
      expect((reused.error as Problem).code).toBe('invalid_state');

      // The code replayed under a fresh state: the provider refuses it.
      const fresh = await start(client, 'idp');
      const replay = new URL(back);
      replay.searchParams.set('state', fresh.state);
      const replayed = await callback(client, replay.href);
      expect(replayed.response.status).toBe(422);
      expect((replayed.error as ProviderProblem).code).toBe('provider_error');
      expect((replayed.error as ProviderProblem).providerError).toBe('invalid_grant');

      const late = await start(client, 'idp');
      await h.target.sql(`update provider_states set expires_at = now() - interval '1 second' where site = $1`, [site]);
      const expired = await callback(client, `${CALLBACK}?code=x&state=${late.state}`);
      expect((expired.error as Problem).code).toBe('invalid_state');
      const unknown = await callback(client, `${CALLBACK}?code=x&state=no-such-state`);
      expect((unknown.error as Problem).code).toBe('invalid_state');

      const other = await newSite();
      await configure(other.site, 'op');
      const theirs = await start(other.client, 'idp');
      const crossed = await callback(client, `${CALLBACK}?code=x&state=${theirs.state}`);
      expect(crossed.response.status).toBe(422);
      expect(crossed.error).toMatchObject({ code: 'invalid_state', detail: (expired.error as Problem).detail });
      // Not spent by the other site's attempt: still its own.
      const [kept] = await h.target.sql('select count(*)::int as n from provider_states where site = $1', [other.site]);
      expect(kept).toEqual({ n: 1 });
    });

    it('refuses a redirect URI not on the list (400), an unknown provider (404), and names the provider’s error (access_denied)', async () => {
      const { site, client } = await newSite();
      await configure(site, 'op');
      const wrong = await client.POST('/api/1/provider/start', {
        body: { provider: 'idp', redirectUri: 'https://shop.example.com/auth/callback/../evil' },
      });
      expect(wrong.response.status).toBe(400);
      expect((wrong.error as Problem).errors?.[0]?.pointer).toBe('/redirectUri');
      const prefix = await client.POST('/api/1/provider/start', {
        body: { provider: 'idp', redirectUri: `${CALLBACK}x` },
      });
      expect(prefix.response.status).toBe(400);
      const none = await client.POST('/api/1/provider/start', { body: { provider: 'nobody', redirectUri: CALLBACK } });
      expect(none.response.status).toBe(404);
      expect((none.error as Problem).code).toBe('provider_not_found');

      const started = await start(client, 'idp');
      const denied = await callback(
        client,
        `${CALLBACK}?error=access_denied&error_description=${encodeURIComponent('The user said no.')}&state=${started.state}&iss=${encodeURIComponent(op.issuer)}`,
      );
      expect(denied.response.status).toBe(422);
      expect(denied.error).toMatchObject({
        code: 'provider_error',
        providerError: 'access_denied',
        providerErrorDescription: 'The user said no.',
      });
    });

    it('refuses every forged ID token and an iss of another provider, creating nothing', async () => {
      const { site, client } = await newSite();
      await configure(site, 'forge', { onNewPerson: 'create' });
      const before = await userCount(site);
      const rs = (claims: Record<string, unknown>, s: typeof peers.signer) => s.sign(claims);
      const cases: [string, Parameters<typeof forged>[1], string?][] = [
        ['a wrong nonce', (c, s) => rs({ ...c, nonce: 'not-the-nonce' }, s)],
        ['a wrong issuer', (c, s) => rs({ ...c, iss: op.issuer }, s)],
        ['a wrong audience', (c, s) => rs({ ...c, aud: 'someone-else' }, s)],
        [
          'an expired token',
          (c, s) =>
            rs({ ...c, exp: Math.floor(Date.now() / 1000) - 3600, iat: Math.floor(Date.now() / 1000) - 7200 }, s),
        ],
        ['alg none', async (c) => new UnsecuredJWT(c).encode()],
        [
          'HS256 keyed by the public key',
          async (c, s) =>
            new SignJWT(c)
              .setProtectedHeader({ alg: 'HS256', kid: 'forge-1' })
              .sign(new TextEncoder().encode(JSON.stringify(s.publicJwk))),
        ],
        [
          'another provider’s signature',
          async (c) => {
            const { generateKeyPair } = await import('jose');
            const { privateKey } = await generateKeyPair('RS256');
            return new SignJWT(c).setProtectedHeader({ alg: 'RS256', kid: 'forge-1' }).sign(privateKey);
          },
        ],
        ['an iss parameter of another provider (mix-up)', rs, 'https://accounts.google.com'],
      ];
      for (const [what, mint, iss] of cases) {
        const answer = await forged(client, mint, iss);
        expect(answer.response.status, what).toBe(422);
        const problem = answer.error as ProviderProblem;
        expect(problem.code, what).toBe('provider_error');
        expect(problem.providerError, what).toBe(iss === undefined ? 'invalid_id_token' : 'mix_up');
      }
      // The forge itself, well signed: accepted (the cases above fail for their one fault).
      const good = await forged(client, rs);
      expect(good.response.status, JSON.stringify(good.error)).toBe(201);
      expect(await userCount(site)).toBe(before + 1);
    });

    it('answers 502 when the provider is down and 504 when it is slow, within the deadline, never a 500', async () => {
      const { site, client } = await newSite();
      await configure(site, 'forge', { onNewPerson: 'create' });
      const started = await start(client, 'forge');
      peers.state.mode = { kind: 'down' };
      const down = await callback(
        client,
        `${CALLBACK}?code=c&state=${started.state}&iss=${encodeURIComponent(peers.issuer)}`,
      );
      expect(down.response.status).toBe(502);
      expect((down.error as Problem).code).toBe('provider_unavailable');

      const deps = h.target.deps!();
      const was = deps.requestTimeoutMs;
      deps.requestTimeoutMs = 1_500;
      try {
        const slowStart = await start(client, 'forge');
        peers.state.mode = { kind: 'slow', ms: 5_000 };
        const t0 = performance.now();
        const slow = await callback(
          client,
          `${CALLBACK}?code=c&state=${slowStart.state}&iss=${encodeURIComponent(peers.issuer)}`,
        );
        expect(slow.response.status).toBe(504);
        expect((slow.error as Problem).code).toBe('provider_timeout');
        expect(performance.now() - t0).toBeLessThan(1_500);
      } finally {
        deps.requestTimeoutMs = was;
      }

      // A provider whose discovery document cannot be read: start answers 502.
      await configure(site, 'op', { name: 'gone', issuer: 'http://127.0.0.1:9/' });
      const gone = await client.POST('/api/1/provider/start', { body: { provider: 'gone', redirectUri: CALLBACK } });
      expect(gone.response.status).toBe(502);
      expect((gone.error as Problem).code).toBe('provider_unavailable');
    });

    it('signs in with a GitHub-shaped OAuth 2.0 provider: its verified primary email, never the public one', async () => {
      const { site, client } = await newSite();
      await configure(site, 'github', { onNewPerson: 'create' });
      const started = await start(client, 'github');
      expect(new URL(started.url).searchParams.get('code_challenge_method')).toBe('S256');
      const code = `gh-${tag()}`;
      const id = 583_000 + seq;
      peers.state.githubCodes.set(code, {
        id,
        login: 'octo',
        name: 'The Octocat',
        email: `public-${tag()}@example.org`,
        emails: [
          { email: `old-${tag()}@example.org`, primary: false, verified: true },
          { email: `octo-${tag()}@example.org`, primary: true, verified: true },
        ],
      });
      const primary = peers.state.githubCodes.get(code)!.emails[1]!.email;
      const done = await callback(client, `${CALLBACK}?code=${code}&state=${started.state}`);
      expect(done.response.status, JSON.stringify(done.error)).toBe(201);
      const userId = (done.data as unknown as { result: { _userId: string } }).result._userId;
      const got = await client.GET('/api/1/user/get', { params: { query: { _userId: userId } } });
      expect(got.data!.result).toMatchObject({ email: primary, name: 'The Octocat', emailVerified: true });
      const [identity] = await h.target.sql('select provider, subject from user_identities where user_id = $1', [
        userId,
      ]);
      expect(identity).toEqual({ provider: 'github', subject: String(id) });
    });

    it('takes a form_post callback with Apple’s first-login name, and keeps tokens only with --keep-tokens (provider/tokens, scope export)', async () => {
      const { site, client } = await newSite();
      await configure(site, 'forge', { onNewPerson: 'create', keepTokens: true });
      const started = await start(client, 'forge');
      peers.state.mode = {
        kind: 'id_token',
        mint: (s, expected) =>
          s.sign({
            iss: expected.issuer,
            aud: expected.audience,
            sub: `apple-${tag()}`,
            nonce: started.nonce,
            iat: Math.floor(Date.now() / 1000),
            exp: Math.floor(Date.now() / 1000) + 300,
            email: `apple-${tag()}@privaterelay.example.org`,
            email_verified: 'true',
          }),
      };
      const formPost = new URLSearchParams({
        code: `apple-code-${tag()}`,
        state: started.state,
        iss: peers.issuer,
        user: JSON.stringify({ name: { firstName: 'Grace', lastName: 'Hopper' } }),
      }).toString();
      const done = await callback(client, CALLBACK, { formPost });
      expect(done.response.status, JSON.stringify(done.error)).toBe(201);
      const userId = (done.data as unknown as { result: { _userId: string } }).result._userId;
      const got = await client.GET('/api/1/user/get', { params: { query: { _userId: userId } } });
      expect(got.data!.result).toMatchObject({ name: 'Grace Hopper', emailVerified: true });

      const exporter = await h.target.createToken({ site, scopes: ['export'], label: 'tokens' });
      const read = await h.clientFor(exporter.token).GET('/api/1/provider/tokens', {
        params: { query: { _userId: userId, provider: 'forge' } },
      });
      expect(read.error, JSON.stringify(read.error)).toBeUndefined();
      expect(read.data!.result.accessToken).toBe(peers.state.tokensIssued.at(-2));
      expect(read.data!.result.refreshToken).toBe(peers.state.tokensIssued.at(-1));
      const [row] = await h.target.sql('select sealed from provider_tokens where user_id = $1', [userId]);
      expect(JSON.stringify(row)).not.toContain(read.data!.result.accessToken);
      const scoped = await client.GET('/api/1/provider/tokens', {
        params: { query: { _userId: userId, provider: 'forge' } },
      });
      expect(scoped.response.status).toBe(403);

      // Without --keep-tokens: none kept.
      const plain = await newSite();
      await configure(plain.site, 'forge', { onNewPerson: 'create' });
      const answer = await forged(plain.client, (c, s) => s.sign(c));
      expect(answer.response.status).toBe(201);
      const [kept] = await h.target.sql('select count(*)::int as n from provider_tokens where site = $1', [plain.site]);
      expect(kept).toEqual({ n: 0 });
    });

    it('emits user.identity_linked naming the provider when a callback creates or a linkTicket links; one audit row an outcome, naming the provider, holding no code, token or state', async () => {
      const { site, client } = await newSite(['read', 'write', 'verify', 'events']);
      await configure(site, 'op', { onNewPerson: 'create' });
      const said: string[] = [];
      // The account's own events (a login's session.created aside).
      const feed = async (userId: string) =>
        (
          await client.GET('/api/1/events', { params: { query: { subject: userId, limit: 100 } } })
        ).data!.result.events.filter((e) => e.type.startsWith('user.'));

      // Created at a first sign-in: user.created, then user.identity_linked with the provider's name.
      const person = { sub: `fay-${tag()}`, email: `fay-${tag()}@example.org`, email_verified: true, name: 'Fay' };
      const made = await signIn(client, person);
      expect(made.response.status).toBe(201);
      const createdBody = made.data as unknown as {
        result: { _userId: string; session: { token: string; accessToken: string } };
      };
      const userId = createdBody.result._userId;
      said.push(createdBody.result.session.token, createdBody.result.session.accessToken);
      const events = await feed(userId);
      expect(events.map((e) => e.type)).toEqual(['user.created', 'user.identity_linked']);
      expect(events[1]!.data).toEqual({ _userId: userId, provider: 'idp', subject: person.sub });
      // A login links nothing: no user.identity_linked.
      const again = await signIn(client, person);
      expect(again.response.status).toBe(200);
      said.push(again.data!.result.session!.token, again.data!.result.session!.accessToken);
      expect((await feed(userId)).length).toBe(2);

      // An email an account holds: 409 with a link ticket, no event; the ticket's link is one.
      const email = `gil-${tag()}@example.org`;
      const account = await h.createUser({ email }, client);
      const sub = `gil-${tag()}`;
      const refused = await signIn(client, { sub, email, email_verified: true, name: 'Gil' });
      expect(refused.response.status).toBe(409);
      const ticket = (refused.error as Unlinked).linkTicket;
      said.push(ticket);
      expect((await feed(account.id)).map((e) => e.type)).toEqual(['user.created']);
      const linked = await client.POST('/api/1/user/identity/link', {
        body: { _userId: account.id, linkTicket: ticket },
      });
      expect(linked.response.status).toBe(200);
      const after = await feed(account.id);
      expect(after.map((e) => e.type)).toEqual(['user.created', 'user.identity_linked']);
      expect(after[1]!.data).toEqual({ _userId: account.id, provider: 'idp', subject: sub });

      // The refusals: a state used (422 invalid_state, before any provider is known) and the provider's error.
      const used = await callback(client, `${CALLBACK}?code=x&state=no-such-state-${tag()}`);
      expect((used.error as Problem).code).toBe('invalid_state');
      const denied = await start(client, 'idp');
      const error = await callback(
        client,
        `${CALLBACK}?error=access_denied&state=${denied.state}&iss=${encodeURIComponent(op.issuer)}`,
      );
      expect((error.error as Problem).code).toBe('provider_error');

      const rows = await h.target.sql(
        `select * from audit_log where site = $1 and operation in ('provider_callback', 'identity_create', 'identity_verify', 'identity_link') order by id`,
        [site],
      );
      expect(rows.map((r) => [r.operation, r.status, r.outcome, r.provider])).toEqual([
        ['identity_create', 201, 'user created', 'idp'],
        ['identity_verify', 200, 'identity verified', 'idp'],
        ['provider_callback', 409, 'identity_unlinked', 'idp'],
        ['identity_link', 200, 'identity linked', null],
        ['provider_callback', 422, 'invalid_state', null],
        ['provider_callback', 422, 'provider_error', 'idp'],
      ]);
      const text = JSON.stringify(rows) + JSON.stringify(await feed(userId)) + JSON.stringify(after);
      const secrets = [...secretsSeen, ...peers.state.codesSeen, ...peers.state.tokensIssued, ...said, OP_SECRET];
      expect(secrets.filter((s) => s.length >= 8 && text.includes(s))).toEqual([]);
    });

    it('keeps and says none of the client secrets, codes, states and provider tokens it handled', async () => {
      const tables = (await h.target.sql(
        `select table_name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`,
      )) as { table_name: string }[];
      let everything = '';
      for (const { table_name } of tables) {
        const rows = await h.target.sql(`select * from "${table_name}"`);
        everything += JSON.stringify(rows);
      }
      const exporter = await h.target.createToken({ scopes: ['export'], label: 'leak search' });
      const exported = await (
        await fetch(`${h.target.baseUrl}/api/1/user/export`, { headers: { authorization: `Bearer ${exporter.token}` } })
      ).text();
      const logs = h.target.logs.join('\n');
      const kept = [
        OP_SECRET,
        FORGE_SECRET,
        GH_SECRET,
        ...peers.state.tokensIssued,
        ...secretsSeen,
        ...peers.state.codesSeen,
      ];
      expect(kept.length).toBeGreaterThan(30);
      const long = kept.filter((s) => s.length >= 8);
      expect(
        long.filter((s) => everything.includes(s)),
        'in the database',
      ).toEqual([]);
      expect(
        long.filter((s) => logs.includes(s)),
        'in the logs',
      ).toEqual([]);
      expect(
        long.filter((s) => exported.includes(s)),
        'in the export',
      ).toEqual([]);
      // The answers: never a client secret or a code (a state is in the site's own authorizationUrl,
      // a kept token in provider/tokens' answer, a linkTicket in its 409: each where it belongs).
      const answers = h.bodies.join('\n');
      expect(
        [OP_SECRET, FORGE_SECRET, GH_SECRET, ...peers.state.codesSeen].filter(
          (s) => s.length >= 8 && answers.includes(s),
        ),
      ).toEqual([]);
    });
  });
}

defineSignInSuite(pgliteTarget);
defineSignInSuite(await postgresTarget());
