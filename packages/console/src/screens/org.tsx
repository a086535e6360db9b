// One organization (org/get): its name, slug, metadata, member count and when it was made; its
// members with their roles (org/member/list, a page at a time; each links to its account), removed
// one by one (org/member/remove); and its pending invitations (org/invitation/list, never a
// ticket), revoked one by one (org/invitation/revoke). Both ask first. Its single sign-on, read
// only: domains and connections (org-sso.tsx).
import type { components } from '@user-accounts/client';
import { useCallback, useEffect, useState } from 'preact/hooks';
import type { ScreenProps } from '../app.tsx';
import { accountHref } from '../route.ts';
import { Action, Alert, Confirm, describeFailure, formatTime, Lacking } from '../ui.tsx';
import { roles } from './account-orgs.tsx';
import { OrgSso } from './org-sso.tsx';

type Org = components['schemas']['Org'];
type Member = components['schemas']['OrgMember'];
type Invitation = components['schemas']['OrgInvitation'];

const PAGE_SIZE = 25;

export function OrgScreen({ api, refused, orgId }: ScreenProps & { orgId: string }) {
  const [org, setOrg] = useState<Org>();
  const [failure, setFailure] = useState<string>();
  const [notice, setNotice] = useState<string>();
  const [busy, setBusy] = useState(false);
  // Bumped after each action, so that the lists and the count show what is now true.
  const [version, setVersion] = useState(0);
  const [removing, setRemoving] = useState<Member>();
  const [revoking, setRevoking] = useState<Invitation>();

  const load = useCallback(async () => {
    const { data, error } = await api.GET('/api/1/org/get', { params: { query: { orgId } } });
    setOrg(data?.result);
    if (error) setFailure(describeFailure(error));
  }, [api, orgId]);
  useEffect(() => {
    load().catch((error: unknown) => setFailure(describeFailure(error)));
  }, [load, version]);

  /** Runs a write, says what the API answered, and shows the organization as it now is. */
  async function act(write: () => Promise<{ data?: { result: { status: string } }; error?: unknown }>) {
    setBusy(true);
    setFailure(undefined);
    setNotice(undefined);
    try {
      const { data, error } = await write();
      if (error !== undefined) setFailure(describeFailure(error));
      else if (data) setNotice(`The API answered: ${data.result.status}.`);
    } catch (error) {
      setFailure(describeFailure(error));
    } finally {
      setBusy(false);
      setVersion((v) => v + 1);
    }
  }
  const remove = (member: Member) => {
    setRemoving(undefined);
    return act(() => api.POST('/api/1/org/member/remove', { body: { orgId, _userId: member._userId } }));
  };
  const revoke = (invitation: Invitation) => {
    setRevoking(undefined);
    return act(() => api.POST('/api/1/org/invitation/revoke', { body: { invitationId: invitation.invitationId } }));
  };

  return (
    <section>
      <p>
        <a href="#/orgs">Back to the organizations</a>
      </p>
      <h1 tabIndex={-1}>{org ? org.name : 'Organization'}</h1>
      <Lacking scope="read" refused={refused} />
      <Alert message={failure} />
      <p role="status">{notice}</p>
      {org && (
        <>
          <dl class="fields">
            <div>
              <dt>Id</dt>
              <dd>{org.orgId}</dd>
            </div>
            <div>
              <dt>Name</dt>
              <dd>{org.name}</dd>
            </div>
            <div>
              <dt>Slug</dt>
              <dd>{org.slug ?? '—'}</dd>
            </div>
            <div>
              <dt>Members</dt>
              <dd>{org.memberCount.toLocaleString()}</dd>
            </div>
            <div>
              <dt>Metadata</dt>
              <dd class="json">{JSON.stringify(org.metadata, null, 2)}</dd>
            </div>
            <div>
              <dt>Created</dt>
              <dd>{formatTime(org.createdAt)}</dd>
            </div>
            <div>
              <dt>Updated</dt>
              <dd>{formatTime(org.updatedAt)}</dd>
            </div>
          </dl>
          <Members {...{ api, orgId, refused, busy, version }} onRemove={(member) => setRemoving(member)} />
          <Invitations {...{ api, orgId, refused, busy, version }} onRevoke={(invitation) => setRevoking(invitation)} />
          <OrgSso {...{ api, orgId, version }} />
          <Confirm
            open={removing !== undefined}
            title="Remove this member?"
            confirmLabel="Remove them"
            cancelLabel="Keep them"
            onConfirm={() => removing && remove(removing)}
            onCancel={() => setRemoving(undefined)}
          >
            <p>
              {removing?.email} leaves {org.name} with their roles there, at once; their account stays as it is. Adding
              them back is the site's to do.
            </p>
          </Confirm>
          <Confirm
            open={revoking !== undefined}
            title="Revoke this invitation?"
            confirmLabel="Revoke it"
            cancelLabel="Keep it"
            onConfirm={() => revoking && revoke(revoking)}
            onCancel={() => setRevoking(undefined)}
          >
            <p>
              The invitation of {revoking?.email} to {org.name} is refused from then on, even if they follow its link.
            </p>
          </Confirm>
        </>
      )}
    </section>
  );
}

type ListProps = Pick<ScreenProps, 'api' | 'refused'> & { orgId: string; busy: boolean; version: number };

function Members(props: ListProps & { onRemove: (member: Member) => void }) {
  // The cursor of each page shown so far: back is the one before, forward the answer's `next`.
  const [cursors, setCursors] = useState<(string | undefined)[]>([undefined]);
  const [page, setPage] = useState<{ members: Member[]; next: string | null }>();
  const [failure, setFailure] = useState<string>();
  const [loading, setLoading] = useState(false);
  const after = cursors[cursors.length - 1];

  useEffect(() => {
    let current = true;
    setLoading(true);
    const query = { orgId: props.orgId, limit: PAGE_SIZE, ...(after !== undefined && { after }) };
    props.api
      .GET('/api/1/org/member/list', { params: { query } })
      .then(({ data, error }) => {
        if (!current) return;
        setFailure(error ? describeFailure(error) : undefined);
        setPage(data?.result);
      })
      .catch((error: unknown) => current && setFailure(describeFailure(error)))
      .finally(() => current && setLoading(false));
    return () => {
      current = false;
    };
  }, [props.api, props.orgId, after, props.version]);

  const first = (cursors.length - 1) * PAGE_SIZE + 1;
  return (
    <section aria-labelledby="members-title">
      <h2 id="members-title">Members</h2>
      <Alert message={failure} />
      {page && page.members.length === 0 && !loading && (
        <p>{cursors.length === 1 ? 'None: no account belongs to this organization.' : 'No more members.'}</p>
      )}
      {page && page.members.length > 0 && (
        <>
          <p class="hint">
            Showing {first} to {first + page.members.length - 1}, in the order their accounts were made.
          </p>
          {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable from the keyboard */}
          <section class="scroll" aria-label="Its members" tabIndex={0}>
            <table>
              <thead>
                <tr>
                  <th scope="col">Email</th>
                  <th scope="col">Name</th>
                  <th scope="col">Roles</th>
                  <th scope="col">Joined</th>
                  <th scope="col">
                    <span class="visually-hidden">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {page.members.map((member) => (
                  <tr key={member._userId}>
                    <td>
                      <a href={accountHref(member._userId)}>{member.email}</a>
                    </td>
                    <td>{member.name}</td>
                    <td>{roles(member.roles)}</td>
                    <td>
                      <time dateTime={member.joinedAt}>{formatTime(member.joinedAt)}</time>
                    </td>
                    <td>
                      <Action
                        scope="write"
                        refused={props.refused}
                        busy={props.busy}
                        danger
                        onClick={() => props.onRemove(member)}
                      >
                        Remove<span class="visually-hidden"> {member.email}</span>
                      </Action>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
        </>
      )}
      {(cursors.length > 1 || page?.next) && (
        <nav class="pages" aria-label="Pages of members">
          <button
            type="button"
            disabled={cursors.length === 1 || loading}
            onClick={() => setCursors(cursors.slice(0, -1))}
          >
            Previous page
          </button>
          <button
            type="button"
            disabled={!page?.next || loading}
            onClick={() => page?.next && setCursors([...cursors, page.next])}
          >
            Next page
          </button>
        </nav>
      )}
    </section>
  );
}

function Invitations(props: ListProps & { onRevoke: (invitation: Invitation) => void }) {
  const [invitations, setInvitations] = useState<Invitation[]>();
  const [failure, setFailure] = useState<string>();

  useEffect(() => {
    let current = true;
    props.api
      .GET('/api/1/org/invitation/list', { params: { query: { orgId: props.orgId } } })
      .then(({ data, error }) => {
        if (!current) return;
        setFailure(error ? describeFailure(error) : undefined);
        setInvitations(data?.result.invitations);
      })
      .catch((error: unknown) => current && setFailure(describeFailure(error)));
    return () => {
      current = false;
    };
  }, [props.api, props.orgId, props.version]);

  return (
    <section aria-labelledby="invitations-title">
      <h2 id="invitations-title">Pending invitations</h2>
      <Alert message={failure} />
      {invitations && invitations.length === 0 && <p>None: no invitation is waiting for an answer.</p>}
      {invitations && invitations.length > 0 && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable from the keyboard
        <section class="scroll" aria-label="Pending invitations, oldest first" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Roles</th>
                <th scope="col">Sent</th>
                <th scope="col">Expires</th>
                <th scope="col">
                  <span class="visually-hidden">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {invitations.map((invitation) => (
                <tr key={invitation.invitationId}>
                  <td>{invitation.email}</td>
                  <td>{roles(invitation.roles)}</td>
                  <td>
                    <time dateTime={invitation.createdAt}>{formatTime(invitation.createdAt)}</time>
                  </td>
                  <td>
                    <time dateTime={invitation.expiresAt}>{formatTime(invitation.expiresAt)}</time>
                  </td>
                  <td>
                    <Action
                      scope="write"
                      refused={props.refused}
                      busy={props.busy}
                      danger
                      onClick={() => props.onRevoke(invitation)}
                    >
                      Revoke<span class="visually-hidden"> the invitation of {invitation.email}</span>
                    </Action>
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
