// Passkeys through the client (issue 29, point 3), with a software authenticator of the tests'
// own (webauthn/soft-authenticator.ts): registration and login, the login by email, by id and
// discoverable, a passkey as the second step of a password login, and every refusal the issue
// names (wrong origin or RP id, a reused challenge, a counter that goes back, a bad signature,
// another site's credential, no relying party). Each test works in a site of its own, whose
// relying party is set as `cli site set --rp-id --origins` sets it. Server targets only.
import { describe, expect, it } from 'vitest';
import { useTarget } from './harness.ts';
import type { TargetSpec } from './targets.ts';
import { SoftAuthenticator } from './webauthn/soft-authenticator.ts';

const ORIGIN = 'http://localhost:5173';

export function definePasskeysSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: passkeys`, () => {
    const h = useTarget(spec);
    let sites = 0;
    const newSite = async (rp: { id: string; origins: string[] } | null = { id: 'localhost', origins: [ORIGIN] }) => {
      const site = `passkeys-${Date.now().toString(36)}-${sites++}`;
      const { token } = await h.target.createToken({ site, scopes: ['read', 'write', 'verify'], label: 'passkeys' });
      if (rp !== null)
        await h.target.sql(
          `insert into site_settings (site, rp_id, rp_name, rp_origins) values ($1, $2, 'Example', $3::jsonb)
           on conflict (site) do update set rp_id = excluded.rp_id, rp_origins = excluded.rp_origins`,
          [site, rp.id, JSON.stringify(rp.origins)],
        );
      return { site, client: h.clientFor(token) };
    };
    type Client = Awaited<ReturnType<typeof newSite>>['client'];

    const registrationOptions = async (client: Client, userId: string) => {
      const { data, response } = await client.POST('/api/1/user/factor/passkey/options', {
        body: { _userId: userId },
      });
      expect(response.status).toBe(200);
      return data!.result.options;
    };
    type Registration = ReturnType<SoftAuthenticator['register']>;
    const register = (client: Client, userId: string, response: Registration, label?: string) =>
      client.POST('/api/1/user/factor/passkey', {
        body: { _userId: userId, response, ...(label === undefined ? {} : { label }) },
      });
    /** An account with a registered passkey, and the authenticator holding it. */
    const withPasskey = async (client: Client, authenticator = new SoftAuthenticator(ORIGIN)) => {
      const user = await h.createUser({}, client);
      const registered = await register(
        client,
        user.id,
        authenticator.register(await registrationOptions(client, user.id)),
      );
      expect(registered.response.status).toBe(201);
      return { ...user, authenticator, factorId: registered.data!.result.factorId };
    };
    const loginOptions = async (client: Client, body: { email?: string; _userId?: string } = {}) => {
      const { data, response } = await client.POST('/api/1/user/passkey/options', { body });
      expect(response.status).toBe(200);
      return data!.result.options;
    };
    type Assertion = ReturnType<SoftAuthenticator['assert']>;
    const login = (client: Client, response: Assertion) =>
      client.POST('/api/1/user/passkey/verify', { body: { response } });

    it('registers a passkey as an enabled factor with the first recovery codes, and logs in with it by email', async () => {
      const { client } = await newSite();
      const user = await h.createUser({}, client);
      const options = await registrationOptions(client, user.id);
      expect(options).toMatchObject({
        rp: { id: 'localhost', name: 'Example' },
        user: { name: user.email },
        attestation: 'none',
        excludeCredentials: [],
      });
      const authenticator = new SoftAuthenticator(ORIGIN);
      const { data, response } = await register(client, user.id, authenticator.register(options), 'Laptop');
      expect(response.status).toBe(201);
      expect(data!.result).toMatchObject({ factorId: expect.any(String), status: 'factor enabled' });
      expect(data!.result.recoveryCodes).toHaveLength(10);
      const listed = (await client.GET('/api/1/user/factor/list', { params: { query: { _userId: user.id } } })).data!;
      expect(listed.result.factors).toEqual([
        {
          factorId: data!.result.factorId,
          type: 'passkey',
          label: 'Laptop',
          createdAt: expect.any(String),
          lastUsedAt: null,
        },
      ]);
      // The next registration excludes it, so that one authenticator does not register twice.
      const again = await registrationOptions(client, user.id);
      expect(again.excludeCredentials.map((c) => c.id)).toEqual([[...authenticator.credentials.keys()][0]]);

      const request = await loginOptions(client, { email: user.email.toUpperCase() });
      expect(request.rpId).toBe('localhost');
      expect(request.allowCredentials.map((c) => c.id)).toEqual([[...authenticator.credentials.keys()][0]]);
      const verified = await login(client, authenticator.assert(request));
      expect(verified.response.status).toBe(200);
      expect(verified.data?.result).toEqual({ _userId: user.id, status: 'passkey verified' });
      const after = (await client.GET('/api/1/user/factor/list', { params: { query: { _userId: user.id } } })).data!;
      expect(after.result.factors[0]!.lastUsedAt).toEqual(expect.any(String));
    });

    it('logs in without naming the account (a discoverable credential), and by _userId', async () => {
      const { client } = await newSite();
      const user = await withPasskey(client);
      const discoverable = await loginOptions(client);
      expect(discoverable.allowCredentials).toEqual([]);
      const done = await login(client, user.authenticator.assert(discoverable));
      expect(done.data?.result).toEqual({ _userId: user.id, status: 'passkey verified' });
      const byId = await login(client, user.authenticator.assert(await loginOptions(client, { _userId: user.id })));
      expect(byId.data?.result._userId).toBe(user.id);
      const ghost = await client.POST('/api/1/user/passkey/options', {
        body: { _userId: '0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b' },
      });
      expect(ghost.response.status).toBe(404);
    });

    it('tells nothing of an unknown email: decoys of real shapes and counts, the same each time (issue 41, F6)', async () => {
      const { client } = await newSite();
      const user = await withPasskey(client);
      const unknown = h.uniqueEmail('nobody');
      const first = await loginOptions(client, { email: unknown });
      const second = await loginOptions(client, { email: unknown.toUpperCase() });
      expect(second.allowCredentials).toEqual(first.allowCredentials);
      const known = await loginOptions(client, { email: user.email });
      expect(Object.keys(first).sort()).toEqual(Object.keys(known).sort());
      expect(first.allowCredentials[0]!.id).not.toBe(known.allowCredentials[0]!.id);
      // Across emails the decoys vary as real accounts' passkeys do: one to three, ids of several
      // lengths, transports of several kinds or none; never the one 16-byte id with one shape.
      const decoys = await Promise.all(
        Array.from({ length: 40 }, (_, i) => loginOptions(client, { email: h.uniqueEmail(`nobody${i}`) })),
      );
      const counts = new Set(decoys.map((o) => o.allowCredentials.length));
      const all = decoys.flatMap((o) => o.allowCredentials);
      expect([...counts].every((n) => n >= 1 && n <= 3)).toBe(true);
      expect(counts.size).toBeGreaterThan(1);
      expect(new Set(all.map((c) => Buffer.from(c.id, 'base64url').length)).size).toBeGreaterThan(2);
      expect(new Set(all.map((c) => JSON.stringify(c.transports ?? null))).size).toBeGreaterThan(2);
      for (const credential of all) {
        expect(credential.type).toBe('public-key');
        expect(Object.keys(credential).every((k) => ['id', 'type', 'transports'].includes(k))).toBe(true);
      }
      // An account without a passkey looks the same as no account.
      const plain = await h.createUser({}, client);
      expect((await loginOptions(client, { email: plain.email })).allowCredentials.length).toBeGreaterThan(0);
      // A passkey answering options asked for another email is refused.
      const refused = await login(
        client,
        user.authenticator.assert(first, { credentialId: user.authenticator.credentials.keys().next().value }),
      );
      expect(refused.response.status).toBe(422);
      expect(refused.error?.code).toBe('invalid_credentials');
    });

    it('asks a passkey alone for user verification; as a second factor, a passkey without it is fine (issue 41, F5)', async () => {
      const { client } = await newSite();
      const user = await withPasskey(client);
      const withoutUv = await login(
        client,
        user.authenticator.assert(await loginOptions(client, { email: user.email }), { noUserVerification: true }),
      );
      expect(withoutUv.response.status).toBe(422);
      expect(withoutUv.error?.code).toBe('user_verification_required');
      expect(withoutUv.error?.detail).toContain('user verification');
      // Discoverable, too.
      const discoverable = await login(
        client,
        user.authenticator.assert(await loginOptions(client), { noUserVerification: true }),
      );
      expect(discoverable.error?.code).toBe('user_verification_required');
      // With it, the same passkey logs in (the refused answers moved nothing on).
      const withUv = await login(client, user.authenticator.assert(await loginOptions(client, { email: user.email })));
      expect(withUv.response.status).toBe(200);
      // After the password, the same authenticator without user verification completes the login.
      const first = await client.POST('/api/1/user/verify', { body: { email: user.email, password: user.password } });
      const ticket = (first.error as { ticket: string }).ticket;
      const second = await client.POST('/api/1/user/factor/verify', {
        body: {
          ticket,
          passkey: user.authenticator.assert(await loginOptions(client, { _userId: user.id }), {
            noUserVerification: true,
          }),
        } as never,
      });
      expect(second.response.status).toBe(200);
      expect(second.data?.result).toEqual({ _userId: user.id, status: 'second factor verified' });
    });

    it('refuses a reused challenge, at registration and at login', async () => {
      const { client } = await newSite();
      const user = await h.createUser({}, client);
      const authenticator = new SoftAuthenticator(ORIGIN);
      const options = await registrationOptions(client, user.id);
      expect((await register(client, user.id, authenticator.register(options))).response.status).toBe(201);
      const twice = await register(client, user.id, authenticator.register(options));
      expect(twice.response.status).toBe(422);
      expect(twice.error?.code).toBe('invalid_credentials');

      const request = await loginOptions(client, { email: user.email });
      expect((await login(client, authenticator.assert(request))).response.status).toBe(200);
      const replay = await login(client, authenticator.assert(request));
      expect(replay.response.status).toBe(422);
      expect(replay.error?.code).toBe('invalid_credentials');
      // A registration's challenge is no login's.
      const registering = await registrationOptions(client, user.id);
      const crossed = await login(client, authenticator.assert({ ...request, challenge: registering.challenge }));
      expect(crossed.error?.code).toBe('invalid_credentials');
      // A challenge the server never gave.
      const made = await login(client, authenticator.assert({ ...request, challenge: 'bm90LW91cnM' }));
      expect(made.error?.code).toBe('invalid_credentials');
    });

    it('refuses another origin and another RP id, at registration and at login; a wrong answer spends its challenge', async () => {
      const { client } = await newSite();
      const user = await h.createUser({}, client);
      const authenticator = new SoftAuthenticator(ORIGIN);
      for (const tamper of [
        { origin: 'http://localhost:6666' },
        { origin: 'https://evil.example' },
        { rpId: 'evil.example' },
      ]) {
        const options = await registrationOptions(client, user.id);
        const refused = await register(client, user.id, authenticator.register(options, tamper));
        expect(refused.response.status, JSON.stringify(tamper)).toBe(422);
        expect(refused.error?.code).toBe('invalid_credentials');
        // The challenge is spent: the honest answer to it comes too late.
        const late = await register(client, user.id, authenticator.register(options));
        expect(late.response.status).toBe(422);
      }
      const listed = (await client.GET('/api/1/user/factor/list', { params: { query: { _userId: user.id } } })).data!;
      expect(listed.result.factors).toEqual([]);

      const registered = await withPasskey(client);
      for (const tamper of [{ origin: 'http://localhost:6666' }, { rpId: 'evil.example' }, { badSignature: true }]) {
        const refused = await login(client, registered.authenticator.assert(await loginOptions(client), tamper));
        expect(refused.response.status, JSON.stringify(tamper)).toBe(422);
        expect(refused.error?.code).toBe('invalid_credentials');
      }
      // The honest answer to fresh options still works.
      expect((await login(client, registered.authenticator.assert(await loginOptions(client)))).response.status).toBe(
        200,
      );
    });

    it('takes a challenge once under concurrency: of the same answer sent twice at once, one logs in', async () => {
      const { client } = await newSite();
      const user = await withPasskey(client);
      // Counter 0, as authenticators that keep none (synced passkeys) send: the challenge alone stops the replay.
      const answer = user.authenticator.assert(await loginOptions(client), { counter: 0 });
      const both = await Promise.all([login(client, answer), login(client, answer)]);
      expect(both.map((r) => r.response.status).sort()).toEqual([200, 422]);
    });

    it('checks the sign counter: a counter that does not go up (a cloned key) is refused', async () => {
      const { client } = await newSite();
      const user = await withPasskey(client);
      expect(
        (await login(client, user.authenticator.assert(await loginOptions(client), { counter: 5 }))).response.status,
      ).toBe(200);
      for (const counter of [5, 3]) {
        const refused = await login(client, user.authenticator.assert(await loginOptions(client), { counter }));
        expect(refused.response.status, `counter ${counter}`).toBe(422);
        expect(refused.error?.code).toBe('invalid_credentials');
      }
      expect(
        (await login(client, user.authenticator.assert(await loginOptions(client), { counter: 6 }))).response.status,
      ).toBe(200);
    });

    it("refuses another site's credential, even with the same relying party", async () => {
      const a = await newSite();
      const b = await newSite();
      const user = await withPasskey(a.client);
      const refused = await login(b.client, user.authenticator.assert(await loginOptions(b.client)));
      expect(refused.response.status).toBe(422);
      expect(refused.error?.code).toBe('invalid_credentials');
      // Nor does site A's challenge serve at site B.
      const crossed = await login(b.client, user.authenticator.assert(await loginOptions(a.client)));
      expect(crossed.error?.code).toBe('invalid_credentials');
      const list = await b.client.GET('/api/1/user/factor/list', { params: { query: { _userId: user.id } } });
      expect(list.response.status).toBe(404);
    });

    it("registers at site B a credential id that site A holds, so B's registrations tell nothing of A's decoys (issue 57, G8)", async () => {
      const a = await newSite();
      const b = await newSite();
      const holder = await withPasskey(a.client);
      const real = await loginOptions(a.client, { email: holder.email });
      const decoy = await loginOptions(a.client, { email: h.uniqueEmail('nobody') });
      // Site B registers each id that A's options show: the real one as well as the decoy's.
      for (const [what, id] of [
        ['the real id', real.allowCredentials[0]!.id],
        ["a decoy's id", decoy.allowCredentials[0]!.id],
      ] as const) {
        const bUser = await h.createUser({}, b.client);
        const authenticator = new SoftAuthenticator(ORIGIN);
        const answer = authenticator.register(await registrationOptions(b.client, bUser.id), { credentialId: id });
        const registered = await register(b.client, bUser.id, answer);
        expect(registered.response.status, `site B registering ${what} of site A`).toBe(201);
        // And the passkey of B logs in at B, as B's account; A's holder still logs in at A.
        const signedIn = await login(
          b.client,
          authenticator.assert(await loginOptions(b.client, { email: bUser.email })),
        );
        expect(signedIn.data?.result._userId).toBe(bUser.id);
      }
      const atA = await login(
        a.client,
        holder.authenticator.assert(await loginOptions(a.client, { email: holder.email })),
      );
      expect(atA.data?.result._userId).toBe(holder.id);
      // Within one site an id is still one account's: a second registration of it is refused.
      const other = await h.createUser({}, a.client);
      const again = await register(
        a.client,
        other.id,
        new SoftAuthenticator(ORIGIN).register(await registrationOptions(a.client, other.id), {
          credentialId: real.allowCredentials[0]!.id,
        }),
      );
      expect(again.response.status).toBe(422);
    });

    it('is a second factor: verify answers 403 with factors [passkey], and factor/verify takes an assertion', async () => {
      const { client } = await newSite();
      const user = await withPasskey(client);
      const first = await client.POST('/api/1/user/verify', { body: { email: user.email, password: user.password } });
      expect(first.response.status).toBe(403);
      const problem = first.error as { code: string; ticket: string; factors: string[] };
      expect(problem.code).toBe('second_factor_required');
      expect(problem.factors).toEqual(['passkey']);
      const second = (passkey: Assertion) =>
        client.POST('/api/1/user/factor/verify', { body: { ticket: problem.ticket, passkey } as never });
      const wrong = await second(
        user.authenticator.assert(await loginOptions(client, { email: user.email }), { badSignature: true }),
      );
      expect(wrong.response.status).toBe(422);
      expect(wrong.error?.code).toBe('invalid_code');
      const done = await second(user.authenticator.assert(await loginOptions(client, { email: user.email })));
      expect(done.response.status).toBe(200);
      expect(done.data?.result).toEqual({ _userId: user.id, status: 'second factor verified' });
      const spent = await second(user.authenticator.assert(await loginOptions(client, { email: user.email })));
      expect(spent.error?.code).toBe('invalid_ticket');
      // Another account's passkey is no second factor of this one.
      const other = await withPasskey(client);
      const ticket = (
        (await client.POST('/api/1/user/verify', { body: { email: user.email, password: user.password } })).error as {
          ticket: string;
        }
      ).ticket;
      const foreign = await client.POST('/api/1/user/factor/verify', {
        body: { ticket, passkey: other.authenticator.assert(await loginOptions(client)) } as never,
      });
      expect(foreign.error?.code).toBe('invalid_code');
    });

    it('answers the right passkey of a disabled account 403 account_disabled, and logs in again once it is enabled', async () => {
      const { client } = await newSite();
      const user = await withPasskey(client);
      expect((await client.POST('/api/1/user/disable', { body: { _userId: user.id } })).response.status).toBe(200);
      const refused = await login(client, user.authenticator.assert(await loginOptions(client)));
      expect(refused.response.status).toBe(403);
      expect(refused.error?.code).toBe('account_disabled');
      // A wrong answer stays the plain 422: the disabled state shows only to the right passkey.
      const wrong = await login(client, user.authenticator.assert(await loginOptions(client), { badSignature: true }));
      expect(wrong.error?.code).toBe('invalid_credentials');
      await client.POST('/api/1/user/enable', { body: { _userId: user.id } });
      expect((await login(client, user.authenticator.assert(await loginOptions(client)))).response.status).toBe(200);
    });

    it('keeps at most 10,000 outstanding challenges a site, the oldest going first, and drops expired ones', async () => {
      const { site, client } = await newSite();
      const other = await newSite();
      // A site at the bound, and past it by one expired challenge; and another site's challenge.
      await h.target.sql(
        `insert into passkey_challenges (challenge_hash, site, purpose, expires_at)
         select 'filler-' || $1 || '-' || n, $1, 'login', now() + make_interval(secs => 60 + n) from generate_series(1, 10000) n`,
        [site],
      );
      await h.target.sql(
        `insert into passkey_challenges (challenge_hash, site, purpose, expires_at) values
         ('expired-' || $1, $1, 'login', now() - interval '1 second'), ('other-' || $2, $2, 'login', now() + interval '1 minute')`,
        [site, other.site],
      );
      await loginOptions(client);
      const count = async (where: string, value: string) =>
        (await h.target.sql(`select count(*)::int as n from passkey_challenges where ${where}`, [value]))[0]!.n;
      expect(await count('site = $1', site)).toBe(10_000);
      expect(await count('challenge_hash = $1', `expired-${site}`)).toBe(0);
      // The oldest filler went to make room for the new one; the next-oldest stays.
      expect(await count('challenge_hash = $1', `filler-${site}-1`)).toBe(0);
      expect(await count('challenge_hash = $1', `filler-${site}-2`)).toBe(1);
      expect(await count('site = $1', other.site)).toBe(1);
    });

    it('without a relying party, answers 409 passkeys_not_configured naming what to set', async () => {
      const { client } = await newSite(null);
      const user = await h.createUser({}, client);
      const options = await client.POST('/api/1/user/factor/passkey/options', { body: { _userId: user.id } });
      expect(options.response.status).toBe(409);
      expect(options.error?.code).toBe('passkeys_not_configured');
      expect(options.error?.detail).toContain('--rp-id');
      const login = await client.POST('/api/1/user/passkey/options', { body: {} });
      expect(login.error?.code).toBe('passkeys_not_configured');
    });

    it('factor/remove keeps an account’s last way in: its last passkey, with no password and no identity, is 409 last_sign_in_method (issue 57, G11)', async () => {
      const { client } = await newSite();
      const identity = { provider: 'google', subject: `g-${Date.now()}` };
      const created = await client.POST('/api/1/user/identity/create', {
        body: { ...identity, email: h.uniqueEmail('pk'), name: 'Ada Lovelace' },
      });
      expect(created.response.status).toBe(201);
      const userId = created.data!.result._userId;
      const authenticator = new SoftAuthenticator(ORIGIN);
      const registerOne = async () => {
        const done = await register(client, userId, authenticator.register(await registrationOptions(client, userId)));
        expect(done.response.status).toBe(201);
        return done.data!.result.factorId;
      };
      const first = await registerOne();
      const second = await registerOne();
      const totp = await client.POST('/api/1/user/factor/totp', { body: { _userId: userId } });
      // The identity may go: two passkeys are left.
      const unlinked = await client.POST('/api/1/user/identity/unlink', { body: { _userId: userId, ...identity } });
      expect(unlinked.response.status).toBe(200);
      const remove = (factorId: string) =>
        client.POST('/api/1/user/factor/remove', { body: { _userId: userId, factorId } });
      // A pending TOTP factor is no way in: removing it is allowed whatever is left.
      if (totp.response.status === 201) expect((await remove(totp.data!.result.factorId)).response.status).toBe(200);
      expect((await remove(first)).response.status).toBe(200);
      const last = await remove(second);
      expect(last.response.status).toBe(409);
      expect(last.error!.code).toBe('last_sign_in_method');
      expect(last.error!.detail).toContain('password');
      const listed = (await client.GET('/api/1/user/factor/list', { params: { query: { _userId: userId } } })).data!;
      expect(listed.result.factors.map((f) => f.factorId)).toEqual([second]);
      // It still signs in with it.
      const verified = await login(client, authenticator.assert(await loginOptions(client, { _userId: userId })));
      expect(verified.data?.result._userId).toBe(userId);
      // With a password, it may go.
      const password = h.password();
      expect((await client.POST('/api/1/user/update', { body: { _userId: userId, password } })).response.status).toBe(
        200,
      );
      expect((await remove(second)).response.status).toBe(200);
    });

    it('makes user.factor_added and user.factor_removed with factorType passkey, and audits each step', async () => {
      const site = `passkey-events-${Date.now().toString(36)}`;
      const { token } = await h.target.createToken({
        site,
        scopes: ['read', 'write', 'verify', 'events'],
        label: 'pk',
      });
      await h.target.sql(`insert into site_settings (site, rp_id, rp_origins) values ($1, 'localhost', $2::jsonb)`, [
        site,
        JSON.stringify([ORIGIN]),
      ]);
      const client = h.clientFor(token);
      const user = await withPasskey(client);
      await login(client, user.authenticator.assert(await loginOptions(client), { badSignature: true }));
      await login(client, user.authenticator.assert(await loginOptions(client)));
      await client.POST('/api/1/user/factor/remove', { body: { _userId: user.id, factorId: user.factorId } });
      let events: { type: string; data: unknown }[] = [];
      for (let i = 0; i < 50 && events.length < 3; i++) {
        const { data } = await client.GET('/api/1/events', { params: { query: { limit: 100, wait: 1 } } });
        events = data!.result.events;
      }
      expect(events.map((e) => e.type)).toEqual(['user.created', 'user.factor_added', 'user.factor_removed']);
      const factor = { _userId: user.id, factorId: user.factorId, factorType: 'passkey' };
      expect(events[1]!.data).toEqual(factor);
      expect(events[2]!.data).toEqual(factor);
      const { data } = await client.GET('/api/1/audit', { params: { query: { _userId: user.id } } });
      expect(data!.result.entries.map((e) => [e.operation, e.status, e.outcome])).toEqual([
        ['factor_remove', 200, 'factor removed'],
        ['passkey_verify', 200, 'passkey verified'],
        ['passkey_verify', 422, 'invalid_credentials'],
        ['factor_add', 201, 'factor enabled'],
        ['create', 201, 'user created'],
      ]);
    });
  });
}
