// Imports that collide (issue 41, point 6): twenty parallel imports of the same twenty emails,
// each in another order, made PostgreSQL detect a deadlock, which reached the caller as a 500.
// Now no answer is a 5xx, each email is created once, and every row is answered created or
// email_taken. PostgreSQL only: the embedded database runs one transaction at a time.
import type { components } from '@user-accounts/client';
import { describe, expect, it } from 'vitest';
import { useTarget } from './harness.ts';
import { FOREIGN_HASHES } from './import-suite.ts';
import { postgresTarget } from './targets.ts';

type ImportItem = components['schemas']['ImportItem'];

const spec = await postgresTarget();
if (spec.skip) console.warn(`\n[contract-tests] parallel imports on PostgreSQL: SKIPPED, ${spec.skip}\n`);

const IMPORTS = 20;
const ROWS = 20;
// 10 rounds, each 20 imports meeting in 20 orders (30 rounds until stop 69: one of the suite's
// longest files; `ROUNDS` is the knob for a longer hunt).
const ROUNDS = 10;

/** A fixed shuffle of `items` for seed `seed` (a small LCG: each import's order is its own, and repeatable). */
function shuffled<T>(items: T[], seed: number): T[] {
  const out = [...items];
  let state = seed * 2654435761 + 1;
  for (let i = out.length - 1; i > 0; i--) {
    state = (state * 1103515245 + 12345) % 2 ** 31;
    const j = state % (i + 1);
    [out[i], out[j]] = [out[j]!, out[i]!];
  }
  return out;
}

describe.skipIf(spec.skip !== undefined)(`${spec.name}: imports that collide`, () => {
  const h = useTarget(spec);

  it(`${IMPORTS} parallel imports of the same ${ROWS} emails in different orders, ${ROUNDS} rounds: no 5xx, each email created once`, async () => {
    // A stored hash: nothing is hashed, so the imports meet in the database at once.
    const passwordHash = FOREIGN_HASHES[0]!.hash;
    const statuses = new Map<number, number>();
    for (let round = 0; round < ROUNDS; round++) {
      const rows = Array.from({ length: ROWS }, (_, i) => ({
        email: h.uniqueEmail(`collide${round}x${i}`),
        name: `Row ${i}`,
        passwordHash,
      }));
      const answers = await Promise.all(
        Array.from({ length: IMPORTS }, (_, k) =>
          h.client.POST('/api/1/user/import', { body: { users: shuffled(rows, round * IMPORTS + k + 1) } }),
        ),
      );
      let created = 0;
      for (const { response, data, error } of answers) {
        statuses.set(response.status, (statuses.get(response.status) ?? 0) + 1);
        expect(response.status, JSON.stringify(error)).toBeLessThan(500);
        if (response.status === 409) expect(error?.code).toBe('conflict');
        for (const item of (data?.result.items ?? []) as ImportItem[]) {
          if ('_userId' in item) created++;
          else expect('error' in item && item.error.code).toBe('email_taken');
        }
      }
      const held = await h.target.sql(
        'select lower(email) as email, count(*)::int as n from users where lower(email) = any($1::text[]) group by 1',
        [rows.map((r) => r.email.toLowerCase())],
      );
      // Each email once: created by exactly one import, or by none when every import touching it
      // was refused with 409 (then nothing of it was written).
      expect(held.every((r) => r.n === 1)).toBe(true);
      expect(created).toBe(held.length);
    }
    console.log(`[contract-tests] parallel imports: answers by status ${JSON.stringify(Object.fromEntries(statuses))}`);
  }, 300_000);
});
