// The chores over a real embedded database.
import { type SQL, sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, type Db, openPglite, rows } from '../db/client.ts';
import { PRUNE_BATCH } from '../events/queue.ts';
import { addEndpoint } from '../events/webhooks/endpoints.ts';
import { purgeAudit, purgeEvents } from './housekeeping.ts';

let database: Database;
beforeAll(async () => {
  database = await openPglite(undefined);
  await database.migrate();
});
afterAll(() => database.close());

const dialect = new PgDialect();

/** `on`, noting what each statement that deletes from `table` answered. */
function watchingDeletes(on: Db, table = 'webhook_deliveries') {
  const answers: unknown[] = [];
  const db = new Proxy(on, {
    get(target, key, receiver) {
      if (key !== 'execute') return Reflect.get(target, key, receiver);
      return async (query: SQL) => {
        const result = await target.execute(query);
        if (dialect.sqlToQuery(query).sql.includes(`delete from ${table}`)) {
          const [row] = (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as { n?: unknown }[];
          answers.push(row?.n);
        }
        return result;
      };
    },
  }) as Db;
  return { db, answers };
}

describe('purging events', () => {
  it('removes deliveries done before the retention in bounded statements, and keeps pending and recent ones', async () => {
    const { id } = await addEndpoint(database.db, { site: 'hk', url: 'https://example.com/hooks', types: ['*'] });
    const old = PRUNE_BATCH * 2 + 5;
    await database.db.execute(sql`insert into webhook_deliveries (endpoint_id, site, seq, subject, type, state, created_at)
      select ${id}::uuid, 'hk', n, gen_random_uuid(), 'user.created', case when n % 2 = 0 then 'delivered' else 'failed' end,
        now() - interval '8 days'
      from generate_series(1, ${old}) n`);
    await database.db.execute(sql`insert into webhook_deliveries (endpoint_id, site, seq, subject, type, state, created_at)
      values (${id}::uuid, 'hk', ${old + 1}, gen_random_uuid(), 'user.created', 'pending', now() - interval '8 days'),
        (${id}::uuid, 'hk', ${old + 2}, gen_random_uuid(), 'user.created', 'delivered', now())`);

    const watched = watchingDeletes(database.db);
    await purgeEvents(watched.db, 7 * 86_400_000);
    expect(watched.answers).toEqual([PRUNE_BATCH, PRUNE_BATCH, 5]);
    const left = await rows<{ seq: string; state: string }>(
      database.db,
      sql`select seq::text as seq, state from webhook_deliveries where endpoint_id = ${id} order by seq`,
    );
    expect(left).toEqual([
      { seq: String(old + 1), state: 'pending' },
      { seq: String(old + 2), state: 'delivered' },
    ]);
  }, 60_000);
});

describe('purging the audit trail', () => {
  it('removes rows older than the retention in bounded statements, and keeps the recent ones', async () => {
    const row = (age: string) =>
      sql`(now() - ${age}::interval, 'hk-audit', 'tok', 'create', null, 'req', 201, 'user created')`;
    const old = PRUNE_BATCH * 2 + 5;
    await database.db.execute(sql`insert into audit_log (at, site, token_id, operation, user_id, request_id, status, outcome)
      select now() - interval '400 days' + n * interval '1 second', 'hk-audit', 'tok', 'create', null, 'req-' || n, 201, 'user created'
      from generate_series(1, ${old}) n`);
    await database.db.execute(sql`insert into audit_log (at, site, token_id, operation, user_id, request_id, status, outcome)
      values ${row('366 days')}, ${row('364 days')}, ${row('1 minute')}`);

    const watched = watchingDeletes(database.db, 'audit_log');
    expect(await purgeAudit(watched.db, 365 * 86_400_000)).toBe(old + 1);
    expect(watched.answers).toEqual([PRUNE_BATCH, PRUNE_BATCH, 6]);
    const left = await rows<{ days: number }>(
      database.db,
      sql`select extract(day from now() - at)::int as days from audit_log where site = 'hk-audit' order by at`,
    );
    expect(left).toEqual([{ days: 364 }, { days: 0 }]);
  }, 60_000);
});
