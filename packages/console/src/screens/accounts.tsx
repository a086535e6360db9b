// Finding an account: list's `search` (whatever is pasted: an id, an email's start or its domain,
// a name, a phone, a provider identity's subject), its disabled and metadata filters, newest
// first, keyset paging with list's `next`, and count's exact number for the same filters.
import type { User } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import type { ScreenProps } from '../app.tsx';
import { accountHref } from '../route.ts';
import { Alert, describeFailure, formatTime, Lacking } from '../ui.tsx';

const PAGE_SIZE = 25;

interface Search {
  text: string;
  status: 'any' | 'enabled' | 'disabled';
  /** A JSON object the accounts' metadata must contain (list's `metadata` filter), or ''. */
  metadata: string;
}

/** Why the metadata filter cannot be sent, or undefined when it can: checked before sending. */
function metadataProblem(text: string): string | undefined {
  if (text.trim() === '') return undefined;
  try {
    const value: unknown = JSON.parse(text);
    if (typeof value === 'object' && value !== null && !Array.isArray(value)) return undefined;
  } catch {
    return 'Not JSON: write an object, like {"plan": "pro"}.';
  }
  return 'Write a JSON object, like {"plan": "pro"}.';
}

/** The search and page shown last, so that coming back from an account shows the same list. */
let kept: { search: Search; cursors: (string | undefined)[] } = {
  search: { text: '', status: 'any', metadata: '' },
  cursors: [undefined],
};

function filters(search: Search) {
  const text = search.text.trim();
  return {
    ...(text !== '' && { search: text }),
    ...(search.status !== 'any' && { disabled: search.status === 'disabled' }),
    ...(search.metadata.trim() !== '' && { metadata: search.metadata.trim() }),
  };
}

export function AccountsScreen({ api, refused }: ScreenProps) {
  const [draft, setDraft] = useState(kept.search);
  const [search, setSearch] = useState(kept.search);
  // The cursor of each page shown so far: back is the one before, forward the answer's `next`.
  const [cursors, setCursors] = useState(kept.cursors);
  const [page, setPage] = useState<{ users: User[]; next: string | null }>();
  const [count, setCount] = useState<number>();
  const [failure, setFailure] = useState<string>();
  const [loading, setLoading] = useState(false);
  const [metadataError, setMetadataError] = useState<string>();
  kept = { search, cursors };
  const after = cursors[cursors.length - 1];

  useEffect(() => {
    let current = true;
    setLoading(true);
    const query = { ...filters(search), order: 'desc' as const, limit: PAGE_SIZE };
    api
      .GET('/api/1/user/list', { params: { query: { ...query, ...(after !== undefined && { after }) } } })
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
  }, [api, search, after]);

  useEffect(() => {
    let current = true;
    setCount(undefined);
    api
      .GET('/api/1/user/count', { params: { query: filters(search) } })
      .then(({ data }) => current && setCount(data?.result.count))
      .catch(() => {});
    return () => {
      current = false;
    };
  }, [api, search]);

  const first = (cursors.length - 1) * PAGE_SIZE + 1;
  return (
    <section>
      <h1 tabIndex={-1}>Accounts</h1>
      <search>
        <form
          class="search"
          onSubmit={(event) => {
            event.preventDefault();
            const problem = metadataProblem(draft.metadata);
            setMetadataError(problem);
            if (problem !== undefined) return;
            setSearch(draft);
            setCursors([undefined]);
          }}
        >
          <div class="field">
            <label for="search-text">Search accounts</label>
            <input
              id="search-text"
              type="search"
              maxLength={254}
              value={draft.text}
              aria-describedby="search-hint"
              onInput={(event) => setDraft({ ...draft, text: event.currentTarget.value })}
            />
            <span id="search-hint" class="hint">
              An id, an email's start or its domain, a name, a phone, or an identity's subject
            </span>
          </div>
          <div class="field">
            <label for="search-status">Status</label>
            <select
              id="search-status"
              value={draft.status}
              onChange={(event) => setDraft({ ...draft, status: event.currentTarget.value as Search['status'] })}
            >
              <option value="any">Any</option>
              <option value="enabled">Enabled</option>
              <option value="disabled">Disabled</option>
            </select>
          </div>
          <div class="field">
            <label for="search-metadata">Metadata contains</label>
            <input
              id="search-metadata"
              class="mono"
              value={draft.metadata}
              placeholder='{"plan": "pro"}'
              aria-invalid={metadataError !== undefined}
              aria-describedby="search-metadata-hint"
              onInput={(event) => setDraft({ ...draft, metadata: event.currentTarget.value })}
            />
            <span id="search-metadata-hint" class={metadataError ? 'hint invalid' : 'hint'}>
              {metadataError ?? 'A JSON object its metadata holds'}
            </span>
          </div>
          <button type="submit">Search</button>
        </form>
      </search>
      <Lacking scope="read" refused={refused} />
      <Alert message={failure} />
      <p role="status" class="count">
        {count === undefined ? '' : `${count.toLocaleString()} ${count === 1 ? 'account matches' : 'accounts match'}`}
        {page && page.users.length > 0 ? `; showing ${first} to ${first + page.users.length - 1}, newest first.` : ''}
      </p>
      {page && page.users.length > 0 && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable from the keyboard
        <section class="scroll" aria-label="Matching accounts" tabIndex={0}>
          <table class="list">
            <thead>
              <tr>
                <th scope="col">Email</th>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Created</th>
              </tr>
            </thead>
            <tbody>
              {page.users.map((user) => (
                <tr key={user._userId}>
                  <td>
                    <a href={accountHref(user._userId)}>{user.email}</a>
                  </td>
                  <td>{user.name}</td>
                  <td>
                    <span class={user.disabled ? 'badge bad' : 'badge good'}>
                      {user.disabled ? 'Disabled' : 'Enabled'}
                    </span>
                  </td>
                  <td>{formatTime(user.createdAt)}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      {page && page.users.length === 0 && !loading && <p>No account matches.</p>}
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
