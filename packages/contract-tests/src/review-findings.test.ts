// Review of issues 44-46 (identities, login links and codes, organizations): each test holds one
// defect found in review, through the client, on PGlite and PostgreSQL.
import type { Problem } from '@user-accounts/client';
import { describe, expect, it } from 'vitest';
import { nowSeconds, totpAt } from './factors-suite.ts';
import { issuedTicket, useTarget } from './harness.ts';
import { pgliteTarget, postgresTarget, type TargetSpec } from './targets.ts';

let seq = 0;
const subjectOf = (tag = 's') => `${tag}-${Date.now()}-${seq++}`;

function defineReviewSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) {
    describe.skip(`${spec.name}: review findings (${spec.skip ?? 'stateless'})`, () => {
      it('skipped', () => {});
    });
    return;
  }

  describe(`${spec.name}: review findings`, () => {
    const h = useTarget(spec);

    it('identity/verify then factor/verify: the session says fed, never pwd (no password was used)', async () => {
      const identity = { provider: 'google', subject: subjectOf('g') };
      const created = await h.client.POST('/api/1/user/identity/create', {
        body: { ...identity, email: h.uniqueEmail('fed2fa'), name: 'Ada' },
      });
      const userId = created.data!.result._userId;
      const added = (await h.client.POST('/api/1/user/factor/totp', { body: { _userId: userId } })).data!.result;
      await h.client.POST('/api/1/user/factor/confirm', {
        body: { _userId: userId, factorId: added.factorId, code: totpAt(added.secret, nowSeconds()) },
      });
      const first = await h.client.POST('/api/1/user/identity/verify', { body: { ...identity, session: {} } });
      expect(first.response.status).toBe(403);
      const { ticket } = first.error as Problem & { ticket: string };
      const second = await h.client.POST('/api/1/user/factor/verify', {
        body: { ticket, code: totpAt(added.secret, nowSeconds() + 30), session: {} },
      });
      expect(second.response.status, JSON.stringify(second.error)).toBe(200);
      const checked = await h.client.POST('/api/1/session/verify', {
        body: { token: second.data!.result.session!.token },
      });
      expect(checked.data!.result).toMatchObject({ _userId: userId, aal: 2 });
      expect(checked.data!.result.amr).not.toContain('pwd');
      expect(checked.data!.result.amr).toContain('fed');
    });

    it('a login code redeemed with its _userId in capitals (the same UUID): signed in, as every other operation reads it', async () => {
      const user = await h.createUser();
      const issued = await h.client.POST('/api/1/user/ticket', {
        body: { _userId: user.id, purpose: 'login', delivery: 'code' } as never,
      });
      const code = issuedTicket(issued.data!.result);
      const redeemed = await h.client.POST('/api/1/user/ticket/redeem', {
        body: { ticket: code, purpose: 'login', _userId: user.id.toUpperCase() } as never,
      });
      expect(redeemed.response.status, JSON.stringify(redeemed.error)).toBe(200);
      expect(redeemed.data!.result).toMatchObject({ _userId: user.id, status: 'login verified' });
    });

    it('org/roles: an expired invitation (not listed, not revocable, not acceptable) does not hold a role in use', async () => {
      const { token } = await h.target.createToken({
        site: `review-${Date.now().toString(36)}-${seq++}`,
        scopes: ['read', 'write'],
        label: 'review orgs',
      });
      const c = h.clientFor(token);
      const roles = [
        { role: 'admin', permissions: ['billing:manage'] },
        { role: 'guest', permissions: [] },
      ];
      expect((await c.POST('/api/1/org/roles', { body: { roles } })).response.status).toBe(200);
      const orgId = (await c.POST('/api/1/org/create', { body: { name: 'Acme' } })).data!.result.orgId;
      const invited = await c.POST('/api/1/org/invitation/create', {
        body: { orgId, email: h.uniqueEmail('guest'), roles: ['guest'], expiresIn: 60 },
      });
      const { invitationId } = invited.data!.result;
      // Its time passed.
      await h.target.sql(`update org_invitations set expires_at = now() - interval '1 minute' where id = $1`, [
        invitationId,
      ]);
      const listed = await c.GET('/api/1/org/invitation/list', { params: { query: { orgId } } });
      expect(listed.data!.result.invitations).toEqual([]);
      expect((await c.POST('/api/1/org/invitation/revoke', { body: { invitationId } })).response.status).toBe(404);
      // So nothing the site can see or do gives the role: it may drop it.
      const dropped = await c.POST('/api/1/org/roles', { body: { roles: [roles[0]!] } });
      expect(dropped.response.status, JSON.stringify(dropped.error)).toBe(200);
    });

    it('one text rule for every display field: org names, identity subjects, factor labels, metadata keys refuse bidi controls, U+2028/2029 and nothing visible (issue 57, G10)', async () => {
      const unsafe: [string, string][] = [
        ['a right-to-left override', '\u202Egnp.exe'],
        ['a first-strong isolate', 'Acme \u2068Corp\u2069'],
        ['a line separator', 'Acme\u2028Corp'],
        ['a paragraph separator', 'Acme\u2029Corp'],
        ['only zero-width characters', '\u200B\u200D'],
        ['only a Hangul filler', '\u3164'],
      ];
      const refusedAt = (answer: { error?: unknown; response: Response }, pointer: string, what: string) => {
        expect(answer.response.status, `${what}: ${JSON.stringify(answer.error)}`).toBe(400);
        const problem = answer.error as Problem;
        expect(problem.code).toBe('invalid_request');
        expect(problem.errors?.[0]).toMatchObject({ pointer, code: 'invalid_format' });
        expect(problem.errors?.[0]?.message).toMatch(/^(must contain a visible character|must not contain|has a key)/);
      };
      const { token } = await h.target.createToken({
        site: `review-text-${Date.now().toString(36)}-${seq++}`,
        scopes: ['read', 'write'],
        label: 'review text',
      });
      const c = h.clientFor(token);
      const orgId = (await c.POST('/api/1/org/create', { body: { name: 'Acme' } })).data!.result.orgId;
      const user = await h.createUser({}, c);
      for (const [what, text] of unsafe) {
        refusedAt(await c.POST('/api/1/org/create', { body: { name: text } }), '/name', `org/create ${what}`);
        refusedAt(await c.POST('/api/1/org/update', { body: { orgId, name: text } }), '/name', `org/update ${what}`);
        refusedAt(
          await c.POST('/api/1/user/identity/create', {
            body: { provider: 'google', subject: text, email: h.uniqueEmail('text'), name: 'Ada' },
          }),
          '/subject',
          `identity/create ${what}`,
        );
        refusedAt(
          await c.POST('/api/1/user/identity/link', { body: { _userId: user.id, provider: 'google', subject: text } }),
          '/subject',
          `identity/link ${what}`,
        );
        refusedAt(
          await c.POST('/api/1/user/factor/totp', { body: { _userId: user.id, label: text } }),
          '/label',
          `factor/totp ${what}`,
        );
        // A metadata key, at the top or nested, is shown in the console as the name of a field.
        refusedAt(
          await c.POST('/api/1/user/update', { body: { _userId: user.id, metadata: { [text]: 1 } } }),
          '/metadata',
          `update metadata key ${what}`,
        );
        refusedAt(
          await c.POST('/api/1/org/update', { body: { orgId, metadata: { plan: { [text]: 'gold' } } as never } }),
          '/metadata/plan',
          `org/update nested metadata key ${what}`,
        );
      }
      // Nothing of it was kept.
      expect((await c.GET('/api/1/org/get', { params: { query: { orgId } } })).data!.result).toMatchObject({
        name: 'Acme',
        metadata: {},
      });
      // Names of every script still pass, and the joiners words need.
      for (const name of ['李小龙 有限公司', 'محمد', 'نیم\u200Cفاصله', '👩\u200D💻 Labs', "O'Brien-Smith"]) {
        const made = await c.POST('/api/1/org/create', { body: { name, metadata: { [name]: true } } });
        expect(made.response.status, JSON.stringify(made.error)).toBe(201);
      }
    });

    it('pre-account takeover (issue 57, G5): proving the inbox by a login link ends the stranger’s sessions and password, and the invitation opens a member to the owner only', async () => {
      const { token } = await h.target.createToken({
        site: `review-takeover-${Date.now().toString(36)}-${seq++}`,
        scopes: ['read', 'write', 'verify', 'events'],
        label: 'review takeover',
      });
      const c = h.clientFor(token);
      const victim = h.uniqueEmail('victim');
      // The attacker signs up first, with the victim's email and his own password, and signs in.
      const attackerPassword = h.password();
      const made = await c.POST('/api/1/user/create', {
        body: { email: victim, password: attackerPassword, name: 'Not Ada' },
      });
      const userId = made.data!.result._userId;
      const attacker = await c.POST('/api/1/user/verify', {
        body: { email: victim, password: attackerPassword, session: {} },
      });
      const stale = attacker.data!.result.session!;
      // The owner comes with Google: the email is taken, so the site asks for the inbox.
      const google = { provider: 'google', subject: subjectOf('owner') };
      const taken = await c.POST('/api/1/user/identity/create', {
        body: { ...google, email: victim, emailVerified: true, name: 'Ada' },
      });
      expect(taken.error?.code).toBe('email_taken');
      const link = issuedTicket(
        (await c.POST('/api/1/user/ticket', { body: { email: victim, purpose: 'login' } as never })).data!.result,
      );
      const redeemed = await c.POST('/api/1/user/ticket/redeem', {
        body: { ticket: link, purpose: 'login', session: {} } as never,
      });
      expect(redeemed.response.status, JSON.stringify(redeemed.error)).toBe(200);
      const owners = redeemed.data!.result.session!;
      expect(
        (await c.POST('/api/1/user/identity/link', { body: { _userId: userId, ...google, email: victim } })).response
          .status,
      ).toBe(200);

      // The stranger's session made before the proof is over, and so is his refresh of it.
      expect((await c.POST('/api/1/session/verify', { body: { token: stale.token } })).response.status).toBe(422);
      expect((await c.POST('/api/1/session/refresh', { body: { token: stale.token } })).response.status).toBe(422);
      // His password no longer signs in by itself; a wrong one is the plain 422 as ever.
      const refused = await c.POST('/api/1/user/verify', {
        body: { email: victim, password: attackerPassword, session: {} },
      });
      expect(refused.response.status).toBe(403);
      expect(refused.error?.code).toBe('password_reset_required');
      expect(JSON.stringify(refused.error)).not.toContain('uas_');
      const wrong = await c.POST('/api/1/user/verify', { body: { email: victim, password: h.password() } });
      expect(wrong.error?.code).toBe('invalid_credentials');
      // The owner's own ways in stand: the session of the link, and Google.
      expect((await c.POST('/api/1/session/verify', { body: { token: owners.token } })).response.status).toBe(200);
      expect((await c.POST('/api/1/user/identity/verify', { body: { ...google, session: {} } })).response.status).toBe(
        200,
      );
      const sessions = (await c.GET('/api/1/session/list', { params: { query: { _userId: userId } } })).data!.result
        .sessions;
      expect(sessions.map((x) => x.sessionId)).not.toContain(stale.sessionId);
      const ended = await c.GET('/api/1/events', { params: { query: { subject: userId, limit: 100 } } });
      expect(
        ended
          .data!.result.events.filter((e) => e.type === 'session.revoked')
          .map((e) => (e.data as { reason: string }).reason),
      ).toEqual(['inbox_proven']);

      // The invitation to that email, accepted afterwards, opens the member to whoever holds a
      // session of the account now: the owner's only.
      expect(
        (await c.POST('/api/1/org/roles', { body: { roles: [{ role: 'member', permissions: ['x:y'] }] } })).response
          .status,
      ).toBe(200);
      const orgId = (await c.POST('/api/1/org/create', { body: { name: 'Acme' } })).data!.result.orgId;
      const invited = (
        await c.POST('/api/1/org/invitation/create', { body: { orgId, email: victim, roles: ['member'] } })
      ).data!.result;
      const accepted = await c.POST('/api/1/org/invitation/accept', {
        body: { ticket: issuedTicket(invited), _userId: userId },
      });
      expect(accepted.response.status, JSON.stringify(accepted.error)).toBe(200);
      const live = (await c.GET('/api/1/session/list', { params: { query: { _userId: userId } } })).data!.result
        .sessions;
      expect(live.map((x) => x.amr)).toEqual([['fed'], ['otp']]);

      // The person sets a password (a reset through the inbox): it signs in; the stranger's never again.
      const reset = issuedTicket(
        (await c.POST('/api/1/user/ticket', { body: { email: victim, purpose: 'reset_password' } as never })).data!
          .result,
      );
      const ownPassword = h.password();
      expect(
        (
          await c.POST('/api/1/user/ticket/redeem', {
            body: { ticket: reset, purpose: 'reset_password', password: ownPassword } as never,
          })
        ).response.status,
      ).toBe(200);
      expect(
        (await c.POST('/api/1/user/verify', { body: { email: victim, password: ownPassword } })).response.status,
      ).toBe(200);
      expect(
        (await c.POST('/api/1/user/verify', { body: { email: victim, password: attackerPassword } })).error?.code,
      ).toBe('invalid_credentials');
    });

    it('verify_email right after a sign-up, and a login link of an account whose email was verified, keep the password and the sessions (issue 57, G5)', async () => {
      const user = await h.createUser();
      const first = await h.client.POST('/api/1/user/verify', {
        body: { email: user.email, password: user.password, session: {} },
      });
      const session = first.data!.result.session!;
      const verifyEmail = issuedTicket(
        (await h.client.POST('/api/1/user/ticket', { body: { _userId: user.id, purpose: 'verify_email' } as never }))
          .data!.result,
      );
      expect(
        (
          await h.client.POST('/api/1/user/ticket/redeem', {
            body: { ticket: verifyEmail, purpose: 'verify_email' } as never,
          })
        ).response.status,
      ).toBe(200);
      const link = issuedTicket(
        (await h.client.POST('/api/1/user/ticket', { body: { _userId: user.id, purpose: 'login' } as never })).data!
          .result,
      );
      expect(
        (await h.client.POST('/api/1/user/ticket/redeem', { body: { ticket: link, purpose: 'login' } as never }))
          .response.status,
      ).toBe(200);
      expect((await h.client.POST('/api/1/session/verify', { body: { token: session.token } })).response.status).toBe(
        200,
      );
      expect(
        (await h.client.POST('/api/1/user/verify', { body: { email: user.email, password: user.password } })).response
          .status,
      ).toBe(200);
    });
  });
}

defineReviewSuite(pgliteTarget);
defineReviewSuite(await postgresTarget());
