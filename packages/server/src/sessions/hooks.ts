// What becomes of an account's sessions when something happens to the account (issue 43, point 6):
// every live one ends, in the account's write (kernel/account-hooks.ts), each with its
// session.revoked event and the reason. A restore brings none back; a purge finds none live (the
// delete ended them) and the rows go with the account's.
import type { DomainHooks } from '../kernel/account-hooks.ts';
import { endSessionsOf } from './manage.ts';

export const sessionHooks: DomainHooks = {
  passwordChanged: (tx, userId) => endSessionsOf(tx, userId, 'password_changed'),
  disabled: (tx, userId) => endSessionsOf(tx, userId, 'account_disabled'),
  // What was signed in before the inbox was proven may be a stranger's (accounts/login-tickets.ts).
  inboxProven: (tx, userId) => endSessionsOf(tx, userId, 'inbox_proven'),
  // With or without a grace period.
  deleted: (tx, userId) => endSessionsOf(tx, userId, 'account_deleted'),
};
