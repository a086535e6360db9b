// One account: every field the API gives, disable/enable, and delete after a confirmation.
import type { User } from '@user-accounts/client';
import { useCallback, useEffect, useRef, useState } from 'preact/hooks';
import type { ScreenProps } from '../app.tsx';
import { Action, Alert, describeFailure, formatTime, Lacking } from '../ui.tsx';
import { AuditTrail } from './audit-trail.tsx';

const LABELS: Record<string, string> = {
  _userId: 'Id',
  email: 'Email',
  name: 'Name',
  phone: 'Phone',
  address: 'Address',
  disabled: 'Status',
  createdAt: 'Created',
  updatedAt: 'Updated',
  metadata: 'Metadata',
};

function show(key: string, value: unknown): string {
  if (value === null || value === undefined) return '—';
  if (key === 'disabled') return value ? 'Disabled' : 'Enabled';
  if (key === 'createdAt' || key === 'updatedAt') return formatTime(String(value));
  return typeof value === 'string' ? value : JSON.stringify(value, null, 2);
}

export function AccountScreen({ api, refused, userId }: ScreenProps & { userId: string }) {
  const [user, setUser] = useState<User>();
  const [failure, setFailure] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const [busy, setBusy] = useState(false);
  const [deleted, setDeleted] = useState(false);
  // Bumped after each action, so that the audit trail shows it.
  const [version, setVersion] = useState(0);
  const confirm = useRef<HTMLDialogElement>(null);

  const load = useCallback(async () => {
    const { data, error } = await api.GET('/api/1/user/get', { params: { query: { _userId: userId } } });
    setUser(data?.result);
    if (error) setFailure(describeFailure(error));
  }, [api, userId]);
  useEffect(() => {
    load().catch((error: unknown) => setFailure(describeFailure(error)));
  }, [load]);

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

  const toggle = async () => {
    if (!user) return;
    const path = user.disabled ? '/api/1/user/enable' : '/api/1/user/disable';
    if (await act(() => api.POST(path, { body: { _userId: userId } }))) await load();
  };
  const remove = async () => {
    confirm.current?.close();
    if (await act(() => api.DELETE('/api/1/user/delete', { body: { _userId: userId } }))) setDeleted(true);
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
      {user && !deleted && (
        <>
          <dl class="fields">
            {Object.entries(user).map(([key, value]) => (
              <div key={key}>
                <dt>{LABELS[key] ?? key}</dt>
                <dd class={typeof value === 'object' && value !== null ? 'json' : undefined}>{show(key, value)}</dd>
              </div>
            ))}
          </dl>
          <div class="actions">
            <Action scope="write" refused={refused} busy={busy} onClick={toggle}>
              {user.disabled ? 'Enable account' : 'Disable account'}
            </Action>
            <Action scope="write" refused={refused} busy={busy} danger onClick={() => confirm.current?.showModal()}>
              Delete account
            </Action>
          </div>
          <dialog ref={confirm} aria-labelledby="confirm-title" aria-describedby="confirm-text">
            <h2 id="confirm-title">Delete this account?</h2>
            <p id="confirm-text">
              {user.email} will be removed for good: its owner can no longer sign in, and it cannot be brought back from
              here.
            </p>
            <div class="actions">
              <button type="button" class="danger" onClick={remove}>
                Delete for good
              </button>
              <button type="button" onClick={() => confirm.current?.close()}>
                Keep it
              </button>
            </div>
          </dialog>
        </>
      )}
      {(user || deleted) && <AuditTrail api={api} userId={userId} version={version} />}
    </section>
  );
}
