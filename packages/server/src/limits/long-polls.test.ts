import { describe, expect, it } from 'vitest';
import { createLongPollGate } from './long-polls.ts';

describe('createLongPollGate', () => {
  it('bounds the waiting long-polls per token and per site, and gives places back once', () => {
    const gate = createLongPollGate({ perToken: 2, perSite: 3 });
    const a1 = gate.enter('a', 'evil');
    const a2 = gate.enter('a', 'evil');
    expect(gate.enter('a', 'evil')).toEqual({ refused: 'token', limit: 2 });
    const b1 = gate.enter('b', 'evil');
    // The site is full whichever of its tokens asks; another site is not affected.
    expect(gate.enter('c', 'evil')).toEqual({ refused: 'site', limit: 3 });
    const shop = gate.enter('s', 'shop');
    expect('leave' in shop).toBe(true);
    expect(gate.waiting).toBe(4);
    for (const place of [a1, a2, b1, shop]) if ('leave' in place) place.leave();
    if ('leave' in a1) a1.leave(); // a second leave gives back nothing more
    expect(gate.waiting).toBe(0);
    expect('leave' in gate.enter('a', 'evil')).toBe(true);
    expect('leave' in gate.enter('a', 'evil')).toBe(true);
    expect(gate.enter('a', 'evil')).toEqual({ refused: 'token', limit: 2 });
  });
});
