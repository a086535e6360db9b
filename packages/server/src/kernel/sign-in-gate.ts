// Whether an account may sign in the way it is trying to (issue 61, point 5): an organization that
// verified the account's email domain, with a connection that enforces single sign-on, wants it
// signed in through its own IdP, and every other login of the account is refused (403
// sso_required with the connection, so that the site can redirect the person). The logins ask
// (accounts/verify.ts, accounts/login-tickets.ts, factors/passkeys.ts, identities/identities.ts,
// providers/flow.ts); sso/enforcement.ts answers; the composition root hands the answer in
// (assemble.ts), as it does the account hooks, so that none of the logins imports sso/.
import type { Db } from '../db/client.ts';
import type { ApiError } from '../errors.ts';

/** How a login proves who it is. */
export type SignInWay =
  | { kind: 'password' }
  | { kind: 'login_ticket' }
  | { kind: 'passkey' }
  /** An identity at another provider: social sign-in, identity/verify, or an enterprise sign-in (`sso:{id}`). */
  | { kind: 'identity'; provider: string };

/** The account a login signs in: one that exists, or, for an account made by the login, its email. */
export type SignInAccount = { userId: string } | { email: string };

export interface SignInGate {
  /** The refusal of this login (ApiError 403 sso_required), or undefined: it may go on. */
  refusal(db: Db, site: string, account: SignInAccount, way: SignInWay): Promise<ApiError | undefined>;
}

/** What the logins take beside WriteDeps: absent, no login is refused (an operator's own CLI write). */
export interface GateDeps {
  signInGate?: SignInGate | undefined;
}

/** The refusal, if any, when a gate is given. */
export async function refusalOf(
  deps: GateDeps,
  db: Db,
  site: string,
  account: SignInAccount,
  way: SignInWay,
): Promise<ApiError | undefined> {
  return deps.signInGate === undefined ? undefined : deps.signInGate.refusal(db, site, account, way);
}
