// The console's addresses live in the fragment (#/accounts, #/accounts/ID, #/accounts/ID/TAB, #/orgs,
// #/orgs/ID, #/events, #/webhooks, #/providers): the server serves one page at /console, and a reload or a shared link opens the same screen.
import { useEffect, useState } from 'preact/hooks';

export type Route =
  | { screen: 'accounts' }
  | { screen: 'account'; userId: string; tab: AccountTab }
  | { screen: 'orgs' }
  | { screen: 'org'; orgId: string }
  | { screen: 'events' }
  | { screen: 'webhooks' }
  | { screen: 'providers' };

/** An account's tabs, in their order; the first is its address without a tab. */
export const ACCOUNT_TABS = ['profile', 'security', 'sessions', 'organizations', 'activity'] as const;
export type AccountTab = (typeof ACCOUNT_TABS)[number];
const isTab = (text: string | undefined): text is AccountTab => ACCOUNT_TABS.includes(text as AccountTab);

export function parseRoute(hash: string): Route {
  const account = /^#\/accounts\/([^/?#]+)(?:\/([a-z]+))?$/.exec(hash);
  if (account?.[1] !== undefined)
    return {
      screen: 'account',
      userId: decodeURIComponent(account[1]),
      tab: isTab(account[2]) ? account[2] : 'profile',
    };
  const org = /^#\/orgs\/([^/?#]+)$/.exec(hash);
  if (org?.[1] !== undefined) return { screen: 'org', orgId: decodeURIComponent(org[1]) };
  if (hash === '#/orgs') return { screen: 'orgs' };
  if (hash === '#/events') return { screen: 'events' };
  if (hash === '#/webhooks') return { screen: 'webhooks' };
  if (hash === '#/providers') return { screen: 'providers' };
  return { screen: 'accounts' };
}

export const accountHref = (userId: string, tab: AccountTab = 'profile'): string =>
  `#/accounts/${encodeURIComponent(userId)}${tab === 'profile' ? '' : `/${tab}`}`;
export const orgHref = (orgId: string): string => `#/orgs/${encodeURIComponent(orgId)}`;

export function useRoute(): Route {
  const [route, setRoute] = useState(() => parseRoute(location.hash));
  useEffect(() => {
    const changed = () => setRoute(parseRoute(location.hash));
    addEventListener('hashchange', changed);
    return () => removeEventListener('hashchange', changed);
  }, []);
  return route;
}
