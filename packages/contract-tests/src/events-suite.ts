// Change events through the client: every committed write is an event of its site, in order,
// none for a write that failed; the feed long-polls, and never skips an event while writers race.
// Needs state: server targets only.
import type { ChangeEvent, Problem, UserAccountsClient } from '@user-accounts/client';
import { beforeAll, describe, expect, it } from 'vitest';
import { issuedTicket, useTarget } from './harness.ts';
import type { TargetSpec } from './targets.ts';

/** A sequence number as `sequence` and `next` carry it: 20 digits, zero-padded. */
const seq = (n: number) => String(n).padStart(20, '0');

export function defineEventsSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: change events`, () => {
    const h = useTarget(spec);
    /** A site of its own per test, so that its sequence starts at 1 and nothing else writes to it. */
    let sites = 0;
    async function freshSite(scopes: ('read' | 'write' | 'events')[] = ['read', 'write', 'events']) {
      const site = `ev-${process.pid}-${Date.now() % 100000}-${sites++}`;
      const { token } = await h.target.createToken({ site, scopes, label: 'events' });
      return { site, api: h.clientFor(token), token };
    }
    const feed = async (
      api: UserAccountsClient,
      query: { after?: string; limit?: number; wait?: number; subject?: string } = {},
    ) => {
      const { data, error, response } = await api.GET('/api/1/events', { params: { query } });
      return { data, error: error as Problem | undefined, status: response.status };
    };
    const all = async (api: UserAccountsClient, after?: string) => {
      const { data } = await feed(api, { ...(after !== undefined && { after }), limit: 1000 });
      return data!.result.events;
    };

    let a: Awaited<ReturnType<typeof freshSite>>;
    beforeAll(async () => {
      a = await freshSite();
    });

    it('makes every committed write an event of its site, in order, with the account as get answers it', async () => {
      const user = await h.createUser({ name: 'Ada Lovelace' }, a.api);
      await a.api.POST('/api/1/user/update', {
        body: { _userId: user.id, phone: '+44 20 7946 0018', password: `${h.password()}!` },
      });
      await a.api.POST('/api/1/user/disable', { body: { _userId: user.id } });
      await a.api.POST('/api/1/user/disable', { body: { _userId: user.id } }); // already disabled: no change, no event
      await a.api.POST('/api/1/user/enable', { body: { _userId: user.id } });
      const { data: got } = await a.api.GET('/api/1/user/get', { params: { query: { _userId: user.id } } });
      await a.api.DELETE('/api/1/user/delete', { body: { _userId: user.id } });

      const events = (await all(a.api)).filter((e) => e.subject === user.id);
      expect(events.map((e) => e.type)).toEqual([
        'user.created',
        'user.updated',
        'user.disabled',
        'user.enabled',
        'user.deleted',
      ]);
      const sequences = events.map((e) => Number(e.sequence));
      expect(sequences).toEqual([...sequences].sort((x, y) => x - y));
      for (const e of events) {
        expect(e).toMatchObject({
          specversion: '1.0',
          source: `urn:user-accounts:site:${a.site}`,
          datacontenttype: 'application/json',
        });
      }
      expect(events[1]!.changedfields).toBe('phone,password');
      expect(events[1]!.data).toMatchObject({ _userId: user.id, phone: '+44 20 7946 0018' });
      // enable: the account as get answered it just after, metadata and verified contacts included.
      expect(events[3]!.data).toEqual(got!.result);
      // A delete for good (no grace period: the site's default is 0).
      expect(events[4]!.data).toEqual({ _userId: user.id, graceDays: 0 });
      expect(new Set(events.map((e) => e.id)).size).toBe(events.length);
      // No password, hash or token in any event.
      const text = JSON.stringify(events);
      expect(text).not.toMatch(/argon2|passwordHash|"password"|ua_/);
      for (const sent of h.passwords) expect(text).not.toContain(sent);
    });

    // Issue 28: events carry the account after the change, metadata included: a merge's result,
    // and a ticket's redeem (the verified flag and its time), each as get answers it just after.
    it('carries the account as get answers it after a metadata merge and after a ticket’s redeem', async () => {
      const c = await freshSite();
      const created = await c.api.POST('/api/1/user/create', {
        body: {
          email: h.uniqueEmail('merged'),
          password: h.password(),
          name: 'Merged',
          metadata: { plan: 'free', prefs: { theme: 'dark', lang: 'en' } } as Record<string, unknown>,
        },
      });
      const user = { id: created.data!.result._userId };
      const getNow = async () =>
        (await c.api.GET('/api/1/user/get', { params: { query: { _userId: user.id } } })).data!.result;
      await c.api.POST('/api/1/user/update', {
        body: {
          _userId: user.id,
          metadata: { plan: 'pro', prefs: { lang: null }, seats: 3 } as Record<string, unknown>,
        },
      });
      const merged = await getNow();
      expect(merged.metadata).toEqual({ plan: 'pro', prefs: { theme: 'dark' }, seats: 3 });
      const issued = await c.api.POST('/api/1/user/ticket', { body: { _userId: user.id, purpose: 'verify_email' } });
      const ticket = issuedTicket(issued.data!.result);
      const redeemed = await c.api.POST('/api/1/user/ticket/redeem', { body: { ticket, purpose: 'verify_email' } });
      expect(redeemed.response.status).toBe(200);
      const verified = await getNow();
      expect(verified.emailVerified).toBe(true);

      const events = await all(c.api, undefined);
      const mine = events.filter((e) => e.subject === user.id);
      expect(mine.map((e) => e.type)).toEqual(['user.created', 'user.updated', 'user.updated']);
      expect(mine[1]!.changedfields).toBe('metadata');
      expect(mine[1]!.data).toEqual(merged);
      expect(mine[2]!.data).toEqual(verified);
      // Issuing a ticket changes no account and is no event; the ticket is in none.
      expect(JSON.stringify(events)).not.toContain(ticket);
    });

    it('numbers a site’s events 1, 2, 3… and pages through them with after, limit and next', async () => {
      const b = await freshSite();
      for (let i = 0; i < 5; i++) await h.createUser({}, b.api);
      const first = await feed(b.api, { limit: 2 });
      expect(first.data!.result.events.map((e) => e.sequence)).toEqual([seq(1), seq(2)]);
      expect(first.data!.result.next).toBe(seq(2));
      const rest = await feed(b.api, { after: '2', limit: 1000 });
      expect(rest.data!.result.events.map((e) => e.sequence)).toEqual([seq(3), seq(4), seq(5)]);
      const none = await feed(b.api, { after: '5' });
      expect(none.data!.result).toEqual({ events: [], next: seq(5) });
      const past = await feed(b.api, { after: '6' });
      expect(past.status).toBe(400);
      expect(past.error?.code).toBe('invalid_request');
    });

    it('answers one account’s events with subject: in order, paged with after, limit and next; none of another site’s account; 400 for a malformed one', async () => {
      const b = await freshSite();
      const ada = await h.createUser({ name: 'Ada' }, b.api);
      const bob = await h.createUser({ name: 'Bob' }, b.api);
      // Interleaved: Ada 1, Bob 2, then Ada and Bob in turn (3 to 10), then Bob alone (11).
      for (let i = 0; i < 4; i++) {
        await b.api.POST('/api/1/user/update', { body: { _userId: ada.id, name: `Ada ${i}` } });
        await b.api.POST('/api/1/user/update', { body: { _userId: bob.id, name: `Bob ${i}` } });
      }
      await b.api.POST('/api/1/user/disable', { body: { _userId: bob.id } });
      const adas = [1, 3, 5, 7, 9].map(seq);

      const pages: string[][] = [];
      const nexts: string[] = [];
      let after: string | undefined;
      for (;;) {
        const page = await feed(b.api, { subject: ada.id, limit: 2, ...(after !== undefined && { after }) });
        expect(page.status).toBe(200);
        const events = page.data!.result.events;
        expect(events.every((e) => e.subject === ada.id)).toBe(true);
        if (events.length === 0) break;
        pages.push(events.map((e) => e.sequence));
        after = page.data!.result.next;
        nexts.push(after);
      }
      expect(pages).toEqual([[seq(1), seq(3)], [seq(5), seq(7)], [seq(9)]]);
      // A full page's next is its last event; a short one's, where the site's feed stood (Bob's 10 and 11 are behind it).
      expect(nexts).toEqual([seq(3), seq(7), seq(11)]);
      const { data: whole } = await feed(b.api, { subject: ada.id.toUpperCase() });
      expect(whole!.result.events.map((e) => e.sequence)).toEqual(adas);
      expect(whole!.result.events.map((e) => e.type)).toEqual(['user.created', ...Array(4).fill('user.updated')]);
      const { data: bobs } = await feed(b.api, { subject: bob.id, after: '9' });
      expect(bobs!.result.events.map((e) => [e.sequence, e.type])).toEqual([
        [seq(10), 'user.updated'],
        [seq(11), 'user.disabled'],
      ]);

      // Another site's account, and an id no account has: an empty page, as if it had no events.
      for (const subject of [ada.id, '0193a1e4-0000-7000-8000-000000000000']) {
        const other = await feed(a.api, { subject });
        expect(other.status).toBe(200);
        expect(other.data!.result.events).toEqual([]);
      }
      const bad = await feed(b.api, { subject: 'not-a-uuid' });
      expect(bad.status).toBe(400);
      expect(bad.error?.code).toBe('invalid_request');
      expect(bad.error?.errors?.map((e) => e.pointer)).toEqual(['/subject']);
    });

    it('answers a filtered reader behind the removed events 410 events_expired, as an unfiltered one', async () => {
      const b = await freshSite();
      const ada = await h.createUser({}, b.api);
      const bob = await h.createUser({}, b.api);
      await b.api.POST('/api/1/user/update', { body: { _userId: ada.id, name: 'Ada again' } });
      // A read waits for the writes' events to be numbered (on PostgreSQL the sequencer runs apart).
      expect((await all(b.api)).map((e) => e.sequence)).toEqual([seq(1), seq(2), seq(3)]);
      // What the retention's pruning (pruneEvents) leaves: the first two removed, pruned_through 2.
      await h.target.sql('delete from events where site = $1 and seq <= 2', [b.site]);
      await h.target.sql('update event_sequences set pruned_through = 2 where site = $1', [b.site]);
      for (const subject of [ada.id, bob.id]) {
        const behind = await feed(b.api, { subject, after: '1' });
        expect(behind.status).toBe(410);
        expect(behind.error?.code).toBe('events_expired');
      }
      const { data } = await feed(b.api, { subject: ada.id, after: '2' });
      expect(data!.result.events.map((e) => e.sequence)).toEqual([seq(3)]);
    });

    it('long-polls with subject: answers when that account’s event commits, not another’s', async () => {
      const b = await freshSite();
      const ada = await h.createUser({}, b.api);
      const bob = await h.createUser({}, b.api);
      const started = performance.now();
      const waiting = feed(b.api, { subject: ada.id, after: '2', wait: 20 });
      // Bob's change wakes the poll, which finds nothing of Ada's and waits on; Ada's answers it.
      await b.api.POST('/api/1/user/update', { body: { _userId: bob.id, name: 'Bob again' } });
      await b.api.POST('/api/1/user/update', { body: { _userId: ada.id, name: 'Ada again' } });
      const answered = await waiting;
      expect(answered.data!.result.events.map((e) => [e.sequence, e.subject])).toEqual([[seq(4), ada.id]]);
      expect(performance.now() - started).toBeLessThan(10_000);

      // The client's iterator with subject: the account's events only, as they commit.
      const seen: ChangeEvent[] = [];
      const stop = new AbortController();
      const reading = (async () => {
        for await (const event of b.api.followEvents({ subject: bob.id, wait: 2, signal: stop.signal })) {
          seen.push(event);
          if (seen.length === 3) stop.abort();
        }
      })();
      await b.api.POST('/api/1/user/update', { body: { _userId: ada.id, name: 'Ada once more' } });
      await b.api.POST('/api/1/user/disable', { body: { _userId: bob.id } });
      await reading;
      expect(seen.map((e) => [e.sequence, e.type, e.subject])).toEqual([
        [seq(2), 'user.created', bob.id],
        [seq(3), 'user.updated', bob.id],
        [seq(6), 'user.disabled', bob.id],
      ]);
    });

    it('writes no event for a write that failed: 409, 412, 404, 400', async () => {
      const b = await freshSite();
      const user = await h.createUser({}, b.api);
      const before = await all(b.api);
      const taken = await b.api.POST('/api/1/user/create', {
        body: { email: user.email, password: h.password(), name: 'X' },
      });
      expect(taken.response.status).toBe(409);
      const stale = await b.api.POST('/api/1/user/update', {
        body: { _userId: user.id, name: 'Y' },
        headers: { 'If-Match': '"999"' },
      });
      expect(stale.response.status).toBe(412);
      const gone = await b.api.DELETE('/api/1/user/delete', {
        body: { _userId: '0193a1e4-0000-7000-8000-000000000000' },
      });
      expect(gone.response.status).toBe(404);
      const weak = await b.api.POST('/api/1/user/update', { body: { _userId: user.id, password: 'password' } });
      expect(weak.response.status).toBe(400);
      expect(await all(b.api)).toEqual(before);
    });

    it('shows a token only its own site’s events, and needs the events scope', async () => {
      const b = await freshSite();
      await h.createUser({}, b.api);
      const mine = await all(b.api);
      expect(mine).toHaveLength(1);
      expect((await all(a.api)).some((e) => e.id === mine[0]!.id)).toBe(false);
      const noScope = await freshSite(['read', 'write']);
      const refused = await feed(noScope.api);
      expect(refused.status).toBe(403);
      expect(refused.error?.code).toBe('forbidden');
    });

    it('makes each account an import creates an event', async () => {
      const b = await freshSite();
      const emails = [h.uniqueEmail('imp'), h.uniqueEmail('imp'), h.uniqueEmail('imp')];
      const { data } = await b.api.POST('/api/1/user/import', {
        body: { users: emails.map((email) => ({ email, name: 'Imported', password: h.password() })) },
      });
      const ids = data!.result.items.map((item) => ('_userId' in item ? item._userId : undefined));
      const events = await all(b.api);
      expect(events.map((e) => [e.type, e.subject])).toEqual(ids.map((id) => ['user.created', id]));
      expect(events.map((e) => e.sequence)).toEqual([seq(1), seq(2), seq(3)]);
    });

    it('long-polls: answers as soon as an event commits, or empty once wait has passed', async () => {
      const b = await freshSite();
      let started = performance.now();
      const empty = await feed(b.api, { after: '0', wait: 1 });
      expect(empty.data!.result).toEqual({ events: [], next: seq(0) });
      expect(performance.now() - started).toBeGreaterThanOrEqual(950);

      started = performance.now();
      const waiting = feed(b.api, { after: '0', wait: 20 });
      await new Promise((resolve) => setTimeout(resolve, 300));
      const user = await h.createUser({}, b.api);
      const answered = await waiting;
      const took = performance.now() - started;
      expect(answered.data!.result.events.map((e) => e.subject)).toEqual([user.id]);
      expect(took).toBeLessThan(5_000);
      console.log(`[events] ${spec.name}: a long-poll answered ${Math.round(took - 300)} ms after the write began`);
    });

    it('follows the feed with the client’s async iterator, and never skips an event while 8 writers race (checked against the audit trail)', async () => {
      const b = await freshSite();
      const seen: ChangeEvent[] = [];
      const stop = new AbortController();
      const reading = (async () => {
        for await (const event of b.api.followEvents({ wait: 2, limit: 7, signal: stop.signal })) seen.push(event);
      })();
      const writers = Array.from({ length: 8 }, async (_, w) => {
        for (let i = 0; i < 6; i++) {
          const user = await h.createUser({ name: `Writer ${w}` }, b.api);
          await b.api.POST('/api/1/user/update', { body: { _userId: user.id, name: `Writer ${w} again` } });
          if (i % 2 === 0) await b.api.DELETE('/api/1/user/delete', { body: { _userId: user.id } });
        }
      });
      await Promise.all(writers);
      const audited = await h.target.sql(
        `select operation, user_id from audit_log where site = $1 and status < 300 order by id`,
        [b.site],
      );
      const deadline = Date.now() + 10_000;
      while (seen.length < audited.length && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      stop.abort();
      await reading;
      expect(seen.map((e) => e.sequence)).toEqual(audited.map((_, i) => seq(i + 1)));
      const key = (type: string, id: unknown) => `${type} ${id}`;
      const typeOf: Record<string, string> = { create: 'user.created', update: 'user.updated', delete: 'user.deleted' };
      expect(seen.map((e) => key(e.type, e.subject)).sort()).toEqual(
        audited.map((r) => key(typeOf[r.operation as string]!, r.user_id)).sort(),
      );
      console.log(
        `[events] ${spec.name}: 8 writers, ${audited.length} writes, ${seen.length} events read in order, none skipped`,
      );
    });
  });
}
