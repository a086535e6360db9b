// What follows, in other domains, from what happens to an account (issue 58, point 2): a password
// changed ends the account's sessions, a delete ends them too and, for good, takes its
// memberships with it. accounts/ says what happened and runs the hooks in its write's own
// transaction, at the point where it happens (before the row goes, so that what goes with it has
// its events); each domain says, in its own folder, what it does then (sessions/hooks.ts,
// orgs/hooks.ts); the composition root joins them (assemble.ts accountHooks). So accounts/ imports
// none of the domains that react, and a new one reacts without an edit of accounts/.
import type { Db } from '../db/client.ts';
import type { EventEntry } from './outbox.ts';

/**
 * Each happening, run in the writing transaction: what the hooks changed is committed or rolled
 * back with the write, and the events they answer are queued with the write's own, after it.
 */
export interface AccountHooks {
  /** The account's password changed: set by update, or by a reset_password ticket redeemed. */
  passwordChanged(tx: Db, userId: string): Promise<EventEntry[]>;
  /** The account was disabled (and was not before). */
  disabled(tx: Db, userId: string): Promise<EventEntry[]>;
  /** The account's inbox was proven for the first time (a login link or code redeemed). */
  inboxProven(tx: Db, userId: string): Promise<EventEntry[]>;
  /**
   * The account was deleted: `forGood`, its row goes right after the hooks (no grace period);
   * else it is only marked, restorable until its grace period ends.
   */
  deleted(tx: Db, userId: string, how: { forGood: boolean }): Promise<EventEntry[]>;
  /** The accounts' grace periods are over: their rows go right after the hooks. */
  purged(tx: Db, userIds: string[]): Promise<EventEntry[]>;
}

/** One domain's hooks: the happenings it reacts to. */
export type DomainHooks = Partial<AccountHooks>;

/** What the writes that run the hooks take beside WriteDeps. */
export interface HookDeps {
  accountHooks: AccountHooks;
}

/**
 * The domains' hooks as one: each happening runs every domain's hook for it, one after another
 * in the order given (the same transaction serves one statement at a time), and answers their
 * events in that order.
 */
export function joinHooks(domains: readonly DomainHooks[]): AccountHooks {
  const each =
    <K extends keyof AccountHooks>(name: K) =>
    async (...args: Parameters<AccountHooks[K]>): Promise<EventEntry[]> => {
      const events: EventEntry[] = [];
      for (const domain of domains) {
        const hook = domain[name] as ((...a: Parameters<AccountHooks[K]>) => Promise<EventEntry[]>) | undefined;
        if (hook !== undefined) events.push(...(await hook(...args)));
      }
      return events;
    };
  return {
    passwordChanged: each('passwordChanged'),
    disabled: each('disabled'),
    inboxProven: each('inboxProven'),
    deleted: each('deleted'),
    purged: each('purged'),
  };
}
