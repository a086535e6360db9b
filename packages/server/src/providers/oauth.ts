// The relying party's side of a redirect sign-in (issue 59, points 2-3), done by openid-client
// (panva's, OpenID-certified; oauth4webapi underneath) rather than our own reading of the RFCs:
// - discovery: the issuer's document read at the first use and kept an hour per (site, provider,
//   issuer), refreshed after; openid-client checks that it names the issuer it was read from.
//   A document that cannot be read again is served from the cache for up to a day;
// - the authorization URL: state, PKCE S256 (always) and nonce from the flow store (flow.ts);
// - the callback: RFC 9207's `iss` against mix-up, the code exchanged with the verifier, the ID
//   token's signature checked by the issuer's JWKS (enableNonRepudiationChecks: openid-client
//   otherwise trusts an ID token from the token endpoint over TLS) with only the algorithms the
//   issuer advertises (never `none`; an HMAC is refused since no client secret keys it here), and
//   its iss, aud, azp, exp, iat and nonce; userinfo where the provider has one. For a plain OAuth
//   2.0 provider (GitHub), its userinfo read with JSON pointers and its verified primary email;
// - every call to the provider under the request's deadline (a budget below it): 504
//   provider_timeout, 502 provider_unavailable, 422 provider_error; never a 500, never the
//   provider's raw body.
// Nothing here keeps a secret or writes the database: the caller opens the client secret and the
// flow's secrets, and decides what the identity becomes (flow.ts).
import * as client from 'openid-client';
import { ApiError } from '../errors.ts';
import type { ProviderIdentity } from './flow.ts';
import type { ProviderEndpoints, UserinfoMap } from './options.ts';

/** What the relying party needs of a provider (its configuration as stored, and its secret). */
export interface RelyingPartyProvider {
  site: string;
  name: string;
  kind: 'oidc' | 'oauth2';
  issuer: string | null;
  endpoints: ProviderEndpoints | null;
  userinfoMap: UserinfoMap | null;
  clientId: string;
  scopes: string[];
}

/** The provider's tokens, for --keep-tokens. */
export interface ProviderTokenSet {
  accessToken: string;
  refreshToken: string | null;
  scope: string | null;
  expiresAt: string | null;
}

const DISCOVERY_FRESH_MS = 60 * 60_000;
const DISCOVERY_STALE_MS = 24 * 60 * 60_000;
/** At most this many documents kept (one per site's provider): the oldest goes first. */
const MAX_CACHED = 1_000;
const LOOPBACK = new Set(['127.0.0.1', '[::1]', 'localhost']);

interface Cached {
  metadata: client.ServerMetadata;
  at: number;
  jwks?: client.ExportedJWKSCache | undefined;
}
const discovered = new Map<string, Cached>();
const keyOf = (p: RelyingPartyProvider) => `${p.site}\u0000${p.name}\u0000${p.issuer ?? ''}`;

/** Forgets every discovered document (tests; an operator's provider set replaces one). */
export function forgetDiscovery(site?: string, name?: string): void {
  if (site === undefined) {
    discovered.clear();
    return;
  }
  const prefix = name === undefined ? `${site}\u0000` : `${site}\u0000${name}\u0000`;
  for (const key of discovered.keys()) if (key.startsWith(prefix)) discovered.delete(key);
}

const insecureOk = (url: string) => {
  const parsed = new URL(url);
  return parsed.protocol === 'http:' && LOOPBACK.has(parsed.hostname);
};

/** fetch under `signal` (the request's deadline and the provider budget). */
const fetchUnder =
  (signal: AbortSignal): client.CustomFetch =>
  (url, options) =>
    fetch(url, {
      ...(options as RequestInit),
      signal: AbortSignal.any([signal, ...(options.signal ? [options.signal] : [])]),
    });

/**
 * The provider's server metadata: the issuer's discovery document (oidc, cached), or the
 * configured endpoints (oauth2).
 */
async function metadataOf(p: RelyingPartyProvider, signal: AbortSignal): Promise<Cached> {
  if (p.kind === 'oauth2') {
    const endpoints = p.endpoints!;
    return {
      metadata: {
        // No issuer in plain OAuth 2.0: the authorization endpoint's origin stands for it.
        issuer: new URL(endpoints.authorization).origin,
        authorization_endpoint: endpoints.authorization,
        token_endpoint: endpoints.token,
      },
      at: Date.now(),
    };
  }
  const key = keyOf(p);
  const cached = discovered.get(key);
  if (cached !== undefined && Date.now() - cached.at < DISCOVERY_FRESH_MS) return cached;
  try {
    const config = await client.discovery(new URL(p.issuer!), p.clientId, undefined, undefined, {
      [client.customFetch]: fetchUnder(signal),
      ...(insecureOk(p.issuer!) && { execute: [client.allowInsecureRequests] }),
    });
    const fresh: Cached = { metadata: config.serverMetadata(), at: Date.now(), jwks: cached?.jwks };
    discovered.delete(key);
    discovered.set(key, fresh);
    if (discovered.size > MAX_CACHED) discovered.delete(discovered.keys().next().value!);
    return fresh;
  } catch (error) {
    if (cached !== undefined && Date.now() - cached.at < DISCOVERY_STALE_MS && !signal.aborted) return cached;
    throw providerFailure(p.name, 'discovery document', error, signal);
  }
}

/** Reads the issuer's discovery document now (cli provider set's check); throws what was wrong. */
export async function checkDiscovery(p: RelyingPartyProvider, timeoutMs = 5_000): Promise<client.ServerMetadata> {
  forgetDiscovery(p.site, p.name);
  return (await metadataOf(p, AbortSignal.timeout(timeoutMs))).metadata;
}

function configurationOf(p: RelyingPartyProvider, cached: Cached, secret: string, signal: AbortSignal) {
  const config = new client.Configuration(
    cached.metadata,
    p.clientId,
    // No id_token_signed_response_alg: only the algorithms the issuer advertises (RS256 when it
    // lists none); an HMAC would need the client secret as its key, which is never given for it.
    undefined,
    client.ClientSecretPost(secret),
  );
  config[client.customFetch] = fetchUnder(signal);
  if (insecureOk(cached.metadata.token_endpoint ?? cached.metadata.issuer)) client.allowInsecureRequests(config);
  if (p.kind === 'oidc') {
    client.enableNonRepudiationChecks(config);
    if (cached.jwks !== undefined) client.setJwksCache(config, cached.jwks);
  }
  return config;
}

/** The authorization URL of a start: the flow's state, S256 challenge and nonce. */
export async function authorizationUrl(
  p: RelyingPartyProvider,
  flow: { state: string; verifier: string; nonce: string; redirectUri: string },
  options: { loginHint?: string | undefined; prompt?: string | undefined },
  signal: AbortSignal,
): Promise<string> {
  const cached = await metadataOf(p, signal);
  // No secret is needed to build the URL.
  const config = configurationOf(p, cached, 'unused', signal);
  const parameters: Record<string, string> = {
    redirect_uri: flow.redirectUri,
    response_type: 'code',
    scope: p.scopes.join(' '),
    state: flow.state,
    code_challenge: await client.calculatePKCECodeChallenge(flow.verifier),
    code_challenge_method: 'S256',
  };
  if (p.kind === 'oidc') parameters.nonce = flow.nonce;
  if (options.loginHint !== undefined) parameters.login_hint = options.loginHint;
  if (options.prompt !== undefined) parameters.prompt = options.prompt;
  // Apple sends the name and email scopes' answers only by form_post.
  if (
    p.kind === 'oidc' &&
    cached.metadata.issuer === 'https://appleid.apple.com' &&
    p.scopes.some((s) => s !== 'openid')
  )
    parameters.response_mode = 'form_post';
  return client.buildAuthorizationUrl(config, parameters).href;
}

/** What the callback found: who the person is at the provider, and its tokens. */
export interface CallbackResult {
  identity: ProviderIdentity;
  tokens: ProviderTokenSet;
}

/**
 * The callback's checks and calls (see the top of this file). `callback` is the URL the browser
 * came back to with the response's parameters in its query (form_post's fields merged in).
 */
export async function completeCallback(
  p: RelyingPartyProvider,
  secret: string,
  callback: URL,
  flow: { state: string; verifier: string; nonce: string; redirectUri: string },
  extra: { appleUser?: string | undefined },
  signal: AbortSignal,
): Promise<CallbackResult> {
  const cached = await metadataOf(p, signal);
  const config = configurationOf(p, cached, secret, signal);
  let tokens: Awaited<ReturnType<typeof client.authorizationCodeGrant>>;
  try {
    tokens = await client.authorizationCodeGrant(
      config,
      callback,
      {
        pkceCodeVerifier: flow.verifier,
        expectedState: flow.state,
        ...(p.kind === 'oidc' ? { expectedNonce: flow.nonce, idTokenExpected: true } : { idTokenExpected: false }),
      },
      { redirect_uri: flow.redirectUri },
    );
  } catch (error) {
    throw providerFailure(p.name, 'token endpoint', error, signal);
  } finally {
    if (p.kind === 'oidc') cached.jwks = client.getJwksCache(config) ?? cached.jwks;
  }
  const kept: ProviderTokenSet = {
    accessToken: tokens.access_token,
    refreshToken: tokens.refresh_token ?? null,
    scope: tokens.scope ?? null,
    expiresAt: tokens.expires_in === undefined ? null : new Date(Date.now() + tokens.expires_in * 1000).toISOString(),
  };
  if (p.kind === 'oauth2')
    return { identity: await oauth2Identity(p, config, tokens.access_token, signal), tokens: kept };

  const claims = tokens.claims();
  if (claims === undefined) throw providerError(p.name, 'invalid_id_token', undefined);
  let email = stringClaim(claims.email);
  let verified = booleanClaim(claims.email_verified);
  let name = stringClaim(claims.name);
  if (cached.metadata.userinfo_endpoint !== undefined && (email === undefined || name === undefined)) {
    try {
      const info = await client.fetchUserInfo(config, tokens.access_token, claims.sub);
      if (email === undefined) {
        email = stringClaim(info.email);
        verified = booleanClaim(info.email_verified);
      }
      name ??= stringClaim(info.name);
    } catch (error) {
      throw providerFailure(p.name, 'userinfo endpoint', error, signal);
    }
  }
  // Apple: the name comes once, at the first sign-in, in the form_post's `user` field.
  if (name === undefined && extra.appleUser !== undefined) name = appleName(extra.appleUser);
  return {
    identity: { provider: p.name, subject: claims.sub, email, emailVerified: email !== undefined && verified, name },
    tokens: kept,
  };
}

/** A plain OAuth 2.0 provider's userinfo, read with the configured JSON pointers; GitHub's emails list. */
async function oauth2Identity(
  p: RelyingPartyProvider,
  config: client.Configuration,
  accessToken: string,
  signal: AbortSignal,
): Promise<ProviderIdentity> {
  const map = p.userinfoMap!;
  const read = async (url: string, what: string): Promise<unknown> => {
    let response: Response;
    try {
      response = await client.fetchProtectedResource(
        config,
        accessToken,
        new URL(url),
        'GET',
        undefined,
        new Headers({ accept: 'application/json' }),
      );
    } catch (error) {
      throw providerFailure(p.name, what, error, signal);
    }
    if (!response.ok) {
      await response.body?.cancel();
      throw response.status >= 500
        ? new ApiError('provider_unavailable', `${p.name}'s ${what} answered ${response.status}; try again.`)
        : providerError(p.name, 'invalid_response', undefined, `${p.name}'s ${what} answered ${response.status}.`);
    }
    try {
      return await response.json();
    } catch (error) {
      throw providerFailure(p.name, what, error, signal, 'invalid_response');
    }
  };
  const info = await read(p.endpoints!.userinfo, 'userinfo endpoint');
  const subjectValue = pointer(info, map.subject);
  const subject =
    typeof subjectValue === 'number' && Number.isSafeInteger(subjectValue)
      ? String(subjectValue)
      : stringClaim(subjectValue);
  if (subject === undefined || subject.length > 255)
    throw providerError(
      p.name,
      'invalid_response',
      undefined,
      `${p.name}'s userinfo has no subject at ${map.subject} (cli provider set --userinfo-map).`,
    );
  let email = map.email === undefined ? undefined : stringClaim(pointer(info, map.email));
  let verified = map.emailVerified === undefined ? false : booleanClaim(pointer(info, map.emailVerified));
  const name = map.name === undefined ? undefined : stringClaim(pointer(info, map.name));
  if (p.endpoints!.emails !== undefined) {
    // GitHub: /user's email is the public one, verified or not; the primary verified one is the email.
    const list = await read(p.endpoints!.emails, 'emails endpoint');
    const primary = Array.isArray(list)
      ? list.find((e) => e !== null && typeof e === 'object' && e.primary === true && e.verified === true)
      : undefined;
    email = stringClaim(primary?.email);
    verified = email !== undefined;
  }
  return { provider: p.name, subject, email, emailVerified: email !== undefined && verified, name };
}

/** RFC 6901. */
function pointer(document: unknown, path: string): unknown {
  let node = document;
  for (const raw of path.split('/').slice(1)) {
    const token = raw.replaceAll('~1', '/').replaceAll('~0', '~');
    if (node === null || typeof node !== 'object' || !Object.hasOwn(node, token)) return undefined;
    node = (node as Record<string, unknown>)[token];
  }
  return node;
}

const stringClaim = (value: unknown) => (typeof value === 'string' && value !== '' ? value : undefined);
/** Apple sends email_verified as the string "true". */
const booleanClaim = (value: unknown) => value === true || value === 'true';

function appleName(user: string): string | undefined {
  try {
    const parsed = JSON.parse(user) as { name?: { firstName?: unknown; lastName?: unknown } };
    const parts = [parsed.name?.firstName, parsed.name?.lastName].filter(
      (s): s is string => typeof s === 'string' && s !== '',
    );
    return parts.length === 0 ? undefined : parts.join(' ');
  } catch {
    return undefined;
  }
}

const clip = (text: string | undefined, max: number) =>
  // biome-ignore lint/suspicious/noControlCharactersInRegex: removing them is the point
  text === undefined ? undefined : text.replace(/[\u0000-\u001f\u007f-\u009f]/g, ' ').slice(0, max);

/** 422 provider_error with the provider's code and description (clipped text, never a body). */
export function providerError(name: string, code: string, description: string | undefined, detail?: string): ApiError {
  const error = clip(code, 200)!;
  const members: Record<string, unknown> = { providerError: error };
  const text = clip(description, 500);
  if (text !== undefined && text !== '') members.providerErrorDescription = text;
  return new ApiError('provider_error', detail ?? describe(name, error), { members });
}

function describe(name: string, code: string): string {
  if (code === 'invalid_id_token')
    return `${name}'s ID token did not pass the checks (its signature, algorithm, issuer, audience, expiry or nonce); nothing was created.`;
  if (code === 'mix_up')
    return `The callback's iss names another issuer than ${name}'s (RFC 9207: a mix-up); nothing was created.`;
  if (code === 'invalid_response') return `${name} answered what is not a valid OAuth answer; nothing was created.`;
  return `${name} answered an error: ${code}.`;
}

/** What a failed call to the provider is for the caller: 504, 502 or 422 (never a 500). */
function providerFailure(
  name: string,
  what: string,
  error: unknown,
  signal: AbortSignal,
  fallback = 'invalid_response',
): ApiError {
  if (error instanceof ApiError) return error;
  const aborted =
    signal.aborted ||
    (error instanceof Error && (error.name === 'TimeoutError' || error.name === 'AbortError')) ||
    (error instanceof Error && error.cause instanceof Error && error.cause.name === 'TimeoutError');
  if (aborted)
    return new ApiError(
      'provider_timeout',
      `${name}'s ${what} did not answer within the request's deadline; start the sign-in again.`,
    );
  if (error instanceof client.AuthorizationResponseError)
    return providerError(name, error.error, error.error_description);
  if (error instanceof client.ResponseBodyError) {
    if (error.status >= 500)
      return new ApiError('provider_unavailable', `${name}'s ${what} answered ${error.status}; try again.`);
    return providerError(name, error.error, error.error_description);
  }
  if (error instanceof client.ClientError) {
    const code = error.code ?? '';
    const status = (error.cause as { status?: unknown } | undefined)?.status;
    if (code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' && typeof status === 'number' && status >= 500)
      return new ApiError('provider_unavailable', `${name}'s ${what} answered ${status}; try again.`);
    if (code === 'OAUTH_RESPONSE_IS_NOT_CONFORM' || code === 'OAUTH_RESPONSE_IS_NOT_JSON')
      return new ApiError(
        'provider_unavailable',
        `${name}'s ${what} answered what is not an OAuth answer${typeof status === 'number' ? ` (HTTP ${status})` : ''}; try again.`,
      );
    // RFC 9207: the callback's iss names another issuer, or none where the issuer says it sends one.
    const inner = error.cause instanceof Error ? error.cause.message : '';
    if (/"iss" \(issuer\) response parameter|response parameter "iss"/.test(`${error.message} ${inner}`))
      return providerError(name, 'mix_up', undefined);
    if (what === 'discovery document')
      return new ApiError(
        'provider_unavailable',
        `${name}'s discovery document could not be used (${clip(error.message, 200)}); check --issuer.`,
      );
    if (
      code.startsWith('OAUTH_JWT') ||
      code === 'OAUTH_KEY_SELECTION_FAILED' ||
      code === 'OAUTH_JSON_ATTRIBUTE_COMPARISON_FAILED' ||
      code === 'OAUTH_INVALID_RESPONSE' ||
      code === 'OAUTH_UNSUPPORTED_OPERATION' ||
      code === 'ERR_JOSE_NOT_SUPPORTED' ||
      /JWS|JWT|ID Token|signature|alg/i.test(error.message)
    )
      return providerError(name, 'invalid_id_token', undefined);
    return providerError(name, fallback, undefined);
  }
  // fetch's TypeError: refused, reset, no such host.
  if (error instanceof TypeError)
    return new ApiError('provider_unavailable', `${name}'s ${what} could not be reached; try again.`);
  return providerError(name, fallback, undefined);
}
