// The organizations an account belongs to (user/orgs: at most 1,000, in order of joining), with its
// roles in each; each links to the organization's screen.
import type { components, UserAccountsClient } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import { orgHref } from '../route.ts';
import { Alert, describeFailure, formatTime } from '../ui.tsx';

type UserOrg = components['schemas']['UserOrg'];

export function AccountOrgs(props: { api: UserAccountsClient; userId: string }) {
  const [orgs, setOrgs] = useState<UserOrg[]>();
  const [failure, setFailure] = useState<string>();

  useEffect(() => {
    let current = true;
    props.api
      .GET('/api/1/user/orgs', { params: { query: { _userId: props.userId } } })
      .then(({ data, error }) => {
        if (!current) return;
        setFailure(error ? describeFailure(error) : undefined);
        setOrgs(data?.result.orgs);
      })
      .catch((error: unknown) => current && setFailure(describeFailure(error)));
    return () => {
      current = false;
    };
  }, [props.api, props.userId]);

  return (
    <section aria-labelledby="account-orgs-title">
      <h2 id="account-orgs-title">Organizations</h2>
      <Alert message={failure} />
      {orgs && orgs.length === 0 && <p>None: this account belongs to no organization.</p>}
      {orgs && orgs.length > 0 && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable from the keyboard
        <section class="scroll" aria-label="Its organizations, in order of joining" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Organization</th>
                <th scope="col">Slug</th>
                <th scope="col">Roles</th>
                <th scope="col">Joined</th>
              </tr>
            </thead>
            <tbody>
              {orgs.map((org) => (
                <tr key={org.orgId}>
                  <td>
                    <a href={orgHref(org.orgId)}>{org.name}</a>
                  </td>
                  <td class="mono">{org.slug ?? '—'}</td>
                  <td>{roles(org.roles)}</td>
                  <td>
                    <time dateTime={org.joinedAt}>{formatTime(org.joinedAt)}</time>
                  </td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
    </section>
  );
}

/** A member's roles, as the site named them; none said so. */
export const roles = (names: readonly string[]): string => (names.length === 0 ? 'No role' : names.join(', '));
