// An account's Profile tab: every field the API gives with its verified flags, disable (until a
// time, with a reason; after a confirmation) and enable, its metadata (edited as JSON), a
// password reset, and delete with a grace period (after a confirmation).
import type { User, UserAccountsClient } from '@user-accounts/client';
import { useState } from 'preact/hooks';
import type { Scope } from '../session.ts';
import { Action, Confirm, formatTime } from '../ui.tsx';
import { MetadataEditor } from './account-metadata.tsx';
import { PasswordReset } from './account-reset.tsx';

/** The fields shown, in this order, with a person's label; the verified times go with their flags. */
const FIELDS: [keyof User | 'passwordBreached', string][] = [
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

type Write = () => Promise<{ data?: { result: { status: string } }; error?: unknown }>;

export function AccountProfile(props: {
  api: UserAccountsClient;
  user: User;
  refused: Set<Scope>;
  busy: boolean;
  /** Runs a write, says what the API answered; true when it was done. */
  act: (write: Write) => Promise<boolean>;
  /** Reads the account again. */
  reload: () => Promise<void>;
  /** An action of a section of its own was done (the API's status). */
  answered: (status: string) => void;
  onDeleted: (graceDays: number | undefined) => void;
}) {
  const { api, user, refused, busy, act } = props;
  const userId = user._userId;
  const [confirming, setConfirming] = useState<'disable' | 'delete'>();
  // Empty: the site's own grace period (cli site set --deletion-grace), as the API's default.
  const [graceDays, setGraceDays] = useState('');
  const [period, setPeriod] = useState<Period>('');
  const [until, setUntil] = useState('');
  const [reason, setReason] = useState('');

  const end = period === 'date' ? (until === '' ? undefined : new Date(until)) : periodEnd(period);
  const disable = async () => {
    setConfirming(undefined);
    const body = {
      _userId: userId,
      ...(end !== undefined && { until: end.toISOString() }),
      ...(reason.trim() !== '' && { reason: reason.trim() }),
    };
    if (await act(() => api.POST('/api/1/user/disable', { body }))) {
      setPeriod('');
      setUntil('');
      setReason('');
      await props.reload();
    }
  };
  const enable = async () => {
    if (await act(() => api.POST('/api/1/user/enable', { body: { _userId: userId } }))) await props.reload();
  };
  const remove = async () => {
    setConfirming(undefined);
    const days = graceDays.trim() === '' ? undefined : Number(graceDays);
    const body = { _userId: userId, ...(days !== undefined && { graceDays: days }) };
    if (await act(() => api.DELETE('/api/1/user/delete', { body }))) props.onDeleted(days);
  };

  return (
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
        <h2 id="status-title">Disable or enable</h2>
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
            <Action scope="write" refused={refused} busy={busy} onClick={() => setConfirming('disable')}>
              Disable account
            </Action>
          </div>
        )}
      </section>
      <Confirm
        open={confirming === 'disable'}
        title="Disable this account?"
        confirmLabel="Disable it"
        cancelLabel="Keep it enabled"
        onConfirm={disable}
        onCancel={() => setConfirming(undefined)}
      >
        <p>
          {`${user.email} can no longer sign in ${end === undefined ? 'until it is enabled again' : `until ${formatTime(end.toISOString())}`}: the site's sign-in answers that it is disabled.`}
        </p>
      </Confirm>

      <MetadataEditor
        key={JSON.stringify(user.metadata)}
        api={api}
        userId={userId}
        metadata={user.metadata}
        refused={refused}
        onSaved={async (status) => {
          props.answered(status);
          await props.reload();
        }}
      />
      <PasswordReset api={api} userId={userId} refused={refused} onIssued={props.answered} />

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
              0 to 90; 0 removes it at once. Empty: the site's setting (cli site set --deletion-grace), which removes it
              at once unless set.
            </span>
          </div>
          <Action scope="write" refused={refused} busy={busy} danger onClick={() => setConfirming('delete')}>
            Delete account
          </Action>
        </div>
      </section>
      <Confirm
        open={confirming === 'delete'}
        title="Delete this account?"
        confirmLabel="Delete it"
        cancelLabel="Keep it"
        onConfirm={remove}
        onCancel={() => setConfirming(undefined)}
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
  );
}
