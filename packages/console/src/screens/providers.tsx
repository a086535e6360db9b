// The site's sign-in providers (GET /api/1/provider/list, scope read), read-only: the operator
// sets and removes them (`cli provider set|remove`), and the API never lists a client secret.
// Each says its kind (OpenID Connect and its issuer, or OAuth 2.0), its public client id, the
// scopes asked for, the callback URLs allowed, and what a person new to the site gets.
import { useEffect, useState } from 'preact/hooks';
import type { ScreenProps } from '../app.tsx';
import { KIND, type Provider } from '../providers.ts';
import { Alert, describeFailure, Lacking } from '../ui.tsx';

export function ProvidersScreen({ api, refused }: ScreenProps) {
  const [providers, setProviders] = useState<Provider[]>();
  const [failure, setFailure] = useState<string>();

  useEffect(() => {
    api
      .GET('/api/1/provider/list')
      .then(({ data, error }) => {
        setFailure(error ? describeFailure(error) : undefined);
        if (data) setProviders(data.result.providers);
      })
      .catch((error: unknown) => setFailure(describeFailure(error)));
  }, [api]);

  return (
    <section>
      <h1 tabIndex={-1}>Sign-in providers</h1>
      <Lacking scope="read" refused={refused} />
      <Alert message={failure} />
      <p class="hint">
        Read-only: an operator sets them with <code>./pnpmw cli provider set --site NAME --name NAME …</code> and
        removes them with <code>cli provider remove</code>. Client secrets are kept sealed and never shown.
      </p>
      {providers && providers.length === 0 && <p>This site offers no sign-in with another provider.</p>}
      {providers && providers.length > 0 && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable from the keyboard
        <section class="scroll" aria-label="Providers, by name" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Kind</th>
                <th scope="col">Issuer</th>
                <th scope="col">Client id</th>
                <th scope="col">Scopes</th>
                <th scope="col">Callback URLs</th>
                <th scope="col">A person new to the site</th>
              </tr>
            </thead>
            <tbody>
              {providers.map((provider) => (
                <tr key={provider.name}>
                  <td>{provider.name}</td>
                  <td>{KIND[provider.kind]}</td>
                  <td class="mono">{provider.issuer ?? '—'}</td>
                  <td class="mono">{provider.clientId}</td>
                  <td>{provider.scopes.join(' ')}</td>
                  <td class="mono">{provider.redirectUris.join(' ')}</td>
                  <td>{provider.onNewPerson === 'create' ? 'gets an account' : 'is refused (linked by ticket)'}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
    </section>
  );
}
