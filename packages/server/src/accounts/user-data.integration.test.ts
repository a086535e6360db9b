// The data answer's list of tables (ACCOUNT_TABLES) against db/schema.ts: a table that names an
// account by a column (a foreign key to users, or a column named as one: user_id, subject,
// account_id) must be in it, with the member of the answer that holds its rows or why the answer
// leaves it out. A new such table without either fails here before anything else runs.
// user-data-suite.ts holds the list to the rows a live database has, on PGlite and PostgreSQL.
import { is, sql } from 'drizzle-orm';
import { getTableConfig, PgTable } from 'drizzle-orm/pg-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { heldElsewhere } from '../assemble.ts';
import { type Database, type Db, rows } from '../db/client.ts';
import * as declared from '../db/schema.ts';
import { numberSite } from '../events/sequencer.ts';
import { databaseLockout } from '../limits/lockout.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { ACCOUNT_TABLES, gatherUserData } from './user-data.ts';

const ACCOUNT_COLUMNS = new Set(['user_id', 'subject', 'account_id']);
// Every table the module declares, whether or not it is in its `schema` object.
const tables = Object.values(declared)
  .filter((value) => is(value, PgTable))
  .map((table) => getTableConfig(table as PgTable));

describe('the tables of the data answer', () => {
  it('lists every table of the schema that names an account', () => {
    const naming = tables
      .filter(
        (t) =>
          t.name === 'users' ||
          t.columns.some((c) => ACCOUNT_COLUMNS.has(c.name)) ||
          t.foreignKeys.some((fk) => getTableConfig(fk.reference().foreignTable).name === 'users'),
      )
      .map((t) => t.name);
    expect(naming).toContain('user_factors');
    for (const name of naming) expect.soft(Object.keys(ACCOUNT_TABLES), `${name} names an account`).toContain(name);
  });

  it('lists only tables of the schema, each with a member of the answer or a reason', () => {
    const names = tables.map((t) => t.name);
    for (const [name, how] of Object.entries(ACCOUNT_TABLES)) {
      expect(names).toContain(name);
      if ('leftOut' in how) expect(how.leftOut.length).toBeGreaterThan(20);
    }
  });
});

// The answer's events are read after its snapshot, a few at a time (issue 41, F2: the embedded
// database's one connection is every site's). Held between the two, while the sequencer numbers
// the queued events or one is pruned, the parts still agree: each event once, as the snapshot saw it.
describe("a person's data read while events move", () => {
  let database: Database;
  beforeAll(async () => {
    database = await openMigratedPglite();
  }, 60_000);
  afterAll(() => database.close());

  /** `db`, whose transactions (the answer's snapshot) run `meanwhile` once after they commit. */
  function holdAfterSnapshot(db: Db, meanwhile: () => Promise<void>): Db {
    let held = false;
    return new Proxy(db, {
      get(target, key) {
        const value = Reflect.get(target, key, target);
        if (key !== 'transaction') return typeof value === 'function' ? value.bind(target) : value;
        return async (...args: Parameters<Db['transaction']>) => {
          const result = await target.transaction(...args);
          if (!held) {
            held = true;
            await meanwhile();
          }
          return result;
        };
      },
    });
  }

  async function account(site: string, numbered: number, queued: number): Promise<string> {
    const [user] = await rows<{ id: string }>(
      database.db,
      sql`insert into users (site, email, name, origin) values (${site}, ${`${site}@example.com`}, 'P', 'api') returning id::text as id`,
    );
    const event = (n: number) =>
      sql`insert into event_queue (site, type, subject, data)
        values (${site}, 'user.updated', ${user!.id}, ${JSON.stringify({ n, pad: 'x'.repeat(1000) })}::jsonb)`;
    for (let n = 0; n < numbered; n++) await database.db.execute(event(n));
    await numberSite(database.db, site);
    for (let n = numbered; n < numbered + queued; n++) await database.db.execute(event(n));
    return user!.id;
  }

  const gather = (db: Db, site: string, id: string) =>
    gatherUserData({ db, lockout: databaseLockout(database.db), heldElsewhere }, site, id);

  it('answers an event numbered after the snapshot once, unnumbered as the snapshot saw it', async () => {
    const id = await account('moving', 5, 7);
    const answer = await gather(
      holdAfterSnapshot(database.db, async () => {
        expect(await numberSite(database.db, 'moving')).toBe(7);
      }),
      'moving',
      id,
    );
    const entries = answer!.events.entries;
    expect(entries.map((e) => (e.data as unknown as { n: number }).n)).toEqual([11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1, 0]);
    expect(entries.map((e) => e.sequence === null)).toEqual([...Array(7).fill(true), ...Array(5).fill(false)]);
    expect(new Set(entries.map((e) => e.id)).size).toBe(12);
    expect(answer!.events.truncated).toBe(false);
    // Read again, the moved events carry their numbers.
    expect((await gather(database.db, 'moving', id))!.events.entries.every((e) => e.sequence !== null)).toBe(true);
  });

  it('answers the small parts (factors, recovery codes, tickets, challenges) with their times to the millisecond', async () => {
    const id = await account('small', 0, 0);
    const db = database.db;
    await db.execute(sql`insert into user_factors (id, user_id, type, label, created_at, enabled_at, last_used_at, secret, site, credential_id, public_key)
      values (gen_random_uuid(), ${id}, 'totp', 'phone', '2026-01-02T03:04:05.678Z', '2026-01-02T03:05:00.001Z', null, 's', null, null, null),
        (gen_random_uuid(), ${id}, 'passkey', null, '2026-01-03T00:00:00.000Z', null, null, null, 'small', 'c', 'k')`);
    await db.execute(sql`insert into recovery_codes (user_id, code_hash, used_at)
      values (${id}, 'a', '2026-02-03T04:05:06.789Z'), (${id}, 'b', null)`);
    await db.execute(sql`insert into tickets (site, user_id, purpose, secret_hash, new_email, tries, created_at, expires_at)
      values ('small', ${id}, 'change_email', 'h', 'new@example.com', 2, '2026-03-01T00:00:00.123Z', '2126-03-01T00:00:00.999Z')`);
    await db.execute(sql`insert into passkey_challenges (challenge_hash, site, purpose, user_id, expires_at)
      values ('c', 'small', 'register', ${id}, '2126-01-01T00:00:00.010Z')`);
    const answer = (await gather(db, 'small', id))!;
    expect(answer.factors.map(({ factorId: _, ...f }) => f)).toEqual([
      {
        type: 'totp',
        label: 'phone',
        status: 'enabled',
        createdAt: '2026-01-02T03:04:05.678Z',
        enabledAt: '2026-01-02T03:05:00.001Z',
        lastUsedAt: null,
      },
      {
        type: 'passkey',
        label: null,
        status: 'pending',
        createdAt: '2026-01-03T00:00:00.000Z',
        enabledAt: null,
        lastUsedAt: null,
      },
    ]);
    expect(answer.recoveryCodes).toEqual([{ usedAt: '2026-02-03T04:05:06.789Z' }, { usedAt: null }]);
    expect(answer.tickets).toEqual([
      {
        purpose: 'change_email',
        newEmail: 'new@example.com',
        failedTries: 2,
        createdAt: '2026-03-01T00:00:00.123Z',
        expiresAt: '2126-03-01T00:00:00.999Z',
      },
    ]);
    expect(answer.passkeyChallenges).toEqual([{ purpose: 'register', expiresAt: '2126-01-01T00:00:00.010Z' }]);
  });

  it('leaves out an event of the snapshot gone (pruned) before its data is read, and answers the rest', async () => {
    const id = await account('pruned', 4, 0);
    const answer = await gather(
      holdAfterSnapshot(database.db, async () => {
        await database.db.execute(sql`delete from events where site = 'pruned' and seq = 1`);
      }),
      'pruned',
      id,
    );
    expect(answer!.events.entries.map((e) => (e.data as unknown as { n: number }).n)).toEqual([3, 2, 1]);
  });
});
