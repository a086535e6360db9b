// The sequencer over a real embedded database: what an idle server's look at the queue costs
// after many events went through it.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, rows } from '../db/client.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { startSequencer, VACUUM_EVERY } from './sequencer.ts';

let database: Database;
beforeAll(async () => {
  database = await openMigratedPglite();
}, 60_000);
afterAll(() => database.close());

describe('the sequencer', () => {
  it('leaves the queue as small as what is pending once many events went through it (the embedded database has no autovacuum)', async () => {
    const sequencer = startSequencer(
      database.db,
      (error) => {
        throw error;
      },
      600_000,
    );
    await database.db.execute(sql`insert into event_queue (site, type, subject, data)
      select 'busy', 'user.created', gen_random_uuid(), '{}'::jsonb from generate_series(1, ${VACUUM_EVERY})`);
    sequencer.kick();
    await sequencer.stop();
    const [left] = await rows<{ numbered: number; pages: number }>(
      database.db,
      sql`select (select count(*)::int from events where site = 'busy') as numbered,
        (pg_relation_size('event_queue') / current_setting('block_size')::int)::int as pages`,
    );
    // Without the VACUUM, the 10,000 rows moved out leave their 143 pages, read by every look.
    expect(left).toEqual({ numbered: VACUUM_EVERY, pages: 0 });
  }, 30_000);
});
