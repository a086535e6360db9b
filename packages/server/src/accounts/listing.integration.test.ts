import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Database } from '../db/client.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { cursorScope, cursorsOf, LONG_WALK, secondWalk, WALK_BUDGET } from './listing.ts';

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
