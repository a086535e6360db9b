// The site's sign-in providers as the operator configured them (GET /api/1/provider/list, scope
// read: never a client secret), and how an identity's provider reads beside them: a provider of
// the site (its kind and issuer), an organization's SSO connection (`sso:{connectionId}`), or a
// name the site gave when it ran the sign-in itself (identity/create and identity/link).
import type { components } from '@user-accounts/client';

export type Provider = components['schemas']['Provider'];

export const KIND: Record<Provider['kind'], string> = { oidc: 'OpenID Connect', oauth2: 'OAuth 2.0' };

/** What the identity's provider is, beside its name; undefined while the list is not read. */
export function describeProvider(name: string, providers: Provider[] | undefined): string | undefined {
  if (name.startsWith('sso:')) return 'SSO connection of an organization';
  if (providers === undefined) return undefined;
  const provider = providers.find((p) => p.name === name);
  if (provider === undefined) return 'not a provider of this site: linked by the site itself';
  return provider.issuer === null ? KIND[provider.kind] : `${KIND[provider.kind]}, ${provider.issuer}`;
}
