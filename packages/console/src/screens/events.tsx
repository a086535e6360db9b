// The site's change events as they commit: the feed's long poll (GET /api/1/events, wait=30),
// followed while this screen is open, newest first.
import { type ChangeEvent, ProblemError } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import type { ScreenProps } from '../app.tsx';
import { accountHref } from '../route.ts';
import { Alert, describeFailure, formatTime, Lacking } from '../ui.tsx';

const SHOWN = 200;

export function EventsScreen({ api, refused }: ScreenProps) {
  const [events, setEvents] = useState<ChangeEvent[]>([]);
  const [failure, setFailure] = useState<string>();
  const [following, setFollowing] = useState(false);

  useEffect(() => {
    const stop = new AbortController();
    (async () => {
      setFollowing(true);
      try {
        // The feed starts at the oldest event kept and has no "from now": 1,000 an answer reaches
        // the present in few requests, and only the latest SHOWN stay on screen.
        for await (const event of api.followEvents({ signal: stop.signal, limit: 1000 })) {
          setEvents((shown) => [event, ...shown].slice(0, SHOWN));
        }
      } catch (error) {
        if (!stop.signal.aborted) setFailure(describeFailure(error instanceof ProblemError ? error.problem : error));
      } finally {
        setFollowing(false);
      }
    })();
    return () => stop.abort();
  }, [api]);

  return (
    <section>
      <h1 tabIndex={-1}>Live events</h1>
      <p role="status">{following ? 'Following the site’s changes as they happen.' : 'Not following.'}</p>
      <Lacking scope="events" refused={refused} />
      <Alert message={failure} />
      {events.length === 0 && following && <p>No events yet.</p>}
      <ol class="events" aria-label={`The latest ${SHOWN} events, newest first`}>
        {events.map((event) => (
          <li key={event.id}>
            <span class="type">{event.type}</span> <time dateTime={event.time}>{formatTime(event.time)}</time>{' '}
            {event.type === 'user.deleted' ? (
              <span>{event.subject}</span>
            ) : (
              <a href={accountHref(event.subject)}>{'email' in event.data ? event.data.email : event.subject}</a>
            )}
            {event.changedfields && <span class="hint"> ({event.changedfields})</span>}
          </li>
        ))}
      </ol>
    </section>
  );
}
