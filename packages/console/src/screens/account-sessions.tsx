// An account's live sessions (session/list): the device, the address, when last seen, how the
// login was made (aal, amr) and who impersonated it, if anyone; revoking one, or all after a
// confirmation (session/revoke). With the `impersonate` scope, an impersonation started with who
// and why (session/impersonate): its token is shown once on the page, and nowhere else.
import type { components, UserAccountsClient } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import type { Scope } from '../session.ts';
import { Action, Alert, Confirm, describeFailure, FieldErrors, formatTime } from '../ui.tsx';

type Session = components['schemas']['Session'];
type Issued = components['schemas']['IssuedSession'];

/** RFC 8176's methods as a person says them. */
const METHOD: Record<string, string> = {
  pwd: 'password',
  otp: 'one-time code',
  hwk: 'passkey',
  user: 'presence',
  mfa: 'two factors',
};

/** How the login was made, in words: its methods and its NIST level. */
export function howSignedIn(
  session: Pick<Session, 'aal' | 'amr'> & { impersonator?: Session['impersonator'] },
): string {
  if (session.impersonator) return `Impersonation (aal ${session.aal})`;
  const methods = session.amr.filter((m) => m !== 'user' && m !== 'mfa').map((m) => METHOD[m] ?? m);
  const words = methods.length === 0 ? 'no method' : methods.join(' and ');
  return `${words[0]!.toUpperCase()}${words.slice(1)} (aal ${session.aal}${session.amr.includes('mfa') ? ', multi-factor' : ''})`;
}

export function Sessions(props: {
  api: UserAccountsClient;
  userId: string;
  refused: Set<Scope>;
  /** The account can hold sessions (not disabled): the impersonation form is offered. */
  canStart: boolean;
  onChanged: (status: string) => void;
}) {
  const [sessions, setSessions] = useState<Session[]>();
  // A refusal of this section's own write, kept until the next write: reloading the list after it
  // (which succeeds) must not wipe it. The list's own failure is apart.
  const [failure, setFailure] = useState<string>();
  const [loadFailure, setLoadFailure] = useState<string>();
  const [problem, setProblem] = useState<unknown>();
  const [busy, setBusy] = useState(false);
  const [confirming, setConfirming] = useState(false);
  const [version, setVersion] = useState(0);
  const [actor, setActor] = useState('');
  const [reason, setReason] = useState('');
  const [minutes, setMinutes] = useState('30');
  const [started, setStarted] = useState<Issued>();

  useEffect(() => {
    props.api
      .GET('/api/1/session/list', { params: { query: { _userId: props.userId } } })
      .then(({ data, error }) => {
        setLoadFailure(error ? describeFailure(error) : undefined);
        setSessions(data?.result.sessions);
      })
      .catch((error: unknown) => setLoadFailure(describeFailure(error)));
  }, [props.api, props.userId, version]);

  /** Runs a write of this section and shows the list as it now is. */
  async function act<T extends { result: { status: string } }>(
    write: () => Promise<{ data?: T; error?: unknown }>,
  ): Promise<T | undefined> {
    setBusy(true);
    setFailure(undefined);
    setProblem(undefined);
    try {
      const { data, error } = await write();
      if (error !== undefined) {
        setFailure(describeFailure(error));
        setProblem(error);
        return undefined;
      }
      props.onChanged(data!.result.status);
      return data;
    } catch (error) {
      setFailure(describeFailure(error));
      return undefined;
    } finally {
      setBusy(false);
      setVersion((v) => v + 1);
    }
  }

  const revoke = (sessionId: string) => act(() => props.api.POST('/api/1/session/revoke', { body: { sessionId } }));
  const revokeAll = () => {
    setConfirming(false);
    return act(() => props.api.POST('/api/1/session/revoke', { body: { _userId: props.userId } as never }));
  };
  async function start() {
    setStarted(undefined);
    const lifetime = minutes.trim() === '' ? undefined : Math.round(Number(minutes) * 60);
    const body = { _userId: props.userId, actor, reason, ...(lifetime !== undefined && { lifetime }) };
    const done = await act(() => props.api.POST('/api/1/session/impersonate', { body }));
    if (done) {
      setStarted(done.result.session);
      setReason('');
    }
  }

  return (
    <section aria-labelledby="sessions-title">
      <h2 id="sessions-title">Sessions</h2>
      <Alert message={failure} />
      {/* The same reason (a revoked token, no server) refuses the write and its reload: said once. */}
      <Alert message={loadFailure === failure ? undefined : loadFailure} />
      <FieldErrors error={problem} />
      {sessions && sessions.length === 0 && <p>None: this account is signed in nowhere.</p>}
      {sessions && sessions.length > 0 && (
        <>
          {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable from the keyboard */}
          <section class="scroll" aria-label="Live sessions, newest first" tabIndex={0}>
            <table>
              <thead>
                <tr>
                  <th scope="col">Device</th>
                  <th scope="col">Address</th>
                  <th scope="col">Last seen</th>
                  <th scope="col">Signed in</th>
                  <th scope="col">How</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {sessions.map((session) => (
                  <tr key={session.sessionId}>
                    <td class="wrap">{session.userAgent ?? 'Unknown device'}</td>
                    <td class="mono wrap">{session.ip ?? '—'}</td>
                    <td>
                      <time dateTime={session.lastSeenAt}>{formatTime(session.lastSeenAt)}</time>
                    </td>
                    <td>
                      <time dateTime={session.createdAt}>{formatTime(session.createdAt)}</time>
                    </td>
                    <td class="wrap">
                      {howSignedIn(session)}
                      {session.impersonator && (
                        <>
                          {' '}
                          by {session.impersonator.actor}: “{session.impersonator.reason}”
                        </>
                      )}
                    </td>
                    <td>
                      <Action
                        scope="write"
                        refused={props.refused}
                        busy={busy}
                        danger
                        onClick={() => revoke(session.sessionId)}
                      >
                        Revoke
                      </Action>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
          <div class="actions">
            <Action scope="write" refused={props.refused} busy={busy} danger onClick={() => setConfirming(true)}>
              Revoke all sessions
            </Action>
          </div>
        </>
      )}
      <Confirm
        open={confirming}
        title="Revoke every session?"
        confirmLabel="Revoke them all"
        cancelLabel="Keep them"
        onConfirm={revokeAll}
        onCancel={() => setConfirming(false)}
      >
        <p>The person is signed out everywhere, on every device, at once; they can sign in again.</p>
      </Confirm>

      {props.canStart && (
        <section aria-labelledby="impersonate-title" class="panel">
          <h3 id="impersonate-title">Start an impersonation</h3>
          <p class="hint">
            Signs in as this person without their password, for support. Who and why are kept with the session, in its
            audit row and its event, and shown to the site.
          </p>
          <div class="inline-form">
            <div class="field">
              <label for="impersonate-actor">Who you are</label>
              <input
                id="impersonate-actor"
                maxLength={200}
                value={actor}
                onInput={(event) => setActor(event.currentTarget.value)}
              />
            </div>
            <div class="field">
              <label for="impersonate-reason">Reason for the impersonation</label>
              <input
                id="impersonate-reason"
                class="wide"
                maxLength={500}
                value={reason}
                onInput={(event) => setReason(event.currentTarget.value)}
              />
            </div>
            <div class="field">
              <label for="impersonate-minutes">Minutes it lasts</label>
              <input
                id="impersonate-minutes"
                type="number"
                min={1}
                max={60}
                value={minutes}
                aria-describedby="impersonate-minutes-hint"
                onInput={(event) => setMinutes(event.currentTarget.value)}
              />
              <span id="impersonate-minutes-hint" class="hint">
                1 to 60.
              </span>
            </div>
            <Action scope="impersonate" refused={props.refused} busy={busy} onClick={start}>
              Start an impersonation
            </Action>
          </div>
          {started && (
            <section class="ticket" aria-label="The impersonation started, its token shown once">
              <p>
                Session {started.sessionId}, until {formatTime(started.expiresAt)}. Its token is shown this once: give
                it to your site as the person's session (its cookie), then hide it.
              </p>
              <label for="impersonate-token">Session token</label>
              <input
                id="impersonate-token"
                class="mono wide"
                readOnly
                value={started.token}
                onFocus={(e) => e.currentTarget.select()}
              />
              <div class="actions">
                <button type="button" class="secondary" onClick={() => setStarted(undefined)}>
                  Hide it
                </button>
              </div>
            </section>
          )}
        </section>
      )}
    </section>
  );
}
