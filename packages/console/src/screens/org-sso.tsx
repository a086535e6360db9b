// An organization's enterprise sign-in, read only (issue 61, point 6): its domains with their
// state and the TXT record to publish (org/domain/list), and its connections (org/connection/list:
// kind, enforcement, the IdP, its certificates' fingerprints and end dates, our SP's metadata URL;
// never a secret). Changes are the site's backend's to make, through the API.
import type { components, UserAccountsClient } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import { Alert, describeFailure, formatTime } from '../ui.tsx';

type Domain = components['schemas']['ListOrgDomainsResponse']['result']['domains'][number];
type Connection = components['schemas']['OrgConnection'];

export function OrgSso(props: { api: UserAccountsClient; orgId: string; version: number }) {
  const [domains, setDomains] = useState<Domain[]>();
  const [connections, setConnections] = useState<Connection[]>();
  const [failure, setFailure] = useState<string>();

  useEffect(() => {
    let current = true;
    const query = { params: { query: { orgId: props.orgId } } };
    Promise.all([props.api.GET('/api/1/org/domain/list', query), props.api.GET('/api/1/org/connection/list', query)])
      .then(([d, c]) => {
        if (!current) return;
        setDomains(d.data?.result.domains);
        setConnections(c.data?.result.connections);
        const error = d.error ?? c.error;
        setFailure(error ? describeFailure(error) : undefined);
      })
      .catch((error: unknown) => current && setFailure(describeFailure(error)));
    return () => {
      current = false;
    };
  }, [props.api, props.orgId, props.version]);

  return (
    <section aria-labelledby="sso-title">
      <h2 id="sso-title">Single sign-on</h2>
      <Alert message={failure} />
      <h3>Domains</h3>
      {domains && domains.length === 0 && <p>None: this organization has not claimed a domain.</p>}
      {domains && domains.length > 0 && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable from the keyboard
        <section class="scroll" aria-label="Its domains" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Domain</th>
                <th scope="col">Status</th>
                <th scope="col">TXT record</th>
                <th scope="col">Verified</th>
              </tr>
            </thead>
            <tbody>
              {domains.map((domain) => (
                <tr key={domain.domain}>
                  <td>{domain.domain}</td>
                  <td>{domain.status === 'verified' ? 'Verified' : 'Pending'}</td>
                  <td class="mono">
                    {domain.txtName} = {domain.txtValue}
                  </td>
                  <td>
                    {domain.verifiedAt ? (
                      <time dateTime={domain.verifiedAt}>{formatTime(domain.verifiedAt)}</time>
                    ) : (
                      '—'
                    )}
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      <h3>Connections</h3>
      {connections && connections.length === 0 && <p>None: this organization signs in as every account does.</p>}
      {connections?.map((connection) => (
        <dl class="fields" key={connection.connectionId} aria-label={`Connection ${connection.connectionId}`}>
          <div>
            <dt>Connection</dt>
            <dd class="mono">{connection.connectionId}</dd>
          </div>
          <div>
            <dt>Kind</dt>
            <dd>{connection.kind === 'saml' ? 'SAML 2.0' : 'OpenID Connect'}</dd>
          </div>
          <div>
            <dt>Enforced</dt>
            <dd>{connection.enforce ? 'Yes: its domains sign in through it only' : 'No'}</dd>
          </div>
          <div>
            <dt>Identity provider</dt>
            <dd class="mono">{connection.saml?.idpEntityId ?? connection.oidc?.issuer}</dd>
          </div>
          {connection.saml && (
            <>
              <div>
                <dt>Certificates</dt>
                <dd>
                  {connection.saml.certificates.map((cert) => (
                    <div key={cert.fingerprint} class="mono">
                      {cert.fingerprint} (until {formatTime(cert.notAfter)})
                    </div>
                  ))}
                </dd>
              </div>
              <div>
                <dt>Our SP metadata</dt>
                <dd class="mono">{connection.saml.spMetadataUrl}</dd>
              </div>
            </>
          )}
          {connection.oidc && (
            <div>
              <dt>Client id</dt>
              <dd class="mono">{connection.oidc.clientId}</dd>
            </div>
          )}
          <div>
            <dt>Redirect URIs</dt>
            <dd class="mono">{connection.redirectUris.join(', ')}</dd>
          </div>
          <div>
            <dt>Default roles</dt>
            <dd>{connection.defaultRoles.length === 0 ? '—' : connection.defaultRoles.join(', ')}</dd>
          </div>
          <div>
            <dt>Created</dt>
            <dd>{formatTime(connection.createdAt)}</dd>
          </div>
        </dl>
      ))}
    </section>
  );
}
