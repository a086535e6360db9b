// Deletion with a grace period through the client (issue 30, point 1): an account in its grace
// period answers every operation as a missing one, keeps its email taken, and comes back whole
// with restore; restore is 404 for an account never deleted, deleted for good, or already back.
// The purge at the period's end (and the search of every table after it) is the housekeeping
// job's: packages/server/src/ops/housekeeping.integration.test.ts. Each test works in a site of its own.
// Server targets only.
import type { ChangeEvent, Problem } from '@user-accounts/client';
import { describe, expect, it } from 'vitest';
import { useTarget } from './harness.ts';
import type { TargetSpec } from './targets.ts';

export function defineDeletionSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: deletion with a grace period`, () => {
    const h = useTarget(spec);
    let sites = 0;
    const newSite = async () => {
      const site = `grace-${Date.now().toString(36)}-${sites++}`;
      const scopes = ['read', 'write', 'verify', 'events', 'export'] as const;
      const { token } = await h.target.createToken({ site, scopes: [...scopes], label: 'grace' });
      return { site, client: h.clientFor(token) };
    };
    type Client = Awaited<ReturnType<typeof newSite>>['client'];
    const status = async (p: Promise<{ response: Response }>) => (await p).response.status;
    const code = async (p: Promise<{ error?: unknown }>) => ((await p).error as Problem | undefined)?.code;
    const get = (client: Client, id: string) => client.GET('/api/1/user/get', { params: { query: { _userId: id } } });

    it('puts the account out of reach of every operation as a missing one, and restore brings it back whole', async () => {
      const { client } = await newSite();
      const user = await h.createUser({ phone: '+44 20 7946 0018' }, client);
      const before = (await get(client, user.id)).data!.result;
      const removed = await client.DELETE('/api/1/user/delete', { body: { _userId: user.id, graceDays: 30 } });
      expect(removed.response.status).toBe(200);
      expect(removed.data).toEqual({ result: { status: 'user removed' } });

      const missing = h.uniqueEmail('missing');
      expect(await code(get(client, user.id))).toBe('user_not_found');
      expect(await code(client.GET('/api/1/user/get', { params: { query: { email: user.email } } }))).toBe(
        'user_not_found',
      );
      const body = { _userId: user.id };
      expect(await code(client.POST('/api/1/user/update', { body: { ...body, name: 'Eve' } }))).toBe('user_not_found');
      expect(await code(client.POST('/api/1/user/disable', { body }))).toBe('user_not_found');
      expect(await code(client.POST('/api/1/user/enable', { body }))).toBe('user_not_found');
      expect(await code(client.DELETE('/api/1/user/delete', { body }))).toBe('user_not_found');
      // verify: the plain 422, the same as for an email no account has.
      const inGrace = await client.POST('/api/1/user/verify', { body: { email: user.email, password: user.password } });
      const never = await client.POST('/api/1/user/verify', { body: { email: missing, password: user.password } });
      expect(inGrace.response.status).toBe(422);
      expect({ ...(inGrace.error as Problem), requestId: '' }).toEqual({ ...(never.error as Problem), requestId: '' });
      const { data: listed } = await client.GET('/api/1/user/list', { params: { query: {} } });
      expect(listed!.result.users.map((u) => u._userId)).not.toContain(user.id);
      const { data: counted } = await client.GET('/api/1/user/count', { params: { query: {} } });
      expect(counted!.result.count).toBe(0);
      // Its email stays taken: a restore never collides.
      const again = await client.POST('/api/1/user/create', {
        body: { email: user.email.toUpperCase(), password: h.password(), name: 'Someone Else' },
      });
      expect(again.response.status).toBe(409);
      expect((again.error as Problem).code).toBe('email_taken');

      const restored = await client.POST('/api/1/user/restore', { body });
      expect(restored.response.status).toBe(200);
      expect(restored.data).toEqual({ result: { status: 'user restored' } });
      expect((await get(client, user.id)).data!.result).toEqual(before);
      const login = await client.POST('/api/1/user/verify', { body: { email: user.email, password: user.password } });
      expect(login.response.status).toBe(200);
      // Restored already: nothing to restore.
      expect(await code(client.POST('/api/1/user/restore', { body }))).toBe('user_not_found');
    });

    it('restore is 404 for an account never deleted, deleted for good, of another site, or no id at all', async () => {
      const { client } = await newSite();
      const other = await newSite();
      const live = await h.createUser({}, client);
      const gone = await h.createUser({}, client);
      const theirs = await h.createUser({}, other.client);
      await client.DELETE('/api/1/user/delete', { body: { _userId: gone.id, graceDays: 0 } });
      await other.client.DELETE('/api/1/user/delete', { body: { _userId: theirs.id, graceDays: 7 } });
      for (const id of [live.id, gone.id, theirs.id, 'not-an-id']) {
        const { response, error } = await client.POST('/api/1/user/restore', { body: { _userId: id } });
        expect([id, response.status, (error as Problem).code]).toEqual([id, 404, 'user_not_found']);
      }
      // Deleted for good (0 days, as before): its email is free at once.
      expect(
        await status(
          client.POST('/api/1/user/create', { body: { email: gone.email, password: h.password(), name: 'New' } }),
        ),
      ).toBe(201);
      expect(await status(get(client, live.id))).toBe(200);
    });

    it('refuses graceDays outside 0 to 90, and takes the site default when the request gives none', async () => {
      const { site, client } = await newSite();
      const user = await h.createUser({}, client);
      for (const graceDays of [-1, 91, 1.5]) {
        const { response, error } = await client.DELETE('/api/1/user/delete', {
          body: { _userId: user.id, graceDays },
        });
        expect(response.status).toBe(400);
        expect((error as Problem).errors?.[0]?.pointer).toBe('/graceDays');
      }
      expect(await status(get(client, user.id))).toBe(200);
      // The operator's default (cli site set --site NAME --deletion-grace 14d writes this row).
      await h.target.sql('insert into site_settings (site, deletion_grace_days) values ($1, 14)', [site]);
      await client.DELETE('/api/1/user/delete', { body: { _userId: user.id } });
      expect(await status(get(client, user.id))).toBe(404);
      expect(await status(client.POST('/api/1/user/restore', { body: { _userId: user.id } }))).toBe(200);
    });

    it('says user.deleted with graceDays, then user.restored with the account', async () => {
      const { client } = await newSite();
      const user = await h.createUser({}, client);
      await client.DELETE('/api/1/user/delete', { body: { _userId: user.id, graceDays: 30 } });
      await client.POST('/api/1/user/restore', { body: { _userId: user.id } });
      const { data } = await client.GET('/api/1/events', { params: { query: { limit: 100 } } });
      const mine = data!.result.events.filter((e: ChangeEvent) => e.subject === user.id);
      expect(mine.map((e) => [e.type, e.data])).toEqual([
        ['user.created', expect.objectContaining({ _userId: user.id })],
        ['user.deleted', { _userId: user.id, graceDays: 30 }],
        ['user.restored', expect.objectContaining({ _userId: user.id, email: user.email })],
      ]);
    });
  });
}
