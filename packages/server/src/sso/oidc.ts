// OpenID Connect connections (issue 61, points 2-4): the organization's IdP is a relying party's
// provider like a site's own (issue 59), through the same code: providers/flow.ts keeps the
// start's state (only its SHA-256), PKCE verifier and nonce (sealed), single use, ten minutes,
// under the provider name `sso:{connectionId}`; providers/oauth.ts (openid-client) builds the
// authorization URL, and at the callback checks RFC 9207's `iss`, exchanges the code with the
// verifier and checks the ID token (the issuer's keys and advertised algorithms only, iss, aud,
// exp, nonce), reading userinfo when the ID token lacks the email. What comes out is the identity
// (the ID token's `sub`) whose outcome is the SAML one's (signin.ts).
import { invalidRequest } from '../errors.ts';
import type { WriteDeps } from '../kernel/unit-of-work.ts';
import { cleanIdentity, invalidState, saveState, takeState } from '../providers/flow.ts';
import { authorizationUrl, completeCallback, providerError } from '../providers/oauth.ts';
import { parseCallback, withoutQuery } from '../providers/sign-in.ts';
import { type ConnectionRow, clientSecretOf, connectionOf, identityProviderOf, relyingPartyOf } from './connections.ts';
import type { SamlAssertion } from './saml.ts';

const PREFIX = identityProviderOf('');

/** sso/start for an OIDC connection: the issuer's authorization URL, with our state, S256 challenge and nonce. */
export async function startOidc(
  deps: WriteDeps,
  row: ConnectionRow,
  redirectUri: string,
  loginHint: string | undefined,
  signal: AbortSignal,
): Promise<{ authorizationUrl: string }> {
  const flow = await saveState(deps.db, deps.factorKeys, {
    site: row.site,
    provider: identityProviderOf(row.id),
    redirectUri,
  });
  const url = await authorizationUrl(relyingPartyOf(row), { ...flow, redirectUri }, { loginHint }, signal);
  return { authorizationUrl: url };
}

/**
 * sso/callback for an OIDC connection: the state taken (422 invalid_state: unknown, used, expired,
 * another site's, or a provider's rather than a connection's), the callback's URL the start's
 * redirect URI, then openid-client's checks (422 provider_error, 502, 504).
 */
export async function checkOidcCallback(
  deps: WriteDeps,
  site: string,
  callbackUrl: string,
  signal: AbortSignal,
): Promise<SamlAssertion> {
  const callback = parseCallback({ callbackUrl });
  const state = callback.searchParams.get('state') ?? undefined;
  const taken = await takeState(deps.db, deps.factorKeys, site, state, (name) => name.startsWith(PREFIX));
  const row = await connectionOf(deps.db, site, taken.provider.slice(PREFIX.length)).catch(() => {
    throw invalidState();
  });
  if (row.kind !== 'oidc') throw invalidState();
  if (withoutQuery(callback) !== withoutQuery(new URL(taken.redirectUri)))
    throw invalidRequest(
      `callbackUrl must be the redirect URI its start named (${taken.redirectUri}), with the IdP's parameters.`,
      [{ pointer: '/callbackUrl', code: 'not_allowed', message: 'not the start’s redirect URI' }],
    );
  const secret = await clientSecretOf(deps.db, deps.factorKeys, row);
  const result = await completeCallback(
    relyingPartyOf(row),
    secret,
    callback,
    { state: state!, verifier: taken.verifier, nonce: taken.nonce, redirectUri: taken.redirectUri },
    {},
    signal,
  );
  // What the IdP said, as our schemas allow it (an email or a name they refuse is dropped).
  const identity = cleanIdentity(result.identity);
  if (identity.subject.length > 255)
    throw providerError(
      identityProviderOf(row.id),
      'invalid_response',
      undefined,
      "The IdP's sub is longer than 255 characters; nothing was created.",
    );
  // The organization's own IdP vouches for the addresses of its verified domains (signin.ts checks
  // the domain), whether or not it sends email_verified (Entra ID, for one, does not).
  return { connection: row, nameId: identity.subject, email: identity.email, name: identity.name };
}
