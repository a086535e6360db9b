// An account's second factors (factor/list) and their removal (factor/remove), after a
// confirmation: the person then signs in without it.
import type { components, UserAccountsClient } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import type { Scope } from '../session.ts';
import { Action, Alert, Confirm, describeFailure, formatTime } from '../ui.tsx';

type Factor = components['schemas']['Factor'];

export function Factors(props: {
  api: UserAccountsClient;
  userId: string;
  refused: Set<Scope>;
  onChanged: (status: string) => void;
}) {
  const [factors, setFactors] = useState<{ factors: Factor[]; recoveryCodesLeft: number }>();
  // A refused removal stays shown after the list reloads; the list's own failure is apart.
  const [failure, setFailure] = useState<string>();
  const [loadFailure, setLoadFailure] = useState<string>();
  const [removing, setRemoving] = useState<Factor>();
  const [version, setVersion] = useState(0);

  useEffect(() => {
    props.api
      .GET('/api/1/user/factor/list', { params: { query: { _userId: props.userId } } })
      .then(({ data, error }) => {
        setLoadFailure(error ? describeFailure(error) : undefined);
        setFactors(data?.result);
      })
      .catch((error: unknown) => setLoadFailure(describeFailure(error)));
  }, [props.api, props.userId, version]);

  async function remove(factor: Factor) {
    setRemoving(undefined);
    setFailure(undefined);
    try {
      const { data, error } = await props.api.POST('/api/1/user/factor/remove', {
        body: { _userId: props.userId, factorId: factor.factorId },
      });
      if (error) setFailure(describeFailure(error));
      else props.onChanged(data.result.status);
    } catch (error) {
      setFailure(describeFailure(error));
    } finally {
      setVersion((v) => v + 1);
    }
  }

  return (
    <section aria-labelledby="factors-title">
      <h2 id="factors-title">Second factors</h2>
      <Alert message={failure} />
      {/* The same reason (a revoked token, no server) refuses the write and its reload: said once. */}
      <Alert message={loadFailure === failure ? undefined : loadFailure} />
      {factors && factors.factors.length === 0 && <p>None: this account signs in with its password alone.</p>}
      {factors && factors.factors.length > 0 && (
        <>
          <ul class="factors">
            {factors.factors.map((factor) => (
              <li key={factor.factorId}>
                <span>
                  <strong>{factor.type === 'totp' ? 'Authenticator app' : 'Passkey'}</strong>
                  {factor.label ? ` “${factor.label}”` : ''}, added {formatTime(factor.createdAt)}
                  {factor.lastUsedAt ? `, last used ${formatTime(factor.lastUsedAt)}` : ', never used'}
                </span>
                <Action scope="write" refused={props.refused} danger onClick={() => setRemoving(factor)}>
                  Remove {factor.label ?? factor.type}
                </Action>
              </li>
            ))}
          </ul>
          <p class="hint">{factors.recoveryCodesLeft} recovery codes left.</p>
        </>
      )}
      <Confirm
        open={removing !== undefined}
        title="Remove this second factor?"
        confirmLabel="Remove it"
        cancelLabel="Keep it"
        onConfirm={() => removing && remove(removing)}
        onCancel={() => setRemoving(undefined)}
      >
        <p>The person can then sign in without it. Only they can add it again.</p>
      </Confirm>
    </section>
  );
}
