// What becomes of an account's memberships when the account goes (kernel/account-hooks.ts): each
// is removed, its organization's count with it, with its org.member_removed event, when the
// account goes for good (a delete without a grace period, a purge). In its grace period they stay,
// for a restore to find them.
import type { DomainHooks } from '../kernel/account-hooks.ts';
import { removeMembershipsOf } from './members.ts';

export const orgHooks: DomainHooks = {
  deleted: async (tx, userId, { forGood }) => (forGood ? removeMembershipsOf(tx, [userId]) : []),
  purged: (tx, userIds) => removeMembershipsOf(tx, userIds),
};
