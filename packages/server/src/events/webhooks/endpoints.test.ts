import { describe, expect, it } from 'vitest';
import { EVENT_TYPES } from '../../kernel/outbox.ts';
import { TYPE_PATTERN } from './endpoints.ts';

describe('TYPE_PATTERN, what `cli webhook add --types` takes', () => {
  it('takes every event type the service sends, user.* and *', () => {
    for (const type of [...EVENT_TYPES, 'user.factor_added', 'user.factor_removed', 'user.*', '*']) {
      expect(TYPE_PATTERN.test(type), type).toBe(true);
    }
  });

  it('refuses what is no event type, and a dot taken as any character', () => {
    for (const type of ['user.made', 'user', 'userXcreated', 'user.created ', 'order.*', '**', 'user.created|*']) {
      expect(TYPE_PATTERN.test(type), type).toBe(false);
    }
  });
});
