// The site's webhooks through the client (issue 31, point 2): its endpoints without their secrets,
// an endpoint's deliveries newest first a page at a time (and its failures alone), a replay that
// queues the same event again once, and the site's bound on pending deliveries. Each test works in
// a site of its own; the endpoint and deliveries are stored as the CLI and the sender leave them
// (webhook-seed.ts). Server targets only. Delivery itself is webhooks.system.test.ts's.
import type { Problem } from '@user-accounts/client';
import { describe, expect, it } from 'vitest';
import { GHOST, useTarget } from './harness.ts';
import type { TargetSpec } from './targets.ts';
import { seedWebhook } from './webhook-seed.ts';

export function defineWebhookApiSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: the site's webhooks`, () => {
    const h = useTarget(spec);
    let sites = 0;
    /** A site with an account, its events (created, updated, disabled) and an endpoint with a delivery of each. */
    const newSite = async (count = 3) => {
      const site = `hooks-${Date.now().toString(36)}-${sites++}`;
      const { token } = await h.target.createToken({ site, scopes: ['read', 'write', 'events'], label: 'hooks' });
      const client = h.clientFor(token);
      const user = await h.createUser({}, client);
      await client.POST('/api/1/user/update', { body: { _userId: user.id, name: 'Renamed' } });
      await client.POST('/api/1/user/disable', { body: { _userId: user.id } });
      const hook = await seedWebhook(h.target.sql, site, user.id, { count });
      return { site, client, user, hook };
    };

    it('lists the endpoints of the token’s site only, with what the sender knows of them and never a secret', async () => {
      const { client, hook } = await newSite();
      await newSite(1); // another site's endpoint
      const { data, response } = await client.GET('/api/1/webhooks');
      expect(response.status).toBe(200);
      expect(data!.result.endpoints).toEqual([
        {
          endpointId: hook.endpointId,
          url: 'https://hooks.example.com/accounts',
          types: ['user.*'],
          createdAt: expect.any(String),
          failingSince: null,
          disabledAt: null,
          disabledReason: null,
          pending: 0,
        },
      ]);
      expect(JSON.stringify(data)).not.toContain('whsec_');
    });

    it('shows an endpoint’s URL without its credentials or its query, which may hold a receiver’s secret', async () => {
      const { site, client, user } = await newSite(1);
      await seedWebhook(h.target.sql, site, user.id, {
        count: 1,
        url: 'https://ops:hunter2@hooks.example.com/in?key=s3cret',
      });
      const { data } = await client.GET('/api/1/webhooks');
      expect(data!.result.endpoints.map((e) => e.url)).toEqual([
        'https://hooks.example.com/accounts',
        'https://hooks.example.com/in?…',
      ]);
      expect(JSON.stringify(data)).not.toMatch(/hunter2|s3cret/);
    });

    it('pages an endpoint’s deliveries newest first, with their state, attempts and last error; state=failed shows the failures', async () => {
      const { client, hook } = await newSite();
      const all = [];
      let before: string | undefined;
      do {
        const { data, error } = await client.GET('/api/1/webhooks/deliveries', {
          params: { query: { endpointId: hook.endpointId, limit: 2, ...(before !== undefined && { before }) } },
        });
        expect(error).toBeUndefined();
        all.push(...data!.result.deliveries);
        before = data!.result.next ?? undefined;
      } while (before !== undefined);
      expect(all.map((d) => d.deliveryId)).toEqual([...hook.deliveryIds].reverse());
      const [failed, , delivered] = all;
      expect(delivered).toMatchObject({
        state: 'delivered',
        attempts: 1,
        lastStatus: 204,
        lastError: null,
        type: 'user.created',
        sequence: String(hook.seqs[0]).padStart(20, '0'),
        nextAttemptAt: null,
      });
      expect(delivered!.deliveredAt).not.toBeNull();
      expect(failed).toMatchObject({ state: 'failed', attempts: 5, lastStatus: 503, lastError: 'answered 503' });
      // The event's id is the delivery's webhook-id, as the feed gives it.
      const { data: feed } = await client.GET('/api/1/events', { params: { query: {} } });
      expect(all.map((d) => d.eventId).reverse()).toEqual(feed!.result.events.slice(0, 3).map((e) => e.id));

      const { data: failures } = await client.GET('/api/1/webhooks/deliveries', {
        params: { query: { endpointId: hook.endpointId, state: 'failed' } },
      });
      expect(failures!.result.deliveries.map((d) => d.deliveryId)).toEqual(hook.deliveryIds.slice(1).reverse());
      expect(failures!.result.next).toBeNull();
    });

    it('replays a delivery once: 202 with a new pending delivery of the same event, then 200 naming it while it waits', async () => {
      const { site, client, hook } = await newSite();
      const original = hook.deliveryIds[1]!;
      const replayed = await client.POST('/api/1/webhooks/deliveries/replay', { body: { deliveryId: original } });
      expect(replayed.response.status).toBe(202);
      const delivery = replayed.data!.result.delivery;
      expect(replayed.data!.result.status).toBe('delivery replayed');
      expect(delivery).toMatchObject({
        endpointId: hook.endpointId,
        sequence: String(hook.seqs[1]).padStart(20, '0'),
        type: 'user.updated',
        state: 'pending',
        attempts: 0,
        lastStatus: null,
        lastError: null,
        deliveredAt: null,
      });
      expect(Number(delivery.deliveryId)).toBeGreaterThan(Number(original));
      // The endpoint's list says so: the new delivery first, pending, and one pending on the endpoint.
      const { data: page } = await client.GET('/api/1/webhooks/deliveries', {
        params: { query: { endpointId: hook.endpointId, limit: 1 } },
      });
      expect(page!.result.deliveries).toEqual([delivery]);
      const { data: endpoints } = await client.GET('/api/1/webhooks');
      expect(endpoints!.result.endpoints[0]!.pending).toBe(1);

      // Again, of the original or of the new one: nothing more is queued while one waits.
      for (const deliveryId of [original, delivery.deliveryId]) {
        const again = await client.POST('/api/1/webhooks/deliveries/replay', { body: { deliveryId } });
        expect(again.response.status).toBe(200);
        expect(again.data!.result).toEqual({ delivery, status: 'delivery already pending' });
      }
      const counted = await h.target.sql('select count(*)::int as n from webhook_deliveries where endpoint_id = $1', [
        hook.endpointId,
      ]);
      expect(counted).toEqual([{ n: 4 }]);
      // Each replay is in the site's audit log, naming the token and the request; no account's trail.
      const audited = await h.target.sql(
        "select status, outcome, user_id from audit_log where site = $1 and operation = 'webhook' order by id",
        [site],
      );
      expect(audited).toEqual([
        { status: 202, outcome: `delivery replayed (delivery ${original})`, user_id: null },
        { status: 200, outcome: 'delivery already pending', user_id: null },
        { status: 200, outcome: 'delivery already pending', user_id: null },
      ]);
    });

    it('is 404 webhook_not_found for an endpoint or a delivery of another site, or none, and changes nothing', async () => {
      const { client } = await newSite(1);
      const other = await newSite(1);
      const before = await h.target.sql('select count(*)::int as n from webhook_deliveries');
      const list = await client.GET('/api/1/webhooks/deliveries', {
        params: { query: { endpointId: other.hook.endpointId } },
      });
      const none = await client.GET('/api/1/webhooks/deliveries', { params: { query: { endpointId: GHOST } } });
      const replay = await client.POST('/api/1/webhooks/deliveries/replay', {
        body: { deliveryId: other.hook.deliveryIds[0]! },
      });
      const missing = await client.POST('/api/1/webhooks/deliveries/replay', { body: { deliveryId: '999999999999' } });
      for (const answer of [list, none, replay, missing]) {
        expect(answer.response.status).toBe(404);
        expect((answer.error as Problem).code).toBe('webhook_not_found');
      }
      expect(await h.target.sql('select count(*)::int as n from webhook_deliveries')).toEqual(before);
    });

    it('refuses a malformed query or body with 400 invalid_request at its pointer', async () => {
      const { client } = await newSite(1);
      const missing = await h.raw('/api/1/webhooks/deliveries');
      expect(missing.status).toBe(400);
      const problem = (await missing.json()) as Problem;
      expect(problem.errors?.map((e) => e.pointer)).toEqual(['/endpointId']);
      const bad = await client.POST('/api/1/webhooks/deliveries/replay', {
        body: { deliveryId: 'not-a-number' },
      });
      expect(bad.response.status).toBe(400);
      expect((bad.error as Problem).errors?.map((e) => e.pointer)).toEqual(['/deliveryId']);
    });

    it('is 410 events_expired for a delivery whose event the retention removed', async () => {
      const { site, client, hook } = await newSite(1);
      await h.target.sql('delete from events where site = $1 and seq = $2', [site, hook.seqs[0]]);
      const gone = await client.POST('/api/1/webhooks/deliveries/replay', {
        body: { deliveryId: hook.deliveryIds[0]! },
      });
      expect(gone.response.status).toBe(410);
      expect((gone.error as Problem).code).toBe('events_expired');
      const { data } = await client.GET('/api/1/webhooks/deliveries', {
        params: { query: { endpointId: hook.endpointId } },
      });
      expect(data!.result.deliveries.map((d) => d.eventId)).toEqual([null]);
    });

    it('bounds a site’s replays: with 1,000 deliveries pending, a replay is 409 too_many_deliveries_pending; another site still replays', async () => {
      const { site, client, hook } = await newSite(2);
      const other = await newSite(2);
      await h.target.sql(
        `insert into webhook_deliveries (endpoint_id, site, seq, subject, type)
         select $1, $2, $3, $4, 'user.created' from generate_series(1, 1000)`,
        [hook.endpointId, site, hook.seqs[0], (await h.target.sql('select gen_random_uuid()::text as id'))[0]!.id],
      );
      const refused = await client.POST('/api/1/webhooks/deliveries/replay', {
        body: { deliveryId: hook.deliveryIds[1]! },
      });
      expect(refused.response.status).toBe(409);
      expect((refused.error as Problem).code).toBe('too_many_deliveries_pending');
      const theirs = await other.client.POST('/api/1/webhooks/deliveries/replay', {
        body: { deliveryId: other.hook.deliveryIds[1]! },
      });
      expect(theirs.response.status).toBe(202);
    });

    it('needs the events scope', async () => {
      const { site } = await newSite(1);
      const { token } = await h.target.createToken({ site, scopes: ['read', 'write'], label: 'no events' });
      const { response, error } = await h.clientFor(token).GET('/api/1/webhooks');
      expect(response.status).toBe(403);
      expect((error as Problem).code).toBe('forbidden');
    });
  });
}
