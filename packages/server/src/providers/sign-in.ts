// provider/start and provider/callback as functions of a write scope (issue 59, points 2-3): the
// site's provider looked up, the redirect URI checked against its list, the flow's state kept
// (flow.ts), the relying party's calls (oauth.ts), and the identity's outcome (flow.ts:
// identityOutcome, the login of identity/verify). The session, when asked for, is the caller's
// (as identity/verify's route makes it), and so are the metrics.

import { and, eq, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { providerTokens, userIdentities, users } from '../db/schema.ts';
import { ApiError, invalidRequest, userNotFound } from '../errors.ts';
import type { IdentityCreateDeps } from '../identities/identities.ts';
import { sealingRingFor } from '../kernel/deployment-keys.ts';
import { isUuid } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import { type KeyRing, open, seal } from '../kernel/secret-box.ts';
import type { WriteScope } from '../kernel/unit-of-work.ts';
import { type IdentityOutcome, identityOutcome, saveState, takeState } from './flow.ts';
import { authorizationUrl, completeCallback, type ProviderTokenSet } from './oauth.ts';
import { findProvider, openClientSecret, type StoredProvider } from './providers.ts';

export const providerNotFound = (name: string) =>
  new ApiError('provider_not_found', `This site has no provider named "${name}" (provider/list names them).`);

/** The budget of the provider's calls: what the request's deadline leaves, less a margin to answer. */
export function providerBudget(requestTimeoutMs: number, signal: AbortSignal): AbortSignal {
  const budget = Math.max(100, Math.min(requestTimeoutMs - 1_000, requestTimeoutMs * 0.8));
  return AbortSignal.any([signal, AbortSignal.timeout(budget)]);
}

export interface StartRequest {
  provider: string;
  redirectUri: string;
  loginHint?: string | undefined;
  prompt?: string | undefined;
}

/** provider/start: the authorization URL to send the person to, and until when its callback may come. */
export async function startSignIn(
  db: Db,
  ring: KeyRing | undefined,
  site: string,
  request: StartRequest,
  signal: AbortSignal,
): Promise<{ authorizationUrl: string; expiresAt: Date }> {
  const provider = await findProvider(db, site, request.provider);
  if (provider === undefined) throw providerNotFound(request.provider);
  if (!provider.redirectUris.includes(request.redirectUri))
    throw invalidRequest(
      `redirectUri must be one of ${provider.name}'s redirect URIs, exactly (cli provider set --redirect-uris): ${provider.redirectUris.join(', ')}`,
      [{ pointer: '/redirectUri', code: 'not_allowed', message: 'not one of the provider’s redirect URIs' }],
    );
  const flow = await saveState(db, ring, { site, provider: provider.name, redirectUri: request.redirectUri });
  const url = await authorizationUrl(
    provider,
    { ...flow, redirectUri: request.redirectUri },
    { loginHint: request.loginHint, prompt: request.prompt },
    signal,
  );
  return { authorizationUrl: url, expiresAt: flow.expiresAt };
}

export interface CallbackRequest {
  callbackUrl: string;
  formPost?: string | undefined;
}

export interface CallbackDeps extends IdentityCreateDeps {
  factorKeys?: KeyRing | undefined;
}

/**
 * provider/callback up to the identity's outcome: the state taken (422 invalid_state), the
 * callback's URL checked against the start's redirect URI, the provider's answer checked (422
 * provider_error, 502, 504), then identityOutcome (200 login, 201 created, 409 identity_unlinked,
 * the 403s of a login). `named` hears the provider's name once the state names it (the audit row).
 */
export async function completeSignIn(
  scope: WriteScope,
  deps: CallbackDeps,
  request: CallbackRequest,
  signal: AbortSignal,
  named?: (provider: string) => void,
): Promise<IdentityOutcome & { provider: string }> {
  const callback = parseCallback(request);
  // An enterprise connection's state (sso:{connectionId}) is sso/callback's, never this one's.
  const taken = await takeState(
    deps.db,
    deps.factorKeys,
    scope.site,
    callback.searchParams.get('state') ?? undefined,
    (name) => !name.startsWith('sso:'),
  );
  named?.(taken.provider);
  const provider = await findProvider(deps.db, scope.site, taken.provider);
  if (provider === undefined) throw providerNotFound(taken.provider);
  if (withoutQuery(callback) !== withoutQuery(new URL(taken.redirectUri)))
    throw invalidRequest(
      `callbackUrl must be the redirect URI its start named (${taken.redirectUri}), with the provider's parameters.`,
      [{ pointer: '/callbackUrl', code: 'not_allowed', message: 'not the start’s redirect URI' }],
    );
  const secret = await openClientSecret(deps.db, scope.site, provider.name, deps.factorKeys);
  if (secret === undefined) throw providerNotFound(provider.name);
  const result = await completeCallback(
    provider,
    secret,
    callback,
    {
      state: callback.searchParams.get('state')!,
      verifier: taken.verifier,
      nonce: taken.nonce,
      redirectUri: taken.redirectUri,
    },
    { appleUser: callback.searchParams.get('user') ?? undefined },
    signal,
  );
  const outcome = await identityOutcome(
    { ...scope, provider: provider.name },
    deps,
    result.identity,
    provider.onNewPerson,
  );
  if (provider.keepTokens)
    await keepTokens(deps.db, deps.factorKeys, provider, result.identity.subject, outcome.userId, result.tokens);
  return { ...outcome, provider: provider.name };
}

/** The callback's URL with form_post's fields as its query (they are the response's parameters either way). */
export function parseCallback(request: CallbackRequest): URL {
  let url: URL;
  try {
    url = new URL(request.callbackUrl);
  } catch {
    throw invalidRequest('callbackUrl must be the whole URL the browser came back to (https://…?code=…&state=…).', [
      { pointer: '/callbackUrl', code: 'invalid_format', message: 'not an absolute URL' },
    ]);
  }
  if (request.formPost !== undefined)
    for (const [k, v] of new URLSearchParams(request.formPost)) url.searchParams.set(k, v);
  return url;
}

export const withoutQuery = (url: URL) => `${url.origin}${url.pathname}`;

const tokensContext = (site: string, provider: string, subject: string) =>
  `provider tokens ${site} ${provider} ${subject}`;
const tokensRing = (db: Db, ring: KeyRing | undefined) => sealingRingFor(db, ring, 'provider_flow');

/** --keep-tokens: the provider's tokens, sealed, replacing those of the identity's last sign-in. */
async function keepTokens(
  db: Db,
  ring: KeyRing | undefined,
  provider: StoredProvider,
  subject: string,
  userId: string,
  tokens: ProviderTokenSet,
): Promise<void> {
  const sealed = seal(
    await tokensRing(db, ring),
    JSON.stringify(tokens),
    tokensContext(provider.site, provider.name, subject),
  );
  await db
    .insert(providerTokens)
    .values({ site: provider.site, provider: provider.name, subject, userId, sealed })
    .onConflictDoUpdate({
      target: [providerTokens.site, providerTokens.provider, providerTokens.subject],
      set: { userId, sealed, updatedAt: sql`now()` },
    });
}

/** provider/tokens: the kept tokens of the account's identity at `provider` (404s when none). */
export async function readProviderTokens(
  db: Db,
  ring: KeyRing | undefined,
  site: string,
  userId: string,
  provider: string,
): Promise<ProviderTokenSet & { provider: string; subject: string; updatedAt: Date }> {
  if (!isUuid(userId)) throw userNotFound();
  const [account] = await db
    .select({ id: users.id })
    .from(users)
    .where(and(eq(users.id, userId), inReachOf(site)));
  if (account === undefined) throw userNotFound();
  const [row] = await db
    .select({ subject: providerTokens.subject, sealed: providerTokens.sealed, updatedAt: providerTokens.updatedAt })
    .from(providerTokens)
    .innerJoin(
      userIdentities,
      and(
        eq(userIdentities.site, providerTokens.site),
        eq(userIdentities.provider, providerTokens.provider),
        eq(userIdentities.subject, providerTokens.subject),
        eq(userIdentities.userId, providerTokens.userId),
      ),
    )
    .where(and(eq(providerTokens.site, site), eq(providerTokens.provider, provider), eq(providerTokens.userId, userId)))
    .limit(1);
  if (row === undefined)
    throw new ApiError(
      'identity_not_found',
      `This account has no identity at ${provider} with tokens kept (cli provider set --keep-tokens keeps them from the next sign-in).`,
    );
  const tokens = JSON.parse(
    open(await tokensRing(db, ring), row.sealed, tokensContext(site, provider, row.subject)),
  ) as ProviderTokenSet;
  return { provider, subject: row.subject, ...tokens, updatedAt: row.updatedAt };
}
