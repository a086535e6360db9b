// Finding an organization: org/list's `q` (the start of its name or slug, letter case ignored),
// newest first, keyset paging with list's `next`, as the accounts screen pages.
import type { components } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import type { ScreenProps } from '../app.tsx';
import { orgHref } from '../route.ts';
import { Alert, describeFailure, formatTime, Lacking } from '../ui.tsx';

type Org = components['schemas']['Org'];

const PAGE_SIZE = 25;

/** The search and page shown last, so that coming back from an organization shows the same list. */
let kept: { q: string; cursors: (string | undefined)[] } = { q: '', cursors: [undefined] };

export function OrgsScreen({ api, refused }: ScreenProps) {
  const [draft, setDraft] = useState(kept.q);
  const [q, setQ] = useState(kept.q);
  // The cursor of each page shown so far: back is the one before, forward the answer's `next`.
  const [cursors, setCursors] = useState(kept.cursors);
  const [page, setPage] = useState<{ orgs: Org[]; next: string | null }>();
  const [failure, setFailure] = useState<string>();
  const [loading, setLoading] = useState(false);
  kept = { q, cursors };
  const after = cursors[cursors.length - 1];

  useEffect(() => {
    let current = true;
    setLoading(true);
    const query = {
      order: 'desc' as const,
      limit: PAGE_SIZE,
      ...(q.trim() !== '' && { q: q.trim() }),
      ...(after !== undefined && { after }),
    };
    api
      .GET('/api/1/org/list', { params: { query } })
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
  }, [api, q, after]);

  const first = (cursors.length - 1) * PAGE_SIZE + 1;
  return (
    <section>
      <h1 tabIndex={-1}>Organizations</h1>
      <search>
        <form
          class="search"
          onSubmit={(event) => {
            event.preventDefault();
            setQ(draft);
            setCursors([undefined]);
          }}
        >
          <div class="field">
            <label for="org-search">Search organizations</label>
            <input
              id="org-search"
              type="search"
              maxLength={200}
              value={draft}
              aria-describedby="org-search-hint"
              onInput={(event) => setDraft(event.currentTarget.value)}
            />
            <span id="org-search-hint" class="hint">
              The start of a name or a slug, in any letter case
            </span>
          </div>
          <button type="submit">Search</button>
        </form>
      </search>
      <Lacking scope="read" refused={refused} />
      <Alert message={failure} />
      <p role="status" class="count">
        {page && page.orgs.length > 0
          ? `Showing ${first} to ${first + page.orgs.length - 1}, newest first${page.next ? '; more on the next page' : ''}.`
          : ''}
      </p>
      {page && page.orgs.length > 0 && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable from the keyboard
        <section class="scroll" aria-label="Matching organizations" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Slug</th>
                <th scope="col">Members</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {page.orgs.map((org) => (
                <tr key={org.orgId}>
                  <td>
                    <a href={orgHref(org.orgId)}>{org.name}</a>
                  </td>
                  <td class="mono">{org.slug ?? '—'}</td>
                  <td>{org.memberCount.toLocaleString()}</td>
                  <td>{formatTime(org.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      {page && page.orgs.length === 0 && !loading && (
        <p>{q.trim() === '' ? 'This site has no organization yet.' : 'No organization matches.'}</p>
      )}
      <nav class="pages" aria-label="Pages">
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
    </section>
  );
}
