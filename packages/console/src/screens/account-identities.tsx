// An account's identities at other providers (`identities` in get: provider, subject, the email the
// provider gave and whether it said it is verified, when linked; an enterprise sign-in's, `sso:{connectionId}`,
// said as such) and their unlinking
// (identity/unlink), after a confirmation. The API refuses to unlink the last way to sign in (409
// `last_sign_in_method`): its detail is shown as it is. Each names its provider as the site
// configured it (provider/list: OpenID Connect and its issuer, or OAuth 2.0), an organization's
// SSO connection, or a name the site gave when it ran the sign-in itself.
import type { components, UserAccountsClient } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import { describeProvider, type Provider } from '../providers.ts';
import type { Scope } from '../session.ts';
import { Action, Alert, Confirm, describeFailure, formatTime } from '../ui.tsx';

type Identity = components['schemas']['Identity'];

export function Identities(props: {
  api: UserAccountsClient;
  userId: string;
  identities: Identity[];
  refused: Set<Scope>;
  /** After an unlink: the API's status; the caller reads the account again. */
  onChanged: (status: string) => void | Promise<void>;
}) {
  const [failure, setFailure] = useState<string>();
  const [unlinking, setUnlinking] = useState<Identity>();
  const [busy, setBusy] = useState(false);
  const [providers, setProviders] = useState<Provider[]>();

  useEffect(() => {
    props.api
      .GET('/api/1/provider/list')
      .then(({ data }) => setProviders(data?.result.providers))
      // Not read (a failure the account's own read shows): the names stand alone.
      .catch(() => {});
  }, [props.api]);

  async function unlink(identity: Identity) {
    setUnlinking(undefined);
    setBusy(true);
    setFailure(undefined);
    try {
      const { data, error } = await props.api.POST('/api/1/user/identity/unlink', {
        body: { _userId: props.userId, provider: identity.provider, subject: identity.subject },
      });
      if (error) setFailure(describeFailure(error));
      else await props.onChanged(data.result.status);
    } catch (error) {
      setFailure(describeFailure(error));
    } finally {
      setBusy(false);
    }
  }

  return (
    <section aria-labelledby="identities-title">
      <h2 id="identities-title">Identities</h2>
      <Alert message={failure} />
      {props.identities.length === 0 && <p>None: this account signs in with no other provider.</p>}
      {props.identities.length > 0 && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable from the keyboard
        <section class="scroll" aria-label="Linked identities, oldest first" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Provider</th>
                <th scope="col">Subject</th>
                <th scope="col">Email</th>
                <th scope="col">Verified</th>
                <th scope="col">Linked</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {props.identities.map((identity) => (
                <tr key={`${identity.provider} ${identity.subject}`}>
                  <td class="wrap">
                    {identity.provider.startsWith('sso:') ? (
                      <>
                        Enterprise SSO <span class="mono">{identity.provider.slice(4)}</span>
                      </>
                    ) : (
                      <>
                        {identity.provider}
                        {describeProvider(identity.provider, providers) !== undefined && (
                          <span class="hint"> ({describeProvider(identity.provider, providers)})</span>
                        )}
                      </>
                    )}
                  </td>
                  <td class="mono wrap">{identity.subject}</td>
                  <td>{identity.email ?? '—'}</td>
                  <td>{identity.emailVerified ? 'Yes' : 'No'}</td>
                  <td>
                    <time dateTime={identity.linkedAt}>{formatTime(identity.linkedAt)}</time>
                  </td>
                  <td>
                    <Action
                      scope="write"
                      refused={props.refused}
                      busy={busy}
                      danger
                      onClick={() => setUnlinking(identity)}
                    >
                      Unlink
                      <span class="visually-hidden">
                        {' '}
                        {identity.provider} {identity.subject}
                      </span>
                    </Action>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      <Confirm
        open={unlinking !== undefined}
        title="Unlink this identity?"
        confirmLabel="Unlink it"
        cancelLabel="Keep it"
        onConfirm={() => unlinking && unlink(unlinking)}
        onCancel={() => setUnlinking(undefined)}
      >
        <p>
          The person can no longer sign in with {unlinking?.provider}
          {unlinking?.email ? ` as ${unlinking.email}` : ''}, and another account may link it. The API refuses if it is
          the account's last way to sign in.
        </p>
      </Confirm>
    </section>
  );
}
