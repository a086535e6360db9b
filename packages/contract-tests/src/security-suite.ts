// Who may call what, for every operation of the table (operations.ts), in the manner of unkey's
// shared route tests: an unknown token, one without the operation's scope, one of another site
// (and, once per target, no token, a revoked one, a `Bearer` without its token). Each gets its
// documented answer and changes nothing. A new operation is covered by adding its row; its
// request here is the spec's own first example, aimed at a live account.

import type { Problem } from '@user-accounts/client';
import { operations } from '@user-accounts/server/operations';
import { saveState } from '@user-accounts/server/providers/flow';
import { checkProvider } from '@user-accounts/server/providers/options';
import { setProvider } from '@user-accounts/server/providers/providers';
import { SCOPES } from '@user-accounts/server/tokens';
import { beforeAll, describe, expect, it } from 'vitest';
import { API, GHOST, issuedTicket, useTarget, withoutRequestId } from './harness.ts';
import { createSpecChecker } from './spec-check.ts';
import type { TargetSpec } from './targets.ts';
import { seedWebhook } from './webhook-seed.ts';

type Json = Record<string, any>;
type Op = (typeof operations)[number];
const { spec, resolve } = createSpecChecker();
const specOf = (op: Op): Json => spec.paths[op.path][op.method.toLowerCase()];
const queryParams = (op: Op): Json[] =>
  ((specOf(op).parameters ?? []) as Json[]).map(resolve).filter((p) => p.in === 'query');

/** Whether the operation's request names an account by `_userId` (in its query or its body). */
function namesAccount(op: Op): boolean {
  if ('query' in op.request) return queryParams(op).some((p) => p.name === '_userId');
  // A ticket names its account as an id does (the login's second step takes only a ticket), and
  // so does a passkey's answer (passkey/verify takes only that: its credential names the account).
  const properties = resolve(spec.components.schemas[op.request.body]).properties ?? {};
  return '_userId' in properties || 'ticket' in properties || 'response' in properties;
}

/** Whether the operation names one of the site's webhook endpoints (`endpointId`) or deliveries (`deliveryId`). */
function namesWebhook(op: Op): boolean {
  if ('query' in op.request) return queryParams(op).some((p) => p.name === 'endpointId');
  return 'deliveryId' in (resolve(spec.components.schemas[op.request.body]).properties ?? {});
}

/** Whether the operation starts or completes a sign-in with one of the site's providers (provider/start, provider/callback). */
const namesProviderFlow = (op: Op) => op.method === 'POST' && op.path.startsWith('/api/1/provider/');

/** Whether the operation names a session, by its token or its id (session/verify, refresh, revoke). */
function namesSession(op: Op): boolean {
  if ('query' in op.request) return false;
  const properties = resolve(spec.components.schemas[op.request.body]).properties ?? {};
  return 'token' in properties || 'sessionId' in properties;
}

/** Whether the operation names an organization of the site, or its invitation (org/…). */
function namesOrg(op: Op): boolean {
  // A connection (issue 61) is an organization's: another site's is a missing one, as its organization.
  if ('query' in op.request) return queryParams(op).some((p) => p.name === 'orgId' || p.name === 'connectionId');
  const properties = resolve(spec.components.schemas[op.request.body]).properties ?? {};
  return (
    'orgId' in properties ||
    'invitationId' in properties ||
    'connectionId' in properties ||
    op.path === '/api/1/org/invitation/accept'
  );
}

/** An organization a request names, its pending invitation (for the account's email) and that invitation's ticket. */
interface OrgIds {
  orgId: string;
  invitationId: string;
  ticket: string;
}

/** A session a request names: its token and its id. */
interface SessionIds {
  token: string;
  sessionId: string;
}

/** The webhook endpoint and delivery a request names, when its operation names one. */
interface WebhookIds {
  endpointId: string;
  deliveryId: string;
}

/** The operation's first documented example, about the account `id` (and its `email`, and the webhook `hook`). */
function exampleRequest(
  op: Op,
  id: string,
  email: string,
  password?: string,
  hook?: WebhookIds,
  session?: SessionIds,
  org?: OrgIds,
): { path: string; init: RequestInit } {
  if ('query' in op.request) {
    const params = queryParams(op);
    const query: Record<string, string> = params.some((p) => p.name === '_userId')
      ? {
          // The other required parameters by their examples (provider/tokens' provider).
          ...Object.fromEntries(
            params.filter((p) => p.required === true && p.name !== '_userId').map((p) => [p.name, String(p.example)]),
          ),
          _userId: id,
        }
      : Object.fromEntries(params.slice(0, 1).map((p) => [p.name, String(p.example)]));
    if ('endpointId' in query && hook !== undefined) query.endpointId = hook.endpointId;
    if (org !== undefined && params.some((p) => p.name === 'orgId')) query.orgId = org.orgId;
    return { path: `${op.path}?${new URLSearchParams(query)}`, init: { method: op.method } };
  }
  const examples = specOf(op).requestBody.content['application/json'].examples as Json;
  const body = { ...(Object.values(examples)[0] as Json).value };
  if ('_userId' in body) body._userId = id;
  if ('email' in body) body.email = email;
  // The account's own password where the example sends one about it (verify): only then does a
  // refusal show that the account is out of reach, not that the password is wrong.
  if ('password' in body && password !== undefined && namesAccount(op)) body.password = password;
  if ('deliveryId' in body && hook !== undefined) body.deliveryId = hook.deliveryId;
  if ('token' in body && session !== undefined) body.token = session.token;
  if ('sessionId' in body && session !== undefined) body.sessionId = session.sessionId;
  if (org !== undefined) {
    if ('orgId' in body) body.orgId = org.orgId;
    if ('invitationId' in body) body.invitationId = org.invitationId;
    if ('ticket' in body) body.ticket = org.ticket;
  }
  return {
    path: op.path,
    init: { method: op.method, headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) },
  };
}

export function defineSecuritySuite(target: TargetSpec): void {
  if (target.skip || !target.stateful) return;

  describe(`${target.name}: every operation of the table refuses callers without the right token`, () => {
    const h = useTarget(target);
    const tokens: { revoked: string; otherSite: string; without: Record<string, string> } = {
      revoked: '',
      otherSite: '',
      without: {},
    };
    let unknown401: Problem;
    // A webhook endpoint and delivery of this site, aimed at by the operations that name one.
    let hook: WebhookIds;

    beforeAll(async () => {
      const revoked = await h.target.createToken({ label: 'revoked' });
      await h.target.revokeToken(revoked.id);
      tokens.revoked = revoked.token;
      tokens.otherSite = (
        await h.target.createToken({ site: 'elsewhere', scopes: SCOPES, label: 'another site' })
      ).token;
      for (const scope of SCOPES) {
        const others = SCOPES.filter((s) => s !== scope);
        tokens.without[scope] = (await h.target.createToken({ scopes: others, label: `without ${scope}` })).token;
      }
      // An operation that takes one of several scopes (org/member/check: read or verify): a token with none of them.
      for (const op of operations.filter((o) => typeof o.scope !== 'string')) {
        const wanted = [op.scope].flat();
        const others = SCOPES.filter((s) => !wanted.includes(s));
        tokens.without[wanted.join('+')] = (
          await h.target.createToken({ scopes: others, label: `without ${wanted.join(' or ')}` })
        ).token;
      }
      const unknown = await h.checkedFetch(
        new Request(`${h.target.baseUrl}${API}/get?_userId=${GHOST}`, {
          headers: { Authorization: 'ua_never_issued_0000000000000000000000' },
        }),
      );
      unknown401 = (await unknown.json()) as Problem;
      // Both sites are WebAuthn relying parties, so that a passkey operation gets past its 409
      // passkeys_not_configured to the account (cli site set --rp-id --origins).
      for (const site of ['default', 'elsewhere'])
        await h.target.sql(
          `insert into site_settings (site, rp_id, rp_origins) values ($1, 'localhost', '["http://localhost:5173"]')
           on conflict (site) do update set rp_id = excluded.rp_id, rp_origins = excluded.rp_origins`,
          [site],
        );
      // The roles the organization operations' examples name, on both sites.
      for (const token of [h.target.token, tokens.otherSite]) {
        await h.clientFor(token).POST('/api/1/org/roles', {
          body: {
            roles: [
              { role: 'admin', permissions: ['billing:manage', 'members:invite', 'members:remove'] },
              { role: 'member', permissions: ['projects:read'] },
            ],
          },
        });
      }
      const account = await h.createUser();
      const seeded = await seedWebhook(h.target.sql, 'default', account.id, { count: 1 });
      hook = { endpointId: seeded.endpointId, deliveryId: seeded.deliveryIds[0]! };
    });

    /**
     * Sends the operation's example about the account `id` (with its email, for an operation that
     * names an account; a fresh one for create) with this Authorization header (none: no header).
     */
    const send = async (
      op: Op,
      authorization: string | undefined,
      id: string,
      email = h.uniqueEmail('security'),
      password?: string,
      webhook = hook,
      session?: SessionIds,
      org?: OrgIds,
    ) => {
      const { path, init } = exampleRequest(
        op,
        id,
        namesAccount(op) ? email : h.uniqueEmail('security'),
        password,
        webhook,
        session,
        org,
      );
      const headers = new Headers(init.headers);
      if (authorization !== undefined) headers.set('Authorization', authorization);
      const response = await h.checkedFetch(new Request(`${h.target.baseUrl}${path}`, { ...init, headers }));
      return { response, problem: response.status >= 400 ? ((await response.json()) as Problem) : undefined };
    };
    const snapshot = () => h.target.sql(`select * from users where site = 'default' order by id`);

    // RFC 6750 §3: `error="invalid_token"` for a token sent and refused; none without a token.
    const plain = 'Bearer realm="user-accounts"';
    const invalid = 'Bearer realm="user-accounts", error="invalid_token"';
    /** A 401 unauthorized with this challenge, the one body of every 401, no budget's headers, and nothing changed. */
    const refuses = async (op: Op, authorization: string | undefined, challenge: string) => {
      const victim = await h.createUser();
      const before = await snapshot();
      const { response, problem } = await send(op, authorization, victim.id);
      expect(response.status, `${op.method} ${op.path}`).toBe(401);
      expect(response.headers.get('www-authenticate')).toBe(challenge);
      expect(withoutRequestId(problem)).toEqual(withoutRequestId(unknown401));
      expect(response.headers.get('ratelimit')).toBeNull();
      expect(await snapshot()).toEqual(before);
    };

    // The four ways of coming without a valid token, once per target: one token step serves every
    // row, so each way is tried on a read and on a write (rows that went different ways through
    // the server before issue 58's one pipeline), and every row below is tried with one of them.
    const read = operations.find((op) => op.method === 'GET')!;
    const write = operations.find((op) => op.method === 'POST')!;
    it.each([
      ['no token', () => undefined, plain],
      ['an unknown token', () => 'ua_never_issued_1111111111111111111111', invalid],
      ['a revoked token', () => tokens.revoked, invalid],
      ['a Bearer without its token', () => 'Bearer', plain],
    ])(
      `answers %s with 401 unauthorized, the same body every time, and changes nothing (${read.method} ${read.path}, ${write.method} ${write.path})`,
      async (_, token, challenge) => {
        for (const op of [read, write]) await refuses(op, token(), challenge);
      },
    );

    describe.each(operations.map((op) => [`${op.method} ${op.path}`, op] as const))('%s', (_, op) => {
      // That the row asks for a token at all, and checks it: an unknown one (the other three ways
      // go through the same step, above).
      it('answers an unknown token with 401 unauthorized, the same body every time, and changes nothing', () =>
        refuses(op, 'ua_never_issued_1111111111111111111111', invalid));

      const scopeName = [op.scope].flat().join('+');
      it(`answers a token without the ${scopeName} scope with 403 forbidden, and changes nothing`, async () => {
        const victim = await h.createUser();
        const before = await snapshot();
        const { response, problem } = await send(op, tokens.without[scopeName], victim.id);
        expect(response.status).toBe(403);
        expect(problem?.code).toBe('forbidden');
        expect(await snapshot()).toEqual(before);
      });

      it("treats another site's account exactly as a missing one, and changes nothing of this site", async () => {
        const victim = await h.createUser();
        if (namesSession(op)) {
          // This site's live session is, to another site, one that does not exist, and stays live.
          const made = await h.client.POST('/api/1/user/verify', {
            body: { email: victim.email, password: victim.password, session: {} },
          });
          const { token, sessionId } = made.data!.result.session!;
          const sessions = () => h.target.sql('select * from sessions order by id');
          const before = await sessions();
          const other = await send(op, tokens.otherSite, victim.id, victim.email, undefined, hook, {
            token,
            sessionId,
          });
          const ghost = { token: `uas_${'A'.repeat(43)}`, sessionId: GHOST };
          const missing = await send(op, tokens.otherSite, victim.id, victim.email, undefined, hook, ghost);
          expect([404, 422]).toContain(missing.response.status);
          expect(other.response.status).toBe(missing.response.status);
          expect(withoutRequestId(other.problem)).toEqual(withoutRequestId(missing.problem));
          expect(await sessions()).toEqual(before);
          expect((await h.client.POST('/api/1/session/verify', { body: { token } })).response.status).toBe(200);
          return;
        }
        if (namesProviderFlow(op)) {
          // This site's provider, and its sign-in's state, are to another site ones that do not exist;
          // the state stays this site's.
          const deps = h.target.deps!();
          await setProvider(
            deps.database.db,
            checkProvider({
              site: 'default',
              name: 'google',
              clientId: 'security-suite',
              redirectUris: 'https://shop.example.com/auth/callback',
            }),
            'security-suite-client-secret',
            deps.factorKeys,
          );
          const { state } = await saveState(deps.database.db, deps.factorKeys, {
            site: 'default',
            provider: 'google',
            redirectUri: 'https://shop.example.com/auth/callback',
          });
          const states = () => h.target.sql(`select state_hash from provider_states where site = 'default' order by 1`);
          const before = await states();
          const usersBefore = await snapshot();
          const call = (withState: string, provider: string) =>
            fetch(`${h.target.baseUrl}${op.path}`, {
              method: 'POST',
              headers: { authorization: `Bearer ${tokens.otherSite}`, 'content-type': 'application/json' },
              body: JSON.stringify(
                op.path.endsWith('/start')
                  ? { provider, redirectUri: 'https://shop.example.com/auth/callback' }
                  : { callbackUrl: `https://shop.example.com/auth/callback?code=c&state=${withState}` },
              ),
            });
          const other = await call(state, 'google');
          const missing = await call('no-such-state-anywhere', 'google');
          expect([404, 422]).toContain(missing.status);
          expect(other.status).toBe(missing.status);
          const [a, b] = [(await other.json()) as Problem, (await missing.json()) as Problem];
          expect(withoutRequestId(a)).toEqual(withoutRequestId(b));
          expect(await states()).toEqual(before);
          expect(await snapshot()).toEqual(usersBefore);
          return;
        }
        if (namesOrg(op)) {
          // This site's organization (the account a member, invited too) is, to another site, one
          // that does not exist; its invitation's ticket one it does not know.
          const made = await h.client.POST('/api/1/org/create', { body: { name: 'Victim' } });
          const orgId = made.data!.result.orgId;
          await h.client.POST('/api/1/org/member/add', { body: { orgId, _userId: victim.id, roles: ['admin'] } });
          const invited = await h.client.POST('/api/1/org/invitation/create', {
            body: { orgId, email: victim.email, roles: ['admin'] },
          });
          const { invitationId } = invited.data!.result;
          const ticket = issuedTicket(invited.data!.result);
          const orgRows = () =>
            h.target.sql(
              `select o.*, (select json_agg(m order by user_id) from org_memberships m where m.org_id = o.id) as members,
                (select json_agg(i order by id) from org_invitations i where i.org_id = o.id) as invitations
               from orgs o where o.site = 'default' order by o.id`,
            );
          const before = await orgRows();
          const usersBefore = await snapshot();
          const other = await send(op, tokens.otherSite, victim.id, victim.email, undefined, hook, undefined, {
            orgId,
            invitationId,
            ticket,
          });
          const ghost = { orgId: GHOST, invitationId: GHOST, ticket: 'x'.repeat(43) };
          const missing = await send(
            op,
            tokens.otherSite,
            GHOST,
            h.uniqueEmail('missing'),
            undefined,
            hook,
            undefined,
            ghost,
          );
          expect([404, 422]).toContain(missing.response.status);
          expect(other.response.status).toBe(missing.response.status);
          expect(withoutRequestId(other.problem)).toEqual(withoutRequestId(missing.problem));
          expect(await orgRows()).toEqual(before);
          expect(await snapshot()).toEqual(usersBefore);
          return;
        }
        const before = await snapshot();
        const other = await send(op, tokens.otherSite, victim.id, victim.email, victim.password);
        if (namesAccount(op)) {
          // 404 user_not_found, or verify's one answer for every account it cannot check.
          const missing = await send(op, tokens.otherSite, GHOST, h.uniqueEmail('missing'));
          expect([404, 422]).toContain(missing.response.status);
          expect(other.response.status).toBe(missing.response.status);
          expect(withoutRequestId(other.problem)).toEqual(withoutRequestId(missing.problem));
        } else if (namesWebhook(op)) {
          // This site's endpoint or delivery is, to another site, one that does not exist.
          const ghost = { endpointId: GHOST, deliveryId: '999999999999' };
          const missing = await send(op, tokens.otherSite, victim.id, undefined, undefined, ghost);
          expect(missing.response.status).toBe(404);
          expect(other.response.status).toBe(404);
          expect(withoutRequestId(other.problem)).toEqual(withoutRequestId(missing.problem));
          expect(await h.target.sql('select count(*)::int as n from webhook_deliveries')).toEqual([{ n: 1 }]);
        } else {
          // An operation that names no account acts on the caller's own site only.
          expect(other.response.status).toBeLessThan(300);
        }
        expect(await snapshot()).toEqual(before);
      });
    });
  });
}
