import { describe, expect, it } from 'vitest';
import { isUuid, uuidv7 } from './ids.ts';

describe('uuidv7', () => {
  it('gives distinct version-7 ids across many refills of its random pool, with the time first', () => {
    const before = Date.now();
    const ids = Array.from({ length: 10_000 }, () => uuidv7());
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) {
      expect(isUuid(id)).toBe(true);
      expect(id[14]).toBe('7');
      expect('89ab').toContain(id[19]);
      const ms = Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16);
      expect(ms).toBeGreaterThanOrEqual(before);
      expect(ms).toBeLessThanOrEqual(Date.now());
    }
    // The random part differs even between ids of the same millisecond.
    const randomParts = new Set(ids.map((id) => id.replace(/-/g, '').slice(12)));
    expect(randomParts.size).toBe(ids.length);
  });
});
