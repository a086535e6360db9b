// The outbox and the feed over a real embedded database: numbering per site, a rollback giving
// its numbers back, and the retention (events pruned, a reader behind them told 410).
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openPglite, rows } from './db/client.ts';
import { loadConfig } from './env.ts';
import { appendEvents, feedBounds, pruneEvents, readEvents } from './events.ts';
import { listEvents } from './routes/list-events.ts';
import { problemOf, testApp } from './testing/hono.ts';

let database: Database;
beforeAll(async () => {
  database = await openPglite(undefined);
  await database.migrate();
});
afterAll(() => database.close());

let sites = 0;
async function site(accounts: number) {
  const name = `ev-${sites++}`;
  const ids: string[] = [];
  for (let i = 0; i < accounts; i++) {
    const [row] = await rows<{ id: string }>(
      database.db,
      sql`insert into users (site, email, name, origin) values (${name}, ${`${name}-${i}@example.com`}, 'Ada', 'api') returning id::text as id`,
    );
    ids.push(row!.id);
  }
  return { name, ids };
}

const created = (siteName: string, ids: string[]) =>
  database.db.transaction((tx) =>
    appendEvents(
      tx,
      siteName,
      ids.map((userId) => ({ type: 'user.created' as const, userId })),
    ),
  );

function feed(siteName: string) {
  const app = testApp({
    deps: { database },
    vars: { token: { id: 't', site: siteName, scopes: ['events'] } as never },
  });
  app.get(listEvents.path, (c) => listEvents.handle(c, listEvents.parse(c)));
  return (query: string) => app.request(`${listEvents.path}${query}`);
}

describe('the outbox', () => {
  it('numbers each site on its own, and a rolled-back write gives its numbers back', async () => {
    const a = await site(3);
    const b = await site(1);
    await created(a.name, a.ids.slice(0, 2));
    await created(b.name, b.ids);
    await expect(
      database.db.transaction(async (tx) => {
        await appendEvents(tx, a.name, [{ type: 'user.created', userId: a.ids[2]! }]);
        throw new Error('the write failed after its event');
      }),
    ).rejects.toThrow('the write failed');
    await created(a.name, [a.ids[2]!]);
    expect((await readEvents(database.db, a.name, undefined, 10)).map((e) => [e.sequence, e.subject])).toEqual([
      ['1', a.ids[0]],
      ['2', a.ids[1]],
      ['3', a.ids[2]],
    ]);
    expect((await readEvents(database.db, b.name, undefined, 10)).map((e) => e.sequence)).toEqual(['1']);
  });
});

describe('the retention', () => {
  it('removes old events, and answers a reader behind them 410 events_expired, a reader without after from the oldest kept', async () => {
    const s = await site(4);
    await created(s.name, s.ids);
    await database.db.execute(
      sql`update events set time = now() - interval '8 days' where site = ${s.name} and seq <= 2`,
    );
    expect(await pruneEvents(database.db, 7 * 86_400_000)).toBeGreaterThanOrEqual(2);
    expect(await feedBounds(database.db, s.name)).toEqual({ last: 4, prunedThrough: 2 });

    const get = feed(s.name);
    for (const after of ['0', '1']) {
      const answer = await get(`?after=${after}`);
      expect(answer.status).toBe(410);
      const problem = await problemOf(answer);
      expect(problem.code).toBe('events_expired');
      expect(problem.detail).toContain('the oldest kept is 3');
    }
    const fromTwo = (await (await get('?after=2')).json()) as {
      result: { events: { sequence: string }[]; next: string };
    };
    expect(fromTwo.result.events.map((e) => e.sequence)).toEqual(['3', '4']);
    const fromOldest = (await (await get('')).json()) as { result: { events: { sequence: string }[]; next: string } };
    expect(fromOldest.result.events.map((e) => e.sequence)).toEqual(['3', '4']);
    expect(fromOldest.result.next).toBe('4');
    expect((await get('?after=5')).status).toBe(400);
  });

  it('is EVENTS_RETENTION, 7 days unless told, never under the 3 days of webhook retries', () => {
    expect(loadConfig({}).eventsRetentionMs).toBe(7 * 86_400_000);
    expect(loadConfig({ EVENTS_RETENTION: '72h' }).eventsRetentionMs).toBe(72 * 3_600_000);
    for (const bad of ['2d', '71h', 'week', '7']) {
      expect(() => loadConfig({ EVENTS_RETENTION: bad })).toThrow(/EVENTS_RETENTION must be/);
    }
  });
});
