// One account, laid out as the tools people know lay it out: a header (its email, name and id, its
// standing as badges, its last sign-in) and tabs, each with an address of its own
// (#/accounts/ID/TAB): Profile (fields, disable and enable, metadata, password reset, delete),
// Security (lockout, second factors and passkeys, identities), Sessions (revoke, impersonate),
// Organizations, and Activity (the audit trail and the account's events). Each tab is a component
// of its own file; this one reads the account and runs the writes that change what the header shows.
import type { components, User } from '@user-accounts/client';
import { useCallback, useEffect, useState } from 'preact/hooks';
import type { ScreenProps } from '../app.tsx';
import { type AccountTab, accountHref } from '../route.ts';
import { Tabs } from '../tabs.tsx';
import { Action, Alert, describeFailure, Lacking } from '../ui.tsx';
import { AccountEvents } from './account-events.tsx';
import { AccountHeader } from './account-header.tsx';
import { AccountOrgs } from './account-orgs.tsx';
import { AccountProfile } from './account-profile.tsx';
import { AccountSecurity } from './account-security.tsx';
import { Sessions } from './account-sessions.tsx';
import { AuditTrail } from './audit-trail.tsx';

type Deleted = { graceDays: number | undefined };
type Lockout = components['schemas']['AccountLockout'];

const TABS: { id: AccountTab; label: string }[] = [
  { id: 'profile', label: 'Profile' },
  { id: 'security', label: 'Security' },
  { id: 'sessions', label: 'Sessions' },
  { id: 'organizations', label: 'Organizations' },
  { id: 'activity', label: 'Activity' },
];

export function AccountScreen({ api, refused, userId, tab }: ScreenProps & { userId: string; tab: AccountTab }) {
  const [user, setUser] = useState<User>();
  const [lockout, setLockout] = useState<Lockout>();
  const [failure, setFailure] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [deleted, setDeleted] = useState<Deleted>();
  // Bumped after each action, so that the audit trail, the events and the header show it.
  const [version, setVersion] = useState(0);

  const load = useCallback(async () => {
    const { data, error } = await api.GET('/api/1/user/get', { params: { query: { _userId: userId } } });
    setUser(data?.result);
    setLockout(data?.lockout);
    if (error) setFailure(describeFailure(error));
  }, [api, userId]);
  useEffect(() => {
    load().catch((error: unknown) => setFailure(describeFailure(error)));
  }, [load]);

  const answered = (status: string) => {
    setFailure(undefined);
    setNotice(`The API answered: ${status}.`);
    setVersion((v) => v + 1);
  };

  /** Runs a write, says what the API answered, and shows the account as it now is. */
  async function act(write: () => Promise<{ data?: { result: { status: string } }; error?: unknown }>) {
    setBusy(true);
    setFailure(undefined);
    setNotice(undefined);
    try {
      const { data, error } = await write();
      if (error !== undefined) setFailure(describeFailure(error));
      else if (data) setNotice(`The API answered: ${data.result.status}.`);
      return error === undefined;
    } catch (error) {
      setFailure(describeFailure(error));
      return false;
    } finally {
      setBusy(false);
      setVersion((v) => v + 1);
    }
  }

  const unlock = async () => {
    if (await act(() => api.POST('/api/1/user/unlock', { body: { _userId: userId } }))) await load();
  };
  const restore = async () => {
    if (await act(() => api.POST('/api/1/user/restore', { body: { _userId: userId } }))) {
      setDeleted(undefined);
      await load();
    }
  };

  return (
    <section>
      <p>
        <a href="#/accounts">Back to the accounts</a>
      </p>
      {user && !deleted ? (
        <AccountHeader api={api} user={user} lockout={lockout} version={version} />
      ) : (
        <h1 tabIndex={-1}>{user ? user.email : 'Account'}</h1>
      )}
      <Lacking scope="read" refused={refused} />
      <Alert message={failure} />
      <p role="status">{notice}</p>
      {deleted && (
        <section aria-labelledby="deleted-title" class="panel">
          <h2 id="deleted-title">Deleted</h2>
          {deleted.graceDays === 0 ? (
            <p>Removed for good: it cannot be brought back.</p>
          ) : (
            <>
              <p>
                It can be restored{' '}
                {deleted.graceDays === undefined
                  ? "for the site's grace period, if the site has one"
                  : `for ${deleted.graceDays} days`}
                , as it was.
              </p>
              <Action scope="write" refused={refused} busy={busy} onClick={restore}>
                Restore account
              </Action>
            </>
          )}
        </section>
      )}
      {deleted && (
        <>
          <AuditTrail api={api} userId={userId} version={version} />
          <AccountEvents api={api} userId={userId} version={version} refused={refused} />
        </>
      )}
      {user && !deleted && (
        <Tabs
          label="This account"
          tabs={TABS}
          selected={tab}
          onSelect={(to) => {
            // In place of the address, not a new history entry: Back leaves the account, as a tab bar does.
            history.replaceState(null, '', accountHref(userId, to));
            dispatchEvent(new HashChangeEvent('hashchange'));
          }}
        >
          {tab === 'profile' && (
            <AccountProfile
              api={api}
              user={user}
              refused={refused}
              busy={busy}
              act={act}
              reload={load}
              answered={answered}
              onDeleted={(graceDays) => setDeleted({ graceDays })}
            />
          )}
          {tab === 'security' && (
            <AccountSecurity
              api={api}
              user={user}
              lockout={lockout}
              refused={refused}
              busy={busy}
              unlock={unlock}
              answered={answered}
              reload={load}
            />
          )}
          {tab === 'sessions' && (
            <Sessions
              key={user.disabled ? 'disabled' : 'enabled'}
              api={api}
              userId={userId}
              refused={refused}
              canStart={!user.disabled}
              onChanged={answered}
            />
          )}
          {tab === 'organizations' && <AccountOrgs api={api} userId={userId} />}
          {tab === 'activity' && (
            <>
              <AuditTrail api={api} userId={userId} version={version} />
              <AccountEvents api={api} userId={userId} version={version} refused={refused} />
            </>
          )}
        </Tabs>
      )}
    </section>
  );
}
