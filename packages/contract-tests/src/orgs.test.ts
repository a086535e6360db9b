// Organizations (issue 45, points 1-6) through the client, on PGlite and PostgreSQL: organizations,
// the site's roles, memberships, the per-request check, invitations, bounds and isolation. Each
// test works on a site of its own (a token made for it), so that the role sets never meet.
import { createHash, randomUUID } from 'node:crypto';
import type { Problem, UserAccountsClient } from '@user-accounts/client';
import { purgeDeleted } from '@user-accounts/server/accounts/delete';
import { describe, expect, it } from 'vitest';
import { GHOST, useTarget } from './harness.ts';
import { pgliteTarget, postgresTarget, type TargetSpec } from './targets.ts';

const sha256 = (text: string) => createHash('sha256').update(text).digest('base64url');
const ROLES = [
  { role: 'admin', permissions: ['billing:manage', 'members:invite', 'projects:read'] },
  { role: 'member', permissions: ['projects:read'] },
  { role: 'billing', permissions: ['billing:manage'] },
];

function defineOrgsSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) {
    describe.skip(`${spec.name}: organizations (${spec.skip ?? 'stateless'})`, () => {
      it('skipped', () => {});
    });
    return;
  }

  describe(`${spec.name}: organizations`, () => {
    const h = useTarget(spec);

    /** A site of the test's own, its client, and helpers bound to it. */
    async function site(roles = ROLES) {
      const name = `orgs-${randomUUID().slice(0, 8)}`;
      const { token } = await h.target.createToken({
        site: name,
        scopes: ['read', 'write', 'verify', 'events', 'export'],
        label: name,
      });
      const c = h.clientFor(token);
      if (roles.length > 0) {
        const { response } = await c.POST('/api/1/org/roles', { body: { roles } });
        expect(response.status).toBe(200);
      }
      const org = async (
        body: { name: string; slug?: string; metadata?: Record<string, unknown> } = { name: 'Acme' },
      ) => {
        const { data, error, response } = await c.POST('/api/1/org/create', { body });
        expect(error, JSON.stringify(error)).toBeUndefined();
        expect(response.status).toBe(201);
        return data!.result.orgId;
      };
      const user = async (emailVerified = true, email = h.uniqueEmail('member')) => {
        const { data, error } = await c.POST('/api/1/user/create', {
          body: { email, password: h.password(), name: 'Ada Lovelace', emailVerified },
        });
        expect(error, JSON.stringify(error)).toBeUndefined();
        return { id: data!.result._userId, email };
      };
      const add = (orgId: string, userId: string, roles: string[]) =>
        c.POST('/api/1/org/member/add', { body: { orgId, _userId: userId, roles } });
      const check = async (orgId: string, userId: string, permission?: string) => {
        const { data, error } = await c.GET('/api/1/org/member/check', {
          params: { query: { orgId, _userId: userId, ...(permission === undefined ? {} : { permission }) } },
        });
        expect(error, JSON.stringify(error)).toBeUndefined();
        return data!.result;
      };
      const get = (orgId: string) => c.GET('/api/1/org/get', { params: { query: { orgId } } });
      const invite = async (orgId: string, email: string, roles: string[] = ['member']) => {
        const { data, error, response } = await c.POST('/api/1/org/invitation/create', {
          body: { orgId, email, roles },
        });
        expect(error, JSON.stringify(error)).toBeUndefined();
        expect(response.status).toBe(201);
        // Without send: the branch of the answer that holds the ticket (narrowed on status).
        const result = data!.result;
        if (result.status !== 'invitation created') throw new Error(`no ticket: ${result.status}`);
        return result;
      };
      return { name, token, c, org, user, add, check, get, invite };
    }

    const problemOf = (answer: { error?: unknown; response: Response }, status: number, code: string) => {
      expect(answer.response.status, JSON.stringify(answer.error)).toBe(status);
      expect((answer.error as Problem).code).toBe(code);
      return answer.error as Problem;
    };

    it('creates, reads (by id and by slug), changes and deletes an organization', async () => {
      const s = await site();
      const orgId = await s.org({ name: 'Acme Corporation', slug: 'acme', metadata: { plan: 'pro', seats: 5 } });
      const { data } = await s.get(orgId);
      expect(data!.result).toMatchObject({
        orgId,
        name: 'Acme Corporation',
        slug: 'acme',
        metadata: { plan: 'pro', seats: 5 },
        memberCount: 0,
      });
      const bySlug = await s.c.GET('/api/1/org/get', { params: { query: { slug: 'acme' } } });
      expect(bySlug.data!.result.orgId).toBe(orgId);
      problemOf(await s.c.GET('/api/1/org/get', { params: { query: {} } }), 400, 'invalid_request');
      problemOf(
        await s.c.GET('/api/1/org/get', { params: { query: { orgId, slug: 'acme' } } }),
        400,
        'invalid_request',
      );
      problemOf(await s.c.GET('/api/1/org/get', { params: { query: { slug: 'none' } } }), 404, 'org_not_found');
      problemOf(await s.get(GHOST), 404, 'org_not_found');
      problemOf(await s.get('not-a-uuid'), 404, 'org_not_found');

      // Slugs: unique per site, refused at their pattern, removable.
      problemOf(await s.c.POST('/api/1/org/create', { body: { name: 'Other', slug: 'acme' } }), 409, 'slug_taken');
      const bad = problemOf(
        await s.c.POST('/api/1/org/create', { body: { name: 'Bad', slug: '-acme' } }),
        400,
        'invalid_request',
      );
      expect(bad.errors?.[0]?.pointer).toBe('/slug');
      const other = await s.org({ name: 'Other', slug: 'other' });
      problemOf(await s.c.POST('/api/1/org/update', { body: { orgId: other, slug: 'acme' } }), 409, 'slug_taken');

      const updated = await s.c.POST('/api/1/org/update', {
        body: { orgId, name: 'Acme Corp.', slug: null, metadata: { plan: null, seats: 50 } },
      });
      expect(updated.data!.result.status).toBe('organization updated');
      const after = (await s.get(orgId)).data!.result;
      expect(after).toMatchObject({ name: 'Acme Corp.', slug: null, metadata: { seats: 50 } });
      expect(Date.parse(after.updatedAt)).toBeGreaterThanOrEqual(Date.parse(after.createdAt));
      problemOf(await s.c.POST('/api/1/org/update', { body: { orgId } as never }), 400, 'invalid_request');
      problemOf(await s.c.POST('/api/1/org/update', { body: { orgId: GHOST, name: 'X' } }), 404, 'org_not_found');

      const deleted = await s.c.DELETE('/api/1/org/delete', { body: { orgId } });
      expect(deleted.data!.result.status).toBe('organization deleted');
      problemOf(await s.get(orgId), 404, 'org_not_found');
      problemOf(await s.c.DELETE('/api/1/org/delete', { body: { orgId } }), 404, 'org_not_found');

      // Events: created, updated, deleted, with the organization as subject.
      const events = await s.c.GET('/api/1/events', { params: { query: { subject: orgId, limit: 100 } } });
      expect(events.data!.result.events.map((e) => e.type)).toEqual(['org.created', 'org.updated', 'org.deleted']);
      expect(events.data!.result.events[0]!.data).toEqual({ orgId, name: 'Acme Corporation', slug: 'acme' });
      const trail = await h.target.sql(
        `select operation, outcome from audit_log where site = $1 and operation like 'org_%' order by id`,
        [s.name],
      );
      expect(trail.map((r) => r.operation)).toEqual(
        expect.arrayContaining(['org_roles', 'org_create', 'org_update', 'org_delete']),
      );
    });

    it('lists the site’s organizations a page at a time, by key, with q on a prefix of the name or slug', async () => {
      const s = await site();
      const ids: string[] = [];
      for (let i = 0; i < 5; i++) ids.push(await s.org({ name: `Company ${i}`, slug: `co-${i}` }));
      const zeta = await s.org({ name: 'Zeta Industries', slug: 'zz-top' });
      const seen: string[] = [];
      let after: string | undefined;
      for (;;) {
        const { data, error } = await s.c.GET('/api/1/org/list', {
          params: { query: { limit: 2, ...(after === undefined ? {} : { after }) } },
        });
        expect(error).toBeUndefined();
        seen.push(...data!.result.orgs.map((o) => o.orgId));
        if (data!.result.next === null) break;
        after = data!.result.next;
      }
      expect(seen).toEqual([...ids, zeta]);
      const desc = await s.c.GET('/api/1/org/list', { params: { query: { order: 'desc', limit: 1 } } });
      expect(desc.data!.result.orgs[0]!.orgId).toBe(zeta);
      const byName = await s.c.GET('/api/1/org/list', { params: { query: { q: 'zEt' } } });
      expect(byName.data!.result.orgs.map((o) => o.orgId)).toEqual([zeta]);
      const bySlug = await s.c.GET('/api/1/org/list', { params: { query: { q: 'zz-' } } });
      expect(bySlug.data!.result.orgs.map((o) => o.orgId)).toEqual([zeta]);
      const like = await s.c.GET('/api/1/org/list', { params: { query: { q: '%' } } });
      expect(like.data!.result.orgs).toEqual([]);
      // A cursor of another q, or of another site, is refused.
      const first = await s.c.GET('/api/1/org/list', { params: { query: { limit: 1 } } });
      const cursor = first.data!.result.next!;
      problemOf(
        await s.c.GET('/api/1/org/list', { params: { query: { q: 'co', after: cursor } } }),
        400,
        'invalid_cursor',
      );
      const other = await site([]);
      problemOf(await other.c.GET('/api/1/org/list', { params: { query: { after: cursor } } }), 400, 'invalid_cursor');
      expect((await other.c.GET('/api/1/org/list')).data!.result.orgs).toEqual([]);
    });

    it('roles: the site’s set, replaced whole, in its order; bounds and names checked; one in use is kept (409)', async () => {
      const s = await site([]);
      expect((await s.c.GET('/api/1/org/roles')).data!.result.roles).toEqual([]);
      await s.c.POST('/api/1/org/roles', { body: { roles: ROLES } });
      expect((await s.c.GET('/api/1/org/roles')).data!.result.roles).toEqual(ROLES);

      const twice = problemOf(
        await s.c.POST('/api/1/org/roles', {
          body: { roles: [ROLES[0]!, ROLES[1]!, { ...ROLES[0]!, permissions: [] }] },
        }),
        400,
        'invalid_request',
      );
      expect(twice.errors?.[0]?.pointer).toBe('/roles/2/role');
      const badName = problemOf(
        await s.c.POST('/api/1/org/roles', { body: { roles: [{ role: 'Admin', permissions: [] }] } }),
        400,
        'invalid_request',
      );
      expect(badName.errors?.[0]?.pointer).toBe('/roles/0/role');
      const many = Array.from({ length: 51 }, (_, i) => ({ role: `r${i}`, permissions: [] }));
      problemOf(await s.c.POST('/api/1/org/roles', { body: { roles: many } }), 400, 'invalid_request');
      const perms = Array.from({ length: 101 }, (_, i) => `p${i}`);
      problemOf(
        await s.c.POST('/api/1/org/roles', { body: { roles: [{ role: 'a', permissions: perms }] } }),
        400,
        'invalid_request',
      );
      const fifty = Array.from({ length: 50 }, (_, i) => ({ role: `r${i}`, permissions: perms.slice(0, 100) }));
      expect(
        (await s.c.POST('/api/1/org/roles', { body: { roles: [...ROLES, ...fifty.slice(3)] } })).response.status,
      ).toBe(200);
      await s.c.POST('/api/1/org/roles', { body: { roles: ROLES } });

      // A role held by a member, or given by a pending invitation, is not dropped.
      const orgId = await s.org();
      const u = await s.user();
      expect((await s.add(orgId, u.id, ['billing'])).response.status).toBe(200);
      const inUse = problemOf(
        await s.c.POST('/api/1/org/roles', { body: { roles: [ROLES[0]!, ROLES[1]!] } }),
        409,
        'role_in_use',
      );
      expect(inUse.errors?.[0]?.message).toContain('billing');
      expect((await s.c.GET('/api/1/org/roles')).data!.result.roles).toEqual(ROLES);
      await s.c.POST('/api/1/org/member/update', { body: { orgId, _userId: u.id, roles: ['member'] } });
      const invitation = await s.invite(orgId, h.uniqueEmail('invitee'), ['billing']);
      problemOf(await s.c.POST('/api/1/org/roles', { body: { roles: [ROLES[0]!, ROLES[1]!] } }), 409, 'role_in_use');
      await s.c.POST('/api/1/org/invitation/revoke', { body: { invitationId: invitation.invitationId } });
      expect((await s.c.POST('/api/1/org/roles', { body: { roles: [ROLES[0]!, ROLES[1]!] } })).response.status).toBe(
        200,
      );

      // A role's permissions change: the check answers by the new ones at once.
      expect((await s.check(orgId, u.id, 'projects:write')).allowed).toBe(false);
      await s.c.POST('/api/1/org/roles', {
        body: { roles: [ROLES[0]!, { role: 'member', permissions: ['projects:read', 'projects:write'] }] },
      });
      expect((await s.check(orgId, u.id, 'projects:write')).allowed).toBe(true);
      // Another site's roles are its own.
      const other = await site([]);
      expect((await other.c.GET('/api/1/org/roles')).data!.result.roles).toEqual([]);
    });

    it('a role that does not exist is refused wherever a role is named, 400 with a pointer to it', async () => {
      const s = await site();
      const orgId = await s.org();
      const u = await s.user();
      const pointers = (p: Problem) => p.errors?.map((e) => e.pointer);
      const added = problemOf(await s.add(orgId, u.id, ['admin', 'owner']), 400, 'invalid_request');
      expect(pointers(added)).toEqual(['/roles/1']);
      expect((await s.check(orgId, u.id)).member).toBe(false);
      await s.add(orgId, u.id, ['member']);
      const updated = problemOf(
        await s.c.POST('/api/1/org/member/update', { body: { orgId, _userId: u.id, roles: ['ghost', 'member', 'x'] } }),
        400,
        'invalid_request',
      );
      expect(pointers(updated)).toEqual(['/roles/0', '/roles/2']);
      expect((await s.check(orgId, u.id)).roles).toEqual(['member']);
      const invited = problemOf(
        await s.c.POST('/api/1/org/invitation/create', { body: { orgId, email: u.email, roles: ['superuser'] } }),
        400,
        'invalid_request',
      );
      expect(pointers(invited)).toEqual(['/roles/0']);
      expect(
        (await s.c.GET('/api/1/org/invitation/list', { params: { query: { orgId } } })).data!.result.invitations,
      ).toEqual([]);
      const badPattern = problemOf(await s.add(orgId, u.id, ['Not A Role']), 400, 'invalid_request');
      expect(pointers(badPattern)).toEqual(['/roles/0']);
      // A site with no roles at all assumes none.
      const bare = await site([]);
      const bareOrg = await bare.org();
      const bareUser = await bare.user();
      expect(pointers(problemOf(await bare.add(bareOrg, bareUser.id, ['member']), 400, 'invalid_request'))).toEqual([
        '/roles/0',
      ]);
      expect((await bare.add(bareOrg, bareUser.id, [])).response.status).toBe(200);
    });

    it('the check of a disabled or suspended member: still a member with its roles, never allowed (reason account_disabled) (issue 57, G13)', async () => {
      const s = await site();
      const orgId = await s.org();
      const [disabled, suspended] = [await s.user(), await s.user()];
      for (const u of [disabled, suspended]) await s.add(orgId, u.id, ['admin']);
      const admin = { member: true, roles: ['admin'] };
      expect(await s.check(orgId, disabled.id, 'billing:manage')).toEqual({ ...admin, allowed: true, reason: null });
      expect((await s.c.POST('/api/1/user/disable', { body: { _userId: disabled.id } })).response.status).toBe(200);
      const until = new Date(Date.now() + 3_600_000).toISOString();
      expect((await s.c.POST('/api/1/user/disable', { body: { _userId: suspended.id, until } })).response.status).toBe(
        200,
      );
      for (const u of [disabled, suspended]) {
        expect(await s.check(orgId, u.id, 'billing:manage')).toEqual({
          ...admin,
          allowed: false,
          reason: 'account_disabled',
        });
        // Without a permission too: the account's state is the reason, before what was asked.
        expect(await s.check(orgId, u.id)).toEqual({ ...admin, allowed: false, reason: 'account_disabled' });
      }
      // Enabled again, allowed again at once.
      expect((await s.c.POST('/api/1/user/enable', { body: { _userId: disabled.id } })).response.status).toBe(200);
      expect(await s.check(orgId, disabled.id, 'billing:manage')).toEqual({ ...admin, allowed: true, reason: null });
    });

    it('members: add, already_member, update, remove, list by key, user/orgs, memberCount, the check', async () => {
      const s = await site();
      const orgId = await s.org({ name: 'Acme', slug: 'acme' });
      const users: { id: string; email: string }[] = [];
      for (let i = 0; i < 5; i++) users.push(await s.user());
      for (const u of users) expect((await s.add(orgId, u.id, ['member'])).data!.result.status).toBe('member added');
      problemOf(await s.add(orgId, users[0]!.id, ['admin']), 409, 'already_member');
      problemOf(await s.add(orgId, GHOST, ['admin']), 404, 'user_not_found');
      problemOf(await s.add(GHOST, users[0]!.id, ['admin']), 404, 'org_not_found');
      expect((await s.get(orgId)).data!.result.memberCount).toBe(5);

      const up = await s.c.POST('/api/1/org/member/update', {
        body: { orgId, _userId: users[1]!.id, roles: ['admin', 'billing'] },
      });
      expect(up.data!.result.status).toBe('member updated');
      expect(await s.check(orgId, users[1]!.id, 'billing:manage')).toEqual({
        member: true,
        roles: ['admin', 'billing'],
        allowed: true,
        reason: null,
      });
      expect(await s.check(orgId, users[0]!.id, 'billing:manage')).toEqual({
        member: true,
        roles: ['member'],
        allowed: false,
        reason: 'permission_not_granted',
      });
      expect(await s.check(orgId, users[0]!.id)).toEqual({
        member: true,
        roles: ['member'],
        allowed: false,
        reason: 'no_permission_asked',
      });
      expect(await s.check(orgId, users[0]!.id, 'nobody:has')).toMatchObject({
        allowed: false,
        reason: 'permission_not_granted',
      });
      // A verify-only token may ask too (read or verify); one with neither may not.
      const verifier = h.clientFor(
        (await h.target.createToken({ site: s.name, scopes: ['verify'], label: 'verify' })).token,
      );
      const asked = await verifier.GET('/api/1/org/member/check', {
        params: { query: { orgId, _userId: users[1]!.id, permission: 'billing:manage' } },
      });
      expect(asked.data!.result.allowed).toBe(true);
      const writer = h.clientFor(
        (await h.target.createToken({ site: s.name, scopes: ['write'], label: 'write' })).token,
      );
      problemOf(
        await writer.GET('/api/1/org/member/check', { params: { query: { orgId, _userId: users[1]!.id } } }),
        403,
        'forbidden',
      );
      const stranger = await s.user();
      const notMember = { member: false, roles: [], allowed: false, reason: 'not_member' };
      expect(await s.check(orgId, stranger.id, 'projects:read')).toEqual(notMember);
      expect(await s.check(orgId, GHOST)).toEqual(notMember);
      problemOf(
        await s.c.GET('/api/1/org/member/check', { params: { query: { orgId: GHOST, _userId: users[0]!.id } } }),
        404,
        'org_not_found',
      );
      problemOf(
        await s.c.GET('/api/1/org/member/check', {
          params: { query: { orgId, _userId: users[0]!.id, permission: 'Bad Permission' } },
        }),
        400,
        'invalid_request',
      );

      const removed = await s.c.POST('/api/1/org/member/remove', { body: { orgId, _userId: users[4]!.id } });
      expect(removed.data!.result.status).toBe('member removed');
      problemOf(
        await s.c.POST('/api/1/org/member/remove', { body: { orgId, _userId: users[4]!.id } }),
        404,
        'member_not_found',
      );
      problemOf(
        await s.c.POST('/api/1/org/member/update', { body: { orgId, _userId: users[4]!.id, roles: [] } }),
        404,
        'member_not_found',
      );
      expect((await s.check(orgId, users[4]!.id)).member).toBe(false);
      expect((await s.get(orgId)).data!.result.memberCount).toBe(4);

      // The list, two at a time, in order of _userId; the cursor is the organization's only.
      const listed: { _userId: string; email: string; roles: string[] }[] = [];
      let after: string | undefined;
      for (;;) {
        const { data, error } = await s.c.GET('/api/1/org/member/list', {
          params: { query: { orgId, limit: 2, ...(after === undefined ? {} : { after }) } },
        });
        expect(error).toBeUndefined();
        listed.push(...data!.result.members);
        if (data!.result.next === null) break;
        after = data!.result.next;
      }
      expect(listed.map((m) => m._userId)).toEqual(
        users
          .slice(0, 4)
          .map((u) => u.id)
          .sort(),
      );
      expect(listed.find((m) => m._userId === users[1]!.id)).toMatchObject({
        email: users[1]!.email,
        name: 'Ada Lovelace',
        roles: ['admin', 'billing'],
      });
      const otherOrg = await s.org({ name: 'Other' });
      const page = await s.c.GET('/api/1/org/member/list', { params: { query: { orgId, limit: 1 } } });
      problemOf(
        await s.c.GET('/api/1/org/member/list', {
          params: { query: { orgId: otherOrg, after: page.data!.result.next! } },
        }),
        400,
        'invalid_cursor',
      );
      problemOf(await s.c.GET('/api/1/org/member/list', { params: { query: { orgId: GHOST } } }), 404, 'org_not_found');

      await s.add(otherOrg, users[0]!.id, ['admin']);
      const mine = await s.c.GET('/api/1/user/orgs', { params: { query: { _userId: users[0]!.id } } });
      expect(mine.data!.result.orgs).toEqual([
        expect.objectContaining({ orgId, name: 'Acme', slug: 'acme', roles: ['member'] }),
        expect.objectContaining({ orgId: otherOrg, name: 'Other', slug: null, roles: ['admin'] }),
      ]);
      problemOf(await s.c.GET('/api/1/user/orgs', { params: { query: { _userId: GHOST } } }), 404, 'user_not_found');

      // Events: the member events carry the organization as subject, the account and its roles.
      const events = await s.c.GET('/api/1/events', { params: { query: { subject: orgId, limit: 100 } } });
      const types = events.data!.result.events.map((e) => e.type);
      expect(types.filter((t) => t === 'org.member_added')).toHaveLength(5);
      expect(types).toContain('org.member_updated');
      expect(types).toContain('org.member_removed');
      const update = events.data!.result.events.find((e) => e.type === 'org.member_updated');
      expect(update!.data).toEqual({ orgId, _userId: users[1]!.id, roles: ['admin', 'billing'] });
    });

    it('an account belongs to 1,000 organizations at most (409 org_limit_reached)', async () => {
      const s = await site();
      const u = await s.user();
      await h.target.sql(
        `with o as (insert into orgs (id, site, name) select gen_random_uuid(), $1, 'Bulk ' || g from generate_series(1, 1000) g returning id)
         insert into org_memberships (org_id, user_id, site, roles) select o.id, $2, $1, '{member}' from o`,
        [s.name, u.id],
      );
      const orgId = await s.org();
      problemOf(await s.add(orgId, u.id, ['member']), 409, 'org_limit_reached');
      expect((await s.check(orgId, u.id)).member).toBe(false);
      const mine = await s.c.GET('/api/1/user/orgs', { params: { query: { _userId: u.id } } });
      expect(mine.data!.result.orgs).toHaveLength(1000);
    });

    it('invitations: a hashed single-use ticket, listed without it; email_mismatch, email_unverified; accept; revoke', async () => {
      const s = await site();
      const orgId = await s.org();
      const invitee = await s.user(true);
      const made = await s.invite(orgId, invitee.email.toUpperCase(), ['admin']);
      expect(made.ticket).toMatch(/^[A-Za-z0-9_-]{43}$/);
      const expires = Date.parse(made.expiresAt) - Date.now();
      expect(expires).toBeGreaterThan(7 * 86_400_000 - 60_000);
      expect(expires).toBeLessThan(7 * 86_400_000 + 60_000);
      const [row] = await h.target.sql('select * from org_invitations where id = $1', [made.invitationId]);
      expect(row!.ticket_hash).toBe(sha256(made.ticket));
      expect(JSON.stringify(row)).not.toContain(made.ticket);
      const listed = await s.c.GET('/api/1/org/invitation/list', { params: { query: { orgId } } });
      expect(listed.data!.result.invitations).toEqual([
        expect.objectContaining({ invitationId: made.invitationId, roles: ['admin'], expiresAt: made.expiresAt }),
      ]);
      expect(JSON.stringify(listed.data)).not.toContain(made.ticket);
      const short = await s.c.POST('/api/1/org/invitation/create', {
        body: { orgId, email: invitee.email, roles: [], expiresIn: 60 },
      });
      expect(Date.parse(short.data!.result.expiresAt) - Date.now()).toBeLessThan(61_000);
      problemOf(
        await s.c.POST('/api/1/org/invitation/create', {
          body: { orgId, email: invitee.email, roles: [], expiresIn: 31 * 86_400 },
        }),
        400,
        'invalid_request',
      );
      problemOf(
        await s.c.POST('/api/1/org/invitation/create', { body: { orgId: GHOST, email: invitee.email, roles: [] } }),
        404,
        'org_not_found',
      );

      const accept = (ticket: string, userId: string, as: UserAccountsClient = s.c) =>
        as.POST('/api/1/org/invitation/accept', { body: { ticket, _userId: userId } });
      const someoneElse = await s.user(true);
      problemOf(await accept(made.ticket, someoneElse.id), 409, 'email_mismatch');
      // Same email, unverified: a second site's account cannot be used either (another site).
      const unverified = await s.user(false);
      const forUnverified = await s.invite(orgId, unverified.email, ['member']);
      problemOf(await accept(forUnverified.ticket, unverified.id), 409, 'email_unverified');
      problemOf(await accept(made.ticket, GHOST), 422, 'invalid_ticket');
      problemOf(await accept('x'.repeat(43), invitee.id), 422, 'invalid_ticket');

      const ok = await accept(made.ticket, invitee.id);
      expect(ok.data!.result).toEqual({ orgId, status: 'invitation accepted' });
      expect(await s.check(orgId, invitee.id, 'billing:manage')).toEqual({
        member: true,
        roles: ['admin'],
        allowed: true,
        reason: null,
      });
      problemOf(await accept(made.ticket, invitee.id), 422, 'invalid_ticket');
      // Already a member: the other ticket stays.
      const second = await s.invite(orgId, invitee.email, ['member']);
      problemOf(await accept(second.ticket, invitee.id), 409, 'already_member');
      expect(
        (await s.c.GET('/api/1/org/invitation/list', { params: { query: { orgId } } })).data!.result.invitations.map(
          (i) => i.invitationId,
        ),
      ).toContain(second.invitationId);

      const revoked = await s.c.POST('/api/1/org/invitation/revoke', { body: { invitationId: second.invitationId } });
      expect(revoked.data!.result.status).toBe('invitation revoked');
      problemOf(
        await s.c.POST('/api/1/org/invitation/revoke', { body: { invitationId: second.invitationId } }),
        404,
        'invitation_not_found',
      );
      problemOf(await accept(second.ticket, invitee.id), 422, 'invalid_ticket');

      // Expired: refused, and not listed.
      const late = await s.invite(orgId, someoneElse.email, ['member']);
      await h.target.sql(`update org_invitations set expires_at = now() - interval '1 second' where id = $1`, [
        late.invitationId,
      ]);
      problemOf(await accept(late.ticket, someoneElse.id), 422, 'invalid_ticket');
      const pending = await s.c.GET('/api/1/org/invitation/list', { params: { query: { orgId } } });
      expect(pending.data!.result.invitations.map((i) => i.invitationId)).not.toContain(late.invitationId);

      const events = await s.c.GET('/api/1/events', { params: { query: { subject: orgId, limit: 100 } } });
      const accepted = events.data!.result.events.find((e) => e.type === 'org.invitation_accepted');
      expect(accepted!.data).toEqual({ orgId, invitationId: made.invitationId, _userId: invitee.id, roles: ['admin'] });
      expect(JSON.stringify(events.data)).not.toContain(made.ticket);
      expect(events.data!.result.events.filter((e) => e.type === 'org.invitation_created').length).toBeGreaterThan(0);
    });

    it('an invitation is accepted once under 20 concurrent accepts', async () => {
      const s = await site();
      const orgId = await s.org();
      const invitee = await s.user(true);
      const { ticket } = await s.invite(orgId, invitee.email, ['member']);
      const answers = await Promise.all(
        Array.from({ length: 20 }, () =>
          s.c.POST('/api/1/org/invitation/accept', { body: { ticket, _userId: invitee.id } }),
        ),
      );
      const statuses = answers.map((a) => a.response.status).sort();
      expect(statuses.filter((st) => st === 200)).toHaveLength(1);
      // Every other one: the ticket is gone (422); none is a 500 nor a second membership.
      for (const a of answers.filter((x) => x.response.status !== 200)) {
        expect([422, 409]).toContain(a.response.status);
        expect(['invalid_ticket', 'already_member', 'conflict']).toContain((a.error as Problem).code);
      }
      expect((await s.get(orgId)).data!.result.memberCount).toBe(1);
      const rows = await h.target.sql('select count(*)::int as n from org_memberships where org_id = $1', [orgId]);
      expect(rows[0]!.n).toBe(1);
    });

    it('an organization has 1,000 pending invitations at most (409 too_many_invitations); expired ones make room', async () => {
      const s = await site();
      const orgId = await s.org();
      await h.target.sql(
        `insert into org_invitations (id, site, org_id, email, roles, ticket_hash, expires_at)
         select gen_random_uuid(), $1, $2::uuid, 'bulk' || g || '@example.com', '{member}', 'h' || g || $2::text, now() + interval '1 day'
         from generate_series(1, 1000) g`,
        [s.name, orgId],
      );
      problemOf(
        await s.c.POST('/api/1/org/invitation/create', {
          body: { orgId, email: 'one@example.com', roles: ['member'] },
        }),
        409,
        'too_many_invitations',
      );
      const listed = await s.c.GET('/api/1/org/invitation/list', { params: { query: { orgId } } });
      expect(listed.data!.result.invitations).toHaveLength(1000);
      await h.target.sql(
        `update org_invitations set expires_at = now() - interval '1 second' where id in (select id from org_invitations where org_id = $1 limit 1)`,
        [orgId],
      );
      await s.invite(orgId, 'one@example.com');
    });

    it('another site’s organization, member or invitation is a 404 everywhere, and nothing changes', async () => {
      const s = await site();
      const orgId = await s.org({ name: 'Victim', slug: 'victim' });
      const u = await s.user(true);
      await s.add(orgId, u.id, ['admin']);
      const invitation = await s.invite(orgId, u.email, ['member']);
      const before = await h.target.sql(
        `select (select row_to_json(o) from orgs o where id = $1) as org,
           (select json_agg(m order by user_id) from org_memberships m where org_id = $1) as members,
           (select json_agg(i order by id) from org_invitations i where org_id = $1) as invitations`,
        [orgId],
      );
      const evil = await site();
      const e = evil.c;
      problemOf(await evil.get(orgId), 404, 'org_not_found');
      problemOf(await e.GET('/api/1/org/get', { params: { query: { slug: 'victim' } } }), 404, 'org_not_found');
      problemOf(await e.POST('/api/1/org/update', { body: { orgId, name: 'Mine' } }), 404, 'org_not_found');
      problemOf(await e.DELETE('/api/1/org/delete', { body: { orgId } }), 404, 'org_not_found');
      problemOf(await evil.add(orgId, u.id, ['admin']), 404, 'org_not_found');
      problemOf(
        await e.POST('/api/1/org/member/update', { body: { orgId, _userId: u.id, roles: ['member'] } }),
        404,
        'org_not_found',
      );
      problemOf(await e.POST('/api/1/org/member/remove', { body: { orgId, _userId: u.id } }), 404, 'org_not_found');
      problemOf(await e.GET('/api/1/org/member/list', { params: { query: { orgId } } }), 404, 'org_not_found');
      problemOf(
        await e.GET('/api/1/org/member/check', {
          params: { query: { orgId, _userId: u.id, permission: 'billing:manage' } },
        }),
        404,
        'org_not_found',
      );
      problemOf(await e.GET('/api/1/user/orgs', { params: { query: { _userId: u.id } } }), 404, 'user_not_found');
      problemOf(await e.GET('/api/1/org/invitation/list', { params: { query: { orgId } } }), 404, 'org_not_found');
      problemOf(
        await e.POST('/api/1/org/invitation/create', { body: { orgId, email: u.email, roles: ['admin'] } }),
        404,
        'org_not_found',
      );
      problemOf(
        await e.POST('/api/1/org/invitation/revoke', { body: { invitationId: invitation.invitationId } }),
        404,
        'invitation_not_found',
      );
      // Its ticket, for an account of the other site with the same email: a ticket it does not know.
      const twin = await evil.user(true, u.email);
      problemOf(
        await e.POST('/api/1/org/invitation/accept', { body: { ticket: invitation.ticket, _userId: twin.id } }),
        422,
        'invalid_ticket',
      );
      // Its own organization cannot take the other site's account.
      const evilOrg = await evil.org();
      problemOf(await evil.add(evilOrg, u.id, ['admin']), 404, 'user_not_found');
      expect((await evil.check(evilOrg, u.id, 'billing:manage')).member).toBe(false);
      const after = await h.target.sql(
        `select (select row_to_json(o) from orgs o where id = $1) as org,
           (select json_agg(m order by user_id) from org_memberships m where org_id = $1) as members,
           (select json_agg(i order by id) from org_invitations i where org_id = $1) as invitations`,
        [orgId],
      );
      expect(after).toEqual(before);
    });

    // Review (point 3 of the small fixes): org/create took no Idempotency-Key, where every other create does.
    it('org/create takes an Idempotency-Key: a retry replays the 201 and makes one organization; another body under it is 422', async () => {
      const s = await site();
      const header = { 'Idempotency-Key': randomUUID() };
      const body = { name: 'Once Ltd', slug: `once-${randomUUID().slice(0, 8)}`, metadata: { plan: 'pro' } };
      const first = await s.c.POST('/api/1/org/create', { body, params: { header } });
      expect(first.response.status, JSON.stringify(first.error)).toBe(201);
      expect(first.response.headers.get('idempotent-replayed')).toBeNull();
      const again = await s.c.POST('/api/1/org/create', { body, params: { header } });
      expect(again.response.status, JSON.stringify(again.error)).toBe(201);
      expect(again.response.headers.get('idempotent-replayed')).toBe('true');
      expect(again.data).toEqual(first.data);
      const listed = async () =>
        (await s.c.GET('/api/1/org/list', { params: { query: {} } })).data!.result.orgs.map((o) => o.orgId);
      expect(await listed()).toEqual([first.data!.result.orgId]);
      const events = await s.c.GET('/api/1/events', {
        params: { query: { subject: first.data!.result.orgId, limit: 100 } },
      });
      expect(events.data!.result.events.filter((e) => e.type === 'org.created')).toHaveLength(1);
      // Another body under the same key: refused as user/create refuses it, nothing made.
      const other = await s.c.POST('/api/1/org/create', { body: { name: 'Other Ltd' }, params: { header } });
      problemOf(other, 422, 'idempotency_key_reused');
      expect(await listed()).toEqual([first.data!.result.orgId]);
      // A malformed key is the 400 user/create answers, at the header's pointer.
      const bad = await s.c.POST('/api/1/org/create', {
        body: { name: 'Bad Key Ltd' },
        params: { header: { 'Idempotency-Key': 'two words' } },
      });
      expect(problemOf(bad, 400, 'invalid_request').errors).toEqual([
        expect.objectContaining({ pointer: 'Idempotency-Key', code: 'invalid_format' }),
      ]);
      expect(await listed()).toEqual([first.data!.result.orgId]);
    });

    it('org/create with one Idempotency-Key twice at once: the second is 409 idempotency_key_in_use while the first runs; one organization', async () => {
      const s = await site();
      const header = { 'Idempotency-Key': randomUUID() };
      const body = { name: 'Twice Ltd', slug: `twice-${randomUUID().slice(0, 8)}` };
      // The first is held at the start of its write, past the key's claim, until the second is
      // answered: which of two sent at once claims the key first is the machine's to decide.
      const held = h.target.holdNextWrite();
      const first = s.c.POST('/api/1/org/create', { body, params: { header } });
      await held.reached;
      const second = await s.c.POST('/api/1/org/create', { body, params: { header } }).finally(held.release);
      problemOf(second, 409, 'idempotency_key_in_use');
      expect(Number(second.response.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
      const made = await first;
      expect(made.response.status, JSON.stringify(made.error)).toBe(201);
      expect(made.response.headers.get('idempotent-replayed')).toBeNull();
      // The first answered, a third with the key replays its 201.
      const third = await s.c.POST('/api/1/org/create', { body, params: { header } });
      expect(third.response.status, JSON.stringify(third.error)).toBe(201);
      expect(third.response.headers.get('idempotent-replayed')).toBe('true');
      expect(third.data).toEqual(made.data);
      const listed = await s.c.GET('/api/1/org/list', { params: { query: {} } });
      expect(listed.data!.result.orgs.map((o) => o.orgId)).toEqual([made.data!.result.orgId]);
    });

    // Review (point 4 of the small fixes): the purge's removal of memberships was covered by review only.
    it('the purge of an account deleted with a grace period removes its memberships; the organization stays', async () => {
      const s = await site();
      const a = await s.org({ name: 'Stays', slug: `stays-${randomUUID().slice(0, 8)}` });
      const b = await s.org({ name: 'Stays too' });
      const u = await s.user(true);
      const v = await s.user(true);
      await s.add(a, u.id, ['admin']);
      await s.add(a, v.id, ['member']);
      await s.add(b, v.id, ['billing']);
      const members = async (orgId: string) =>
        (await s.c.GET('/api/1/org/member/list', { params: { query: { orgId } } })).data!.result.members.map(
          (m) => m._userId,
        );
      const deleted = await s.c.DELETE('/api/1/user/delete', { body: { _userId: v.id, graceDays: 30 } });
      expect(deleted.response.status).toBe(200);
      // In its grace period the account is out of reach, its memberships kept for a restore.
      expect((await s.get(a)).data!.result.memberCount).toBe(2);

      // The grace period over, the housekeeping job's purge (run here at once, not within its 30 s).
      await h.target.sql(`update users set purge_at = now() - interval '1 second' where id = $1`, [v.id]);
      const deps = h.target.deps!();
      await purgeDeleted({
        db: deps.database.db,
        outbox: deps.outbox,
        sequencer: deps.sequencer,
        accountHooks: deps.accountHooks,
      });
      expect((await s.c.GET('/api/1/user/get', { params: { query: { _userId: v.id } } })).response.status).toBe(404);

      expect(await members(a)).toEqual([u.id]);
      expect(await members(b)).toEqual([]);
      expect((await s.get(a)).data!.result).toMatchObject({ orgId: a, name: 'Stays', memberCount: 1 });
      expect((await s.get(b)).data!.result).toMatchObject({ orgId: b, name: 'Stays too', memberCount: 0 });
      expect((await s.check(a, v.id)).member).toBe(false);
      expect((await s.check(a, u.id)).roles).toEqual(['admin']);
      for (const [orgId, roles] of [
        [a, ['member']],
        [b, ['billing']],
      ] as const) {
        const events = await s.c.GET('/api/1/events', { params: { query: { subject: orgId, limit: 100 } } });
        expect(events.data!.result.events.filter((e) => e.type === 'org.member_removed')).toEqual([
          expect.objectContaining({ data: { orgId, _userId: v.id, roles } }),
        ]);
        // The organization's history stays (its subject is the organization), naming the account
        // by its bare id alone, as the spec's purge text says.
        expect(events.data!.result.events.filter((e) => e.type === 'org.member_added')).toContainEqual(
          expect.objectContaining({ data: { orgId, _userId: v.id, roles } }),
        );
        expect(JSON.stringify(events.data!.result.events)).not.toContain(v.email);
      }
      // The restore finds nothing to bring back.
      const restored = await s.c.POST('/api/1/user/restore', { body: { _userId: v.id } });
      expect(restored.response.status).toBe(404);
      expect(await members(a)).toEqual([u.id]);
    });

    it('deleting an account (for good) or an organization leaves no membership behind; the person’s data lists them', async () => {
      const s = await site();
      const a = await s.org({ name: 'A' });
      const b = await s.org({ name: 'B' });
      const u = await s.user(true);
      const v = await s.user(true);
      await s.add(a, u.id, ['admin']);
      await s.add(b, u.id, ['member']);
      await s.add(a, v.id, ['member']);
      await s.add(b, v.id, ['member']);
      await s.invite(b, h.uniqueEmail('pending'), ['member']);

      const data = await s.c.GET('/api/1/user/data', { params: { query: { _userId: u.id } } });
      expect(data.data!.result.organizations).toEqual([
        expect.objectContaining({ orgId: a, name: 'A', roles: ['admin'] }),
        expect.objectContaining({ orgId: b, name: 'B', roles: ['member'] }),
      ]);

      // An account deleted with a grace period is no member to check; its membership waits for its purge.
      const graced = await s.c.DELETE('/api/1/user/delete', { body: { _userId: v.id, graceDays: 30 } });
      expect(graced.response.status).toBe(200);
      expect((await s.check(a, v.id)).member).toBe(false);
      const listed = await s.c.GET('/api/1/org/member/list', { params: { query: { orgId: a } } });
      expect(listed.data!.result.members.map((m) => m._userId)).toEqual([u.id]);

      const gone = await s.c.DELETE('/api/1/user/delete', { body: { _userId: u.id, graceDays: 0 } });
      expect(gone.response.status).toBe(200);
      const held = await h.target.sql('select * from org_memberships where user_id = $1', [u.id]);
      expect(held).toEqual([]);
      expect((await s.get(a)).data!.result.memberCount).toBe(1);
      const events = await s.c.GET('/api/1/events', { params: { query: { subject: a, limit: 100 } } });
      expect(events.data!.result.events.at(-1)).toMatchObject({
        type: 'org.member_removed',
        data: { orgId: a, _userId: u.id, roles: ['admin'] },
      });

      await s.c.DELETE('/api/1/org/delete', { body: { orgId: b } });
      expect(await h.target.sql('select * from org_memberships where org_id = $1', [b])).toEqual([]);
      expect(await h.target.sql('select * from org_invitations where org_id = $1', [b])).toEqual([]);
    });
  });
}

defineOrgsSuite(pgliteTarget);
defineOrgsSuite(await postgresTarget());
