// One account: every field the API gives, its verified flags, its metadata (edited as JSON), its
// second factors, its identities at other providers (unlinked one by one), its lockout (unlocked),
// disable (until a time, with a reason) and enable, a password reset, its sessions (revoked one or all; an impersonation
// started), its organizations, delete with a grace period and restore, its audit trail and its
// recent events. Destructive actions ask first.
import type { components, User } from '@user-accounts/client';
import { useCallback, useEffect, useState } from 'preact/hooks';
import type { ScreenProps } from '../app.tsx';
import { Action, Alert, Confirm, describeFailure, formatTime, Lacking } from '../ui.tsx';
import { AccountEvents } from './account-events.tsx';
import { Factors } from './account-factors.tsx';
import { Identities } from './account-identities.tsx';
import { MetadataEditor } from './account-metadata.tsx';
import { AccountOrgs } from './account-orgs.tsx';
import { PasswordReset } from './account-reset.tsx';
import { Sessions } from './account-sessions.tsx';
import { AuditTrail } from './audit-trail.tsx';

/** The fields shown, in this order, with a person's label; the verified times go with their flags. */
const FIELDS: [keyof User | 'passwordBreached', string][] = [
  ['_userId', 'Id'],
  ['email', 'Email'],
  ['emailVerified', 'Email verified'],
  ['name', 'Name'],
  ['phone', 'Phone'],
  ['phoneVerified', 'Phone verified'],
  ['address', 'Address'],
  ['disabled', 'Status'],
  ['disabledUntil', 'Disabled until'],
  ['disabledReason', 'Reason'],
  ['passwordBreached', 'Password breached'],
  ['createdAt', 'Created'],
  ['updatedAt', 'Updated'],
];

function show(user: User, key: string): string | undefined {
  const fields = user as unknown as Record<string, unknown>;
  if (!(key in fields)) return undefined;
  const value = fields[key];
  if (key === 'emailVerified' || key === 'phoneVerified') {
    const at = fields[`${key}At`];
    return value ? `Yes${typeof at === 'string' ? `, on ${formatTime(at)}` : ''}` : 'No';
  }
  if (key === 'disabled') return value ? 'Disabled' : 'Enabled';
  if (typeof value === 'boolean') return value ? 'Yes' : 'No';
  if (value === null || value === undefined) return '—';
  if (key === 'createdAt' || key === 'updatedAt' || key === 'disabledUntil') return formatTime(String(value));
  return String(value);
}

type Deleted = { graceDays: number | undefined };
type Lockout = components['schemas']['AccountLockout'];

/** The lockout as support reads it: locked until when, and the failures that count toward the next lock. */
function lockoutText(lockout: Lockout): string {
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

/** How long a disable lasts: until enabled again (''), a period from now, or until a chosen date. */
type Period = '' | '1d' | '7d' | '30d' | 'date';
const PERIODS: [Period, string][] = [
  ['', 'Until enabled again'],
  ['1d', '1 day'],
  ['7d', '1 week'],
  ['30d', '30 days'],
  ['date', 'Until a date…'],
];
const periodEnd = (period: Period): Date | undefined => {
  const days = { '1d': 1, '7d': 7, '30d': 30 }[period as '1d'];
  return days === undefined ? undefined : new Date(Date.now() + days * 86_400_000);
};

export function AccountScreen({ api, refused, userId }: ScreenProps & { userId: string }) {
  const [user, setUser] = useState<User>();
  const [lockout, setLockout] = useState<Lockout>();
  const [failure, setFailure] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [deleted, setDeleted] = useState<Deleted>();
  const [confirming, setConfirming] = useState(false);
  // Empty: the site's own grace period (cli site set --deletion-grace), as the API's default.
  const [graceDays, setGraceDays] = useState('');
  const [period, setPeriod] = useState<Period>('');
  const [until, setUntil] = useState('');
  const [reason, setReason] = useState('');
  // Bumped after each action, so that the audit trail shows it.
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

  const disable = async () => {
    const end = period === 'date' ? (until === '' ? undefined : new Date(until)) : periodEnd(period);
    const body = {
      _userId: userId,
      ...(end !== undefined && { until: end.toISOString() }),
      ...(reason.trim() !== '' && { reason: reason.trim() }),
    };
    if (await act(() => api.POST('/api/1/user/disable', { body }))) {
      setPeriod('');
      setUntil('');
      setReason('');
      await load();
    }
  };
  const enable = async () => {
    if (await act(() => api.POST('/api/1/user/enable', { body: { _userId: userId } }))) await load();
  };
  const unlock = async () => {
    if (await act(() => api.POST('/api/1/user/unlock', { body: { _userId: userId } }))) await load();
  };
  const remove = async () => {
    setConfirming(false);
    const days = graceDays.trim() === '' ? undefined : Number(graceDays);
    const body = { _userId: userId, ...(days !== undefined && { graceDays: days }) };
    if (await act(() => api.DELETE('/api/1/user/delete', { body }))) setDeleted({ graceDays: days });
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
      <h1 tabIndex={-1}>{user ? user.email : 'Account'}</h1>
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
      {user && !deleted && (
        <>
          <dl class="fields">
            {FIELDS.map(([key, label]) => {
              const value = show(user, key);
              return value === undefined ? null : (
                <div key={key}>
                  <dt>{label}</dt>
                  <dd>{value}</dd>
                </div>
              );
            })}
          </dl>

          <section aria-labelledby="status-title">
            <h2 id="status-title">Sign-in</h2>
            {lockout && (
              <div class="actions">
                <span class={lockout.locked ? 'badge locked' : 'badge'}>{lockoutText(lockout)}</span>
                {(lockout.locked || lockout.failures > 0 || lockout.secondFactorFailures > 0) && (
                  <Action scope="write" refused={refused} busy={busy} onClick={unlock}>
                    Unlock
                  </Action>
                )}
              </div>
            )}
            {user.disabled ? (
              <div class="actions">
                <Action scope="write" refused={refused} busy={busy} onClick={enable}>
                  Enable account
                </Action>
              </div>
            ) : (
              <div class="inline-form">
                <div class="field">
                  <label for="disable-for">For how long</label>
                  <select
                    id="disable-for"
                    value={period}
                    onChange={(event) => setPeriod(event.currentTarget.value as Period)}
                  >
                    {PERIODS.map(([value, label]) => (
                      <option key={value} value={value}>
                        {label}
                      </option>
                    ))}
                  </select>
                </div>
                {period === 'date' && (
                  <div class="field">
                    <label for="disable-until">Disabled until</label>
                    <input
                      id="disable-until"
                      type="datetime-local"
                      value={until}
                      onInput={(event) => setUntil(event.currentTarget.value)}
                    />
                  </div>
                )}
                <div class="field">
                  <label for="disable-reason">Reason (optional, for operators)</label>
                  <input
                    id="disable-reason"
                    maxLength={500}
                    value={reason}
                    onInput={(event) => setReason(event.currentTarget.value)}
                  />
                </div>
                <Action scope="write" refused={refused} busy={busy} onClick={disable}>
                  Disable account
                </Action>
              </div>
            )}
          </section>

          <MetadataEditor
            key={JSON.stringify(user.metadata)}
            api={api}
            userId={userId}
            metadata={user.metadata}
            refused={refused}
            onSaved={async (status) => {
              answered(status);
              await load();
            }}
          />
          <Factors api={api} userId={userId} refused={refused} onChanged={answered} />
          <Identities
            api={api}
            userId={userId}
            identities={user.identities}
            refused={refused}
            onChanged={async (status) => {
              answered(status);
              await load();
            }}
          />
          <PasswordReset api={api} userId={userId} refused={refused} onIssued={answered} />
          <Sessions
            key={user.disabled ? 'disabled' : 'enabled'}
            api={api}
            userId={userId}
            refused={refused}
            canStart={!user.disabled}
            onChanged={answered}
          />
          <AccountOrgs api={api} userId={userId} />

          <section aria-labelledby="delete-title">
            <h2 id="delete-title">Delete</h2>
            <div class="inline-form">
              <div class="field">
                <label for="grace-days">Days it stays restorable</label>
                <input
                  id="grace-days"
                  type="number"
                  min={0}
                  max={90}
                  value={graceDays}
                  aria-describedby="grace-hint"
                  onInput={(event) => setGraceDays(event.currentTarget.value)}
                />
                <span id="grace-hint" class="hint">
                  0 to 90; 0 removes it at once. Empty: the site's setting (cli site set --deletion-grace), which
                  removes it at once unless set.
                </span>
              </div>
              <Action scope="write" refused={refused} busy={busy} danger onClick={() => setConfirming(true)}>
                Delete account
              </Action>
            </div>
          </section>
          <Confirm
            open={confirming}
            title="Delete this account?"
            confirmLabel="Delete it"
            cancelLabel="Keep it"
            onConfirm={remove}
            onCancel={() => setConfirming(false)}
          >
            <p>
              {graceDays.trim() === '0'
                ? `${user.email} will be removed for good: its owner can no longer sign in, and it cannot be brought back.`
                : `${user.email} can no longer sign in, and is out of every search; it can be restored ${
                    graceDays.trim() === ''
                      ? "within the site's grace period, if the site has one (without one, it is removed at once)"
                      : `within ${graceDays} days`
                  }, then it is removed for good.`}
            </p>
          </Confirm>
        </>
      )}
      {(user || deleted) && (
        <>
          <AuditTrail api={api} userId={userId} version={version} />
          <AccountEvents api={api} userId={userId} version={version} refused={refused} />
        </>
      )}
    </section>
  );
}
