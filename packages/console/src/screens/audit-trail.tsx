// An account's audit trail (GET /api/1/audit): who did what to it, when, and how it ended,
// newest first, a page at a time; an impersonation's row says who and why.
import type { components, UserAccountsClient } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import { Alert, describeFailure, formatTime } from '../ui.tsx';

type Entry = components['schemas']['AuditEntry'];
const PAGE = 20;

/** `version` changes after each action of the screen, so that the trail shows it. */
export function AuditTrail({ api, userId, version }: { api: UserAccountsClient; userId: string; version: number }) {
  const [entries, setEntries] = useState<Entry[]>([]);
  const [next, setNext] = useState<string | null>(null);
  const [failure, setFailure] = useState<string>();

  async function load(before?: string) {
    const { data, error } = await api.GET('/api/1/audit', {
      params: { query: { _userId: userId, limit: PAGE, ...(before !== undefined && { before }) } },
    });
    setFailure(error ? describeFailure(error) : undefined);
    if (!data) return;
    setEntries((shown) => (before === undefined ? data.result.entries : [...shown, ...data.result.entries]));
    setNext(data.result.next);
  }
  useEffect(() => {
    load().catch((error: unknown) => setFailure(describeFailure(error)));
  }, [api, userId, version]);

  return (
    <section aria-labelledby="audit-title">
      <h2 id="audit-title">Audit trail</h2>
      <Alert message={failure} />
      {entries.length > 0 && (
        // biome-ignore lint/a11y/noNoninteractiveTabindex: a scrollable region must be reachable from the keyboard
        <section class="scroll" aria-label="Audit entries, newest first" tabIndex={0}>
          <table>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Operation</th>
                <th scope="col">Outcome</th>
                <th scope="col">Status</th>
                <th scope="col">By</th>
              </tr>
            </thead>
            <tbody>
              {entries.map((entry) => (
                <tr key={entry.requestId + entry.at}>
                  <td>
                    <time dateTime={entry.at}>{formatTime(entry.at)}</time>
                  </td>
                  <td>{entry.operation}</td>
                  <td class="wrap">
                    {entry.outcome}
                    {entry.impersonator && ` (by ${entry.impersonator.actor}: “${entry.impersonator.reason}”)`}
                  </td>
                  <td>{entry.status}</td>
                  <td title={`token ${entry.tokenId}`}>{entry.tokenLabel}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </section>
      )}
      {next !== null && (
        <button type="button" onClick={() => load(next).catch((error: unknown) => setFailure(describeFailure(error)))}>
          Older entries
        </button>
      )}
    </section>
  );
}
