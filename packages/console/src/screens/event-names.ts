// Names for the ids a live event carries: an account's email, an organization's name. An event
// names them when it has them (a user.* event's data is the account; org.created, updated and
// deleted carry the name); the others are asked of the API once per id (user/get, org/get), at
// most FETCHES at a time, and kept for as long as the screen is open. An id the API no longer
// knows (deleted) stays shown as its id.
import type { UserAccountsClient } from '@user-accounts/client';
import { useEffect, useRef, useState } from 'preact/hooks';

const FETCHES = 4;
/** Names kept at most: the screen shows 200 events, each naming up to two things. */
const KEPT = 1000;

type Kind = 'account' | 'org';

export function useNames(api: UserAccountsClient) {
  const names = useRef(new Map<string, string | null>());
  const queue = useRef<{ kind: Kind; id: string }[]>([]);
  const running = useRef(0);
  const [, setVersion] = useState(0);
  const alive = useRef(true);
  useEffect(
    () => () => {
      alive.current = false;
    },
    [],
  );

  const key = (kind: Kind, id: string) => `${kind}:${id}`;
  async function lookUp(kind: Kind, id: string): Promise<string | null> {
    if (kind === 'account') {
      const { data } = await api.GET('/api/1/user/get', { params: { query: { _userId: id } } });
      return data?.result.email ?? null;
    }
    const { data } = await api.GET('/api/1/org/get', { params: { query: { orgId: id } } });
    return data?.result.name ?? null;
  }
  function pump() {
    while (running.current < FETCHES && queue.current.length > 0) {
      const next = queue.current.shift()!;
      running.current++;
      lookUp(next.kind, next.id)
        .catch(() => null)
        .then((name) => {
          running.current--;
          if (!alive.current) return;
          names.current.set(key(next.kind, next.id), name);
          setVersion((v) => v + 1);
          pump();
        });
    }
  }

  return {
    /** Keeps a name an event carried, so that no one asks for it. */
    know(kind: Kind, id: string, name: string) {
      if (names.current.size >= KEPT) names.current.clear();
      names.current.set(key(kind, id), name);
    },
    /** The name, or undefined while it is asked for (or not known). */
    of(kind: Kind, id: string): string | undefined {
      const k = key(kind, id);
      if (!names.current.has(k)) {
        if (names.current.size >= KEPT) names.current.clear();
        names.current.set(k, null);
        queue.current.push({ kind, id });
        queueMicrotask(pump);
      }
      return names.current.get(k) ?? undefined;
    },
  };
}
