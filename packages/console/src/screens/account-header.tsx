// An account's header, above its tabs: its email as the screen's heading, its name and id, its
// standing as badges (enabled or disabled, and until when; locked, and until when; email
// verified or not; signs in through SSO), and its last sign-in: the newest of its live sessions
// made by a login (session/list; an impersonation is not the person's sign-in).
import type { components, User, UserAccountsClient } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import { formatTime } from '../ui.tsx';

type Lockout = components['schemas']['AccountLockout'];
type Session = components['schemas']['Session'];

/** The badges, in the order they are shown: a word each, and the tone it is drawn in. */
export function badgesOf(user: User, lockout: Lockout | undefined): { text: string; tone: 'good' | 'bad' | 'plain' }[] {
  const badges: { text: string; tone: 'good' | 'bad' | 'plain' }[] = [];
  if (!user.disabled) badges.push({ text: 'Enabled', tone: 'good' });
  else if (user.disabledUntil !== null)
    badges.push({ text: `Disabled until ${formatTime(user.disabledUntil)}`, tone: 'bad' });
  else badges.push({ text: 'Disabled', tone: 'bad' });
  if (lockout?.locked)
    badges.push({
      text: lockout.lockedUntil === null ? 'Locked' : `Locked until ${formatTime(lockout.lockedUntil)}`,
      tone: 'bad',
    });
  badges.push(
    user.emailVerified ? { text: 'Email verified', tone: 'good' } : { text: 'Email not verified', tone: 'plain' },
  );
  // An identity of an organization's SSO connection (sso/callback links `sso:<connectionId>`).
  if (user.identities.some((identity) => identity.provider.startsWith('sso:')))
    badges.push({ text: 'SSO', tone: 'plain' });
  return badges;
}

/** The newest live session that a login made (not an impersonation), or null when there is none. */
export function lastSignIn(sessions: readonly Session[]): string | null {
  const own = sessions.filter((s) => !s.impersonator).map((s) => s.createdAt);
  return own.length === 0 ? null : own.reduce((a, b) => (Date.parse(a) >= Date.parse(b) ? a : b));
}

export function AccountHeader(props: {
  api: UserAccountsClient;
  user: User;
  lockout: Lockout | undefined;
  /** Changes after each action, so that the last sign-in is read again. */
  version: number;
}) {
  const { user } = props;
  const [signedIn, setSignedIn] = useState<string | null>();
  useEffect(() => {
    let current = true;
    props.api
      .GET('/api/1/session/list', { params: { query: { _userId: user._userId } } })
      .then(({ data }) => current && setSignedIn(data ? lastSignIn(data.result.sessions) : undefined))
      .catch(() => {});
    return () => {
      current = false;
    };
  }, [props.api, user._userId, props.version]);

  return (
    <div class="account-header">
      <h1 tabIndex={-1}>{user.email}</h1>
      <p class="who">
        {user.name}
        {user.name ? ' · ' : ''}
        <span class="mono">{user._userId}</span>
      </p>
      <ul class="badges" aria-label="Status">
        {badgesOf(user, props.lockout).map((badge) => (
          <li key={badge.text} class={`badge ${badge.tone}`}>
            {badge.text}
          </li>
        ))}
      </ul>
      <p class="hint">
        {signedIn === undefined
          ? ''
          : signedIn === null
            ? 'Last sign-in: none in its live sessions.'
            : `Last sign-in: ${formatTime(signedIn)}.`}{' '}
        Created {formatTime(user.createdAt)}.
      </p>
    </div>
  );
}
