// The signed-in token, and what the API has told us it may not do. Both live in sessionStorage
// only: they go with the tab, never to disk for good, and never into a URL.
import { createClient, type UserAccountsClient } from '@user-accounts/client';

const TOKEN = 'user-accounts-console:token';
const REFUSED = 'user-accounts-console:refused-scopes';

/** The scopes the console's actions need (see the spec's `security` of each operation). */
export type Scope = 'read' | 'write' | 'events' | 'impersonate';

/**
 * `/console#token=…` (what `cli console` prints) signs in: the token moves to sessionStorage and
 * leaves the address bar and the history at once, so it is not bookmarked or shared by accident.
 * A fragment never reaches a server or a log.
 */
export function takeTokenFromFragment(): void {
  const match = /^#token=([^&]+)/.exec(location.hash);
  if (match?.[1] === undefined) return;
  signIn(decodeURIComponent(match[1]));
  history.replaceState(null, '', `${location.pathname}${location.search}`);
}

export const currentToken = (): string | null => sessionStorage.getItem(TOKEN);

export function signIn(token: string): void {
  sessionStorage.setItem(TOKEN, token.trim());
  sessionStorage.removeItem(REFUSED);
}

let signedOutBecause: string | undefined;
/** Why the last session ended, when the API ended it (an expired or revoked token): shown once. */
export function takeSignOutReason(): string | undefined {
  const reason = signedOutBecause;
  signedOutBecause = undefined;
  return reason;
}

export function signOut(reason?: string): void {
  sessionStorage.removeItem(TOKEN);
  sessionStorage.removeItem(REFUSED);
  signedOutBecause = reason;
  notify();
}

/** Scopes the API refused this token (403 `forbidden` names the scope it lacked). */
export function refusedScopes(): Set<Scope> {
  try {
    return new Set(JSON.parse(sessionStorage.getItem(REFUSED) ?? '[]') as Scope[]);
  } catch {
    return new Set();
  }
}

function refuse(scope: Scope): void {
  const refused = refusedScopes();
  if (refused.has(scope)) return;
  refused.add(scope);
  sessionStorage.setItem(REFUSED, JSON.stringify([...refused]));
  notify();
}

const listeners = new Set<() => void>();
export function onSessionChange(listener: () => void): () => void {
  listeners.add(listener);
  return () => listeners.delete(listener);
}
function notify(): void {
  for (const listener of listeners) listener();
}

/**
 * The API client for this token, talking only to the server that served the page. The API has no
 * operation that tells a token its own scopes, so the console learns them from its refusals: a
 * 403 `forbidden` says "This token does not have the X scope.", and from then on the actions
 * that need X are shown disabled with that reason.
 */
export function clientFor(token: string): UserAccountsClient {
  const api = createClient({ baseUrl: location.origin, token });
  api.use({
    async onResponse({ response }) {
      if (response.status !== 401 && response.status !== 403) return response;
      const problem = (await response
        .clone()
        .json()
        .catch(() => undefined)) as { code?: string; detail?: string } | undefined;
      if (response.status === 401) {
        signOut(problem?.detail ?? 'The API refused this token.');
      } else {
        const scope = problem?.code === 'forbidden' ? /the (\w+) scope/.exec(problem.detail ?? '')?.[1] : undefined;
        if (scope === 'read' || scope === 'write' || scope === 'events' || scope === 'impersonate') refuse(scope);
      }
      return response;
    },
  });
  return api;
}
