// The site's change events as they commit: the feed's long poll (GET /api/1/events, wait=30),
// followed while this screen is open, newest first. Each names what it is about: the account by
// its email, the organization by its name, a session by its account and how it was made (each a
// link to its screen), never a bare id when the API can name it.
import { type ChangeEvent, ProblemError } from '@user-accounts/client';
import { useEffect, useState } from 'preact/hooks';
import type { ScreenProps } from '../app.tsx';
import { accountHref, orgHref } from '../route.ts';
import { Alert, describeFailure, formatTime, Lacking } from '../ui.tsx';
import { howSignedIn } from './account-sessions.tsx';
import { useNames } from './event-names.ts';

type Names = ReturnType<typeof useNames>;

function Account({ id, names }: { id: string; names: Names }) {
  const email = names.of('account', id);
  return <a href={accountHref(id)}>{email ?? <span class="mono">{id}</span>}</a>;
}

/** What the event is about, in words and links. */
function About({ event, names }: { event: ChangeEvent; names: Names }) {
  const data = event.data as Record<string, unknown>;
  if (event.type === 'user.deleted' || event.type === 'user.purged')
    return <span>{typeof data.email === 'string' ? data.email : <span class="mono">{event.subject}</span>}</span>;
  if (event.type.startsWith('session.')) {
    const session = data as {
      sessionId: string;
      aal: 1 | 2;
      amr: string[];
      impersonator?: { actor: string; reason: string };
    };
    return (
      <span>
        <a href={accountHref(event.subject, 'sessions')}>
          session <span class="mono">{session.sessionId.slice(0, 8)}</span>
        </a>{' '}
        of <Account id={event.subject} names={names} />: {howSignedIn(session as never)}
      </span>
    );
  }
  if (event.type.startsWith('org.')) {
    if (typeof data.name === 'string') names.know('org', event.subject, data.name);
    const name = event.type === 'org.deleted' ? (data.name as string | undefined) : names.of('org', event.subject);
    const org =
      event.type === 'org.deleted' ? (
        <span>{name ?? event.subject}</span>
      ) : (
        <a href={orgHref(event.subject)}>{name ?? <span class="mono">{event.subject}</span>}</a>
      );
    return (
      <span>
        {org}
        {typeof data._userId === 'string' && (
          <>
            {': '}
            <Account id={data._userId} names={names} />
            {Array.isArray(data.roles) && data.roles.length > 0 && ` (${(data.roles as string[]).join(', ')})`}
          </>
        )}
        {typeof data.domain === 'string' && `: ${data.domain}`}
      </span>
    );
  }
  if (typeof data.email === 'string') names.know('account', event.subject, data.email);
  return <Account id={event.subject} names={names} />;
}

const SHOWN = 200;

export function EventsScreen({ api, refused }: ScreenProps) {
  const names = useNames(api);
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
            <About event={event} names={names} />
            {event.changedfields && <span class="hint"> ({event.changedfields})</span>}
          </li>
        ))}
      </ol>
    </section>
  );
}
