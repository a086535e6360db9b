import type { UserAccountsClient } from '@user-accounts/client';
import { useEffect, useMemo, useRef, useState } from 'preact/hooks';
import { useRoute } from './route.ts';
import { AccountScreen } from './screens/account.tsx';
import { AccountsScreen } from './screens/accounts.tsx';
import { EventsScreen } from './screens/events.tsx';
import { OrgScreen } from './screens/org.tsx';
import { OrgsScreen } from './screens/orgs.tsx';
import { ProvidersScreen } from './screens/providers.tsx';
import { SignIn } from './screens/sign-in.tsx';
import { WebhooksScreen } from './screens/webhooks.tsx';
import { clientFor, currentToken, onSessionChange, refusedScopes, type Scope, signIn, signOut } from './session.ts';

export interface ScreenProps {
  api: UserAccountsClient;
  refused: Set<Scope>;
}

export function App() {
  const [token, setToken] = useState(currentToken);
  const [refused, setRefused] = useState(refusedScopes);
  useEffect(
    () =>
      onSessionChange(() => {
        setToken(currentToken());
        setRefused(refusedScopes());
      }),
    [],
  );
  const api = useMemo(() => (token === null ? undefined : clientFor(token)), [token]);
  const route = useRoute();
  const main = useRef<HTMLElement>(null);
  // When the first screen can be used (rendered, its handlers attached): for the browser test's
  // budget, and for anyone who reads the page's performance timeline.
  useEffect(() => {
    performance.mark('console:usable');
  }, []);
  // A new screen takes the focus to its heading, as a page load would for a screen reader.
  useEffect(() => {
    main.current?.querySelector<HTMLElement>('h1')?.focus();
  }, [route.screen, token === null]);

  if (api === undefined) {
    return (
      <main ref={main}>
        <SignIn
          onSignIn={(value) => {
            signIn(value);
            setToken(currentToken());
            setRefused(refusedScopes());
          }}
        />
      </main>
    );
  }
  return (
    <>
      <header>
        <nav aria-label="Console">
          <a
            href="#/accounts"
            aria-current={route.screen === 'accounts' || route.screen === 'account' ? 'page' : undefined}
          >
            Accounts
          </a>
          <a href="#/orgs" aria-current={route.screen === 'orgs' || route.screen === 'org' ? 'page' : undefined}>
            Organizations
          </a>
          <a href="#/events" aria-current={route.screen === 'events' ? 'page' : undefined}>
            Live events
          </a>
          <a href="#/webhooks" aria-current={route.screen === 'webhooks' ? 'page' : undefined}>
            Webhooks
          </a>
          <a href="#/providers" aria-current={route.screen === 'providers' ? 'page' : undefined}>
            Sign-in providers
          </a>
        </nav>
        <button type="button" onClick={() => signOut()}>
          Sign out
        </button>
      </header>
      <main ref={main}>
        {route.screen === 'accounts' && <AccountsScreen api={api} refused={refused} />}
        {route.screen === 'account' && (
          <AccountScreen key={route.userId} api={api} refused={refused} userId={route.userId} tab={route.tab} />
        )}
        {route.screen === 'orgs' && <OrgsScreen api={api} refused={refused} />}
        {route.screen === 'org' && <OrgScreen key={route.orgId} api={api} refused={refused} orgId={route.orgId} />}
        {route.screen === 'events' && <EventsScreen api={api} refused={refused} />}
        {route.screen === 'webhooks' && <WebhooksScreen api={api} refused={refused} />}
        {route.screen === 'providers' && <ProvidersScreen api={api} refused={refused} />}
      </main>
    </>
  );
}
