// An account's Security tab: its lockout (verify's guessing limits: locked until when, the
// failures counted) and Unlock, its second factors and passkeys (removed one by one), and its
// identities at other providers (unlinked one by one).
import type { components, User, UserAccountsClient } from '@user-accounts/client';
import type { Scope } from '../session.ts';
import { Action, formatTime } from '../ui.tsx';
import { Factors } from './account-factors.tsx';
import { Identities } from './account-identities.tsx';

type Lockout = components['schemas']['AccountLockout'];

/** The lockout as support reads it: locked until when, and the failures that count toward the next lock. */
export function lockoutText(lockout: Lockout): string {
  const counted = [
    lockout.failures > 0 && `${lockout.failures} wrong password${lockout.failures === 1 ? '' : 's'}`,
    lockout.secondFactorFailures > 0 &&
      `${lockout.secondFactorFailures} wrong code${lockout.secondFactorFailures === 1 ? '' : 's'}`,
  ].filter(Boolean);
  const recent = counted.length === 0 ? '' : ` (${counted.join(', ')} recently)`;
  return lockout.locked && lockout.lockedUntil !== null
    ? `Locked until ${formatTime(lockout.lockedUntil)}${recent}`
    : `Not locked${recent}`;
}

export function AccountSecurity(props: {
  api: UserAccountsClient;
  user: User;
  lockout: Lockout | undefined;
  refused: Set<Scope>;
  busy: boolean;
  unlock: () => void;
  answered: (status: string) => void;
  reload: () => Promise<void>;
}) {
  const { lockout, refused } = props;
  const userId = props.user._userId;
  return (
    <>
      <section aria-labelledby="lockout-title">
        <h2 id="lockout-title">Lockout</h2>
        {lockout && (
          <div class="actions">
            <span class={lockout.locked ? 'badge bad' : 'badge'}>{lockoutText(lockout)}</span>
            {(lockout.locked || lockout.failures > 0 || lockout.secondFactorFailures > 0) && (
              <Action scope="write" refused={refused} busy={props.busy} onClick={props.unlock}>
                Unlock
              </Action>
            )}
          </div>
        )}
        {lockout?.lastFailureAt && <p class="hint">Last failure counted: {formatTime(lockout.lastFailureAt)}.</p>}
      </section>
      <Factors api={props.api} userId={userId} refused={refused} onChanged={props.answered} />
      <Identities
        api={props.api}
        userId={userId}
        identities={props.user.identities}
        refused={refused}
        onChanged={async (status) => {
          props.answered(status);
          await props.reload();
        }}
      />
    </>
  );
}
