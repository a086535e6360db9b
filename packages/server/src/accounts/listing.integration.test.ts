import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Database } from '../db/client.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { countQuery, cursorScope, cursorsOf, LONG_WALK, secondWalk, WALK_BUDGET } from './listing.ts';

let database: Database;
beforeAll(async () => {
  database = await openMigratedPglite();
});
afterAll(async () => {
  vi.useRealTimers();
  await database.close();
});

describe('list cursors', () => {
  const scope = cursorScope('shop', { email: 'ada' }, 'asc');
  const position = { c: 1_763_800_000_000, i: '0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b' };

  it('read back what they were signed with, for the same scope only', async () => {
    const cursors = await cursorsOf(database.db);
    const cursor = cursors.sign(position, scope);
    expect(cursors.read(cursor, scope)).toMatchObject(position);
    expect(() => cursors.read(cursor, cursorScope('shop', { email: 'ad' }, 'asc'))).toThrow(/cursor/);
    expect(() => cursors.read(cursor, cursorScope('other', { email: 'ada' }, 'asc'))).toThrow(/cursor/);
  });

  it('are good for 24 hours, then refused as too old', async () => {
    const cursors = await cursorsOf(database.db);
    vi.useFakeTimers({ now: new Date('2026-11-22T00:00:00Z') });
    const cursor = cursors.sign(position, scope);
    vi.setSystemTime(new Date('2026-11-22T23:59:00Z'));
    expect(cursors.read(cursor, scope)).toMatchObject(position);
    vi.setSystemTime(new Date('2026-11-23T00:01:00Z'));
    let error: unknown;
    try {
      cursors.read(cursor, scope);
    } catch (e) {
      error = e;
    }
    expect(error).toMatchObject({ status: 400, code: 'invalid_cursor' });
    vi.useRealTimers();
  });
});

describe("a metadata filter's second walk", () => {
  it('reads twice the rows the first walk says a page takes, at most LONG_WALK', () => {
    // 50 matches in the first 1,000 rows: 101 matches take about 2,020 rows; twice that.
    expect(secondWalk(50, 100)).toBe(Math.ceil((2 * 101 * WALK_BUDGET) / 50));
    expect(secondWalk(10, 100)).toBe(Math.min(LONG_WALK, Math.ceil((2 * 101 * WALK_BUDGET) / 10)));
    expect(secondWalk(1, 1000)).toBe(LONG_WALK);
  });
});

describe("list's search (issue 64)", () => {
  /** The plan of count's statement for the search, with sequential scans priced out. */
  async function planOf(search: string): Promise<string> {
    return database.db.transaction(async (tx) => {
      await tx.execute(sql`set local enable_seqscan = off`);
      const rows = await tx.execute(sql`explain ${countQuery(tx, 'shop', { search })}`);
      return (rows as unknown as Record<string, string>[]).map((row) => Object.values(row)[0]).join('\n');
    });
  }

  it('answers each reading through an index of its own, ORed: never a read through the site’s accounts', async () => {
    // Enough accounts (4,000, of two sites), with statistics, for the planner to weigh its
    // choices as on a real site; on an empty table every plan costs alike.
    await database.db.execute(sql`
      insert into users (site, email, name, phone, origin)
      select case when g % 4 = 0 then 'other' else 'shop' end, 'person' || g || '@host' || (g % 200) || '.example',
             'Person ' || g || ' Surname' || (g % 500), '+44 20 7946 ' || lpad((g % 10000)::text, 4, '0'), 'api'
      from generate_series(1, 4000) g`);
    await database.db.execute(sql`
      insert into user_identities (id, site, user_id, provider, subject)
      select gen_random_uuid(), site, id, 'google', md5(id::text) from users`);
    await database.db.execute(sql`analyze users; analyze user_identities`);
    const cases: [string, string[]][] = [
      ['ada', ['users_list_email_prefix_idx', 'users_list_name_prefix_idx', 'users_list_name_words_idx']],
      ['0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b', ['users_pkey']],
      ['acme.example', ['users_list_email_domain_idx']],
      ['+44 20 7946 0018', ['users_list_phone_digits_idx']],
      ['110169484474386276334', ['user_identities_site_subject_idx', 'users_pkey']],
    ];
    for (const [search, indexes] of cases) {
      const plan = await planOf(search);
      for (const index of indexes) expect(plan, `${search}: ${index}`).toContain(index);
      expect(plan, search).toContain('BitmapOr');
      expect(plan, search).not.toMatch(/Seq Scan on users\b/);
      expect(plan, search).not.toContain('users_list_created_idx');
    }
  });
});
