// An account's recent change events (GET /api/1/events?subject=…), newest first as the audit
// trail above them. The feed reads forward only: the screen reads the account's events from the
// oldest kept, 1,000 a request (an account has few; MAX_PAGES bounds the rare busy one), and
// keeps the latest SHOWN.
import type { ChangeEvent, UserAccountsClient } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import type { Scope } from '../session.ts';
import { Alert, describeFailure, formatTime, Lacking } from '../ui.tsx';

const SHOWN = 20;
const PAGE = 1000;
const MAX_PAGES = 20;

/** `version` changes after each action of the screen, so that its events show. */
export function AccountEvents({
  api,
  userId,
  version,
  refused,
}: {
  api: UserAccountsClient;
  userId: string;
  version: number;
  refused: Set<Scope>;
}) {
  const [events, setEvents] = useState<ChangeEvent[]>();
  const [failure, setFailure] = useState<string>();

  useEffect(() => {
    if (refused.has('events')) return;
    let stale = false;
    (async () => {
      let latest: ChangeEvent[] = [];
      let after: string | undefined;
      for (let page = 0; page < MAX_PAGES; page++) {
        const { data, error } = await api.GET('/api/1/events', {
          params: { query: { subject: userId, limit: PAGE, ...(after !== undefined && { after }) } },
        });
        if (stale) return;
        if (!data) return setFailure(describeFailure(error));
        latest = [...latest, ...data.result.events].slice(-SHOWN);
        after = data.result.next;
        if (data.result.events.length < PAGE) break;
      }
      setFailure(undefined);
      setEvents(latest.reverse());
    })().catch((error: unknown) => !stale && setFailure(describeFailure(error)));
    return () => {
      stale = true;
    };
  }, [api, userId, version, refused]);

  return (
    <section aria-labelledby="events-title">
      <h2 id="events-title">Recent events</h2>
      <Lacking scope="events" refused={refused} />
      <Alert message={failure} />
      {events?.length === 0 && <p>No events of this account are kept (they are kept for the retention time).</p>}
      {events !== undefined && events.length > 0 && (
        <ol class="events" aria-label={`This account’s latest ${SHOWN} events, newest first`}>
          {events.map((event) => (
            <li key={event.id}>
              <span class="type">{event.type}</span> <time dateTime={event.time}>{formatTime(event.time)}</time>{' '}
              <span class="hint">#{Number(event.sequence)}</span>
              {event.changedfields && <span class="hint"> ({event.changedfields})</span>}
            </li>
          ))}
        </ol>
      )}
      <p>
        The <a href="#/events">live events</a> screen follows the whole site’s.
      </p>
    </section>
  );
}
