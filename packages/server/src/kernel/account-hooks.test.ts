// The domains' hooks joined (kernel/account-hooks.ts): every domain's hook for a happening runs,
// one after another in the order given, with what the write passed, and the events come back in
// that order; a domain without a hook for it is passed over.
import { describe, expect, it } from 'vitest';
import type { Db } from '../db/client.ts';
import { type DomainHooks, joinHooks } from './account-hooks.ts';
import type { EventEntry } from './outbox.ts';

const tx = {} as Db;
const revoked = (userId: string, n: number): EventEntry => ({
  type: 'session.revoked',
  userId,
  data: { n },
});

describe('joinHooks', () => {
  it('runs each domain’s hook in order, one at a time, and answers their events in that order', async () => {
    const ran: string[] = [];
    let running = 0;
    const domain =
      (name: string, events: number): DomainHooks['deleted'] =>
      async (given, userId, how) => {
        expect(given).toBe(tx);
        expect(running++).toBe(0);
        await new Promise((resolve) => setTimeout(resolve, 5));
        running--;
        ran.push(`${name} ${userId} ${how.forGood}`);
        return Array.from({ length: events }, (_, n) => revoked(userId, n));
      };
    const hooks = joinHooks([{ deleted: domain('sessions', 2) }, {}, { deleted: domain('orgs', 1) }]);
    const events = await hooks.deleted(tx, 'u1', { forGood: true });
    expect(ran).toEqual(['sessions u1 true', 'orgs u1 true']);
    expect(events.map((e) => e.data)).toEqual([{ n: 0 }, { n: 1 }, { n: 0 }]);
  });

  it('answers no events for a happening no domain reacts to, and each happening runs only its own hooks', async () => {
    const ran: string[] = [];
    const hooks = joinHooks([
      {
        passwordChanged: async (_tx, id) => {
          ran.push(`password ${id}`);
          return [revoked(id, 1)];
        },
      },
      {
        purged: async (_tx, ids) => {
          ran.push(`purged ${ids.join(',')}`);
          return [];
        },
      },
    ]);
    expect(await hooks.disabled(tx, 'u2')).toEqual([]);
    expect(await hooks.inboxProven(tx, 'u2')).toEqual([]);
    expect(await hooks.purged(tx, ['u3', 'u4'])).toEqual([]);
    expect(await hooks.passwordChanged(tx, 'u5')).toEqual([revoked('u5', 1)]);
    expect(ran).toEqual(['purged u3,u4', 'password u5']);
  });
});
