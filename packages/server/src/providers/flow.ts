// What every redirect sign-in shares, whoever the provider is (issue 59, points 2-3; enterprise
// SSO, issue 61, calls the same functions with `sso:{connectionId}` as the provider's name):
// - the state of a sign-in in flight between start and callback: made here (256 random bits), kept
//   only as its SHA-256 with the PKCE verifier and the nonce sealed beside it, ten minutes, single
//   use (the callback's DELETE … RETURNING takes it: of two servers, one gets the row), bound to
//   its site (another site's state is not found, and not spent either);
// - the link ticket of identity_unlinked: the identity and the profile the provider vouched for,
//   by the ticket's SHA-256, single use, ten minutes;
// - the outcome of an identity the provider vouched for: a login exactly as identity/verify is
//   one (identities/verifyIdentity), an account created when the site's rule says so
//   (identities/createFromIdentity), or 409 identity_unlinked with a link ticket. Never a link
//   because an email matches.
import { and, eq, lt, sql } from 'drizzle-orm';
import { compileValidators } from '../contract/validation.ts';
import type { Db } from '../db/client.ts';
import { linkTickets, providerStates, users } from '../db/schema.ts';
import { hashOf, issueLinkTicket, type ProviderIdentity, randomToken } from '../identities/link-tickets.ts';

export { issueLinkTicket, type ProviderIdentity, takeLinkTicket } from '../identities/link-tickets.ts';

import { ApiError } from '../errors.ts';
import { createFromIdentity, type IdentityCreateDeps, verifyIdentity } from '../identities/identities.ts';
import { sealingRingFor } from '../kernel/deployment-keys.ts';
import { holdsEmailOf } from '../kernel/in-reach.ts';
import { type KeyRing, open, SealedSecretError, seal } from '../kernel/secret-box.ts';
import { refusalOf } from '../kernel/sign-in-gate.ts';
import type { WriteScope } from '../kernel/unit-of-work.ts';

/** Ten minutes: a start's state, and identity_unlinked's link ticket. */
export const FLOW_MS = 10 * 60_000;

/** The one answer to every state that cannot be used: unknown, used, expired, another site's. */
export const invalidState = () =>
  new ApiError(
    'invalid_state',
    'The state of this callback is unknown, used, expired or not this site’s: start the sign-in again (provider/start).',
  );

/** What a start keeps for its callback. */
export interface FlowSecrets {
  /** The `state` parameter: only its hash is kept. */
  state: string;
  /** PKCE (RFC 7636): the verifier, S256 always. */
  verifier: string;
  /** OpenID Connect's nonce. */
  nonce: string;
  expiresAt: Date;
}

/** A state as the callback finds it (once: it is gone from the store). */
export interface TakenState {
  provider: string;
  redirectUri: string;
  verifier: string;
  nonce: string;
}

const flowRing = (db: Db, ring: KeyRing | undefined) => sealingRingFor(db, ring, 'provider_flow');
const stateContext = (hash: string) => `provider state ${hash}`;

/** Makes and keeps a state for `provider` of `site`, its verifier and nonce sealed. */
export async function saveState(
  db: Db,
  ring: KeyRing | undefined,
  request: { site: string; provider: string; redirectUri: string; now?: Date },
): Promise<FlowSecrets> {
  const state = randomToken();
  const verifier = randomToken();
  const nonce = randomToken();
  const hash = hashOf(state);
  const expiresAt = new Date((request.now ?? new Date()).getTime() + FLOW_MS);
  await db.insert(providerStates).values({
    stateHash: hash,
    site: request.site,
    provider: request.provider,
    redirectUri: request.redirectUri,
    sealed: seal(await flowRing(db, ring), JSON.stringify({ verifier, nonce }), stateContext(hash)),
    expiresAt,
  });
  return { state, verifier, nonce, expiresAt };
}

/**
 * Takes the site's state (single use: the row is deleted as it is read, also when expired): 422
 * invalid_state for anything that cannot be used. `provider`, when given, must be the state's
 * (an SSO callback taking a provider's state is refused alike).
 */
export async function takeState(
  db: Db,
  ring: KeyRing | undefined,
  site: string,
  state: string | undefined,
  provider?: (name: string) => boolean,
): Promise<TakenState> {
  if (state === undefined || state === '' || state.length > 512) throw invalidState();
  const hash = hashOf(state);
  const [row] = await db
    .delete(providerStates)
    .where(and(eq(providerStates.stateHash, hash), eq(providerStates.site, site)))
    .returning();
  if (row === undefined || row.expiresAt.getTime() <= Date.now()) throw invalidState();
  if (provider !== undefined && !provider(row.provider)) throw invalidState();
  let secrets: { verifier: string; nonce: string };
  try {
    secrets = JSON.parse(open(await flowRing(db, ring), row.sealed, stateContext(hash)));
  } catch (error) {
    // Its key gone from FACTOR_ENCRYPTION_KEY since the start, or the row tampered with.
    if (error instanceof SealedSecretError) throw invalidState();
    throw error;
  }
  return { provider: row.provider, redirectUri: row.redirectUri, ...secrets };
}

/** Deletes the states and link tickets past their time (housekeeping); answers how many. */
export async function dropExpiredFlows(db: Db, now = new Date()): Promise<number> {
  const states = await db
    .delete(providerStates)
    .where(lt(providerStates.expiresAt, now))
    .returning({ h: providerStates.stateHash });
  const tickets = await db
    .delete(linkTickets)
    .where(lt(linkTickets.expiresAt, now))
    .returning({ h: linkTickets.ticketHash });
  return states.length + tickets.length;
}

/** What became of an identity the provider vouched for. */
export type IdentityOutcome = { outcome: 'login'; userId: string } | { outcome: 'created'; userId: string };

/** Why identity_unlinked: no account has it and the rule refuses, or an account has its email, or no email to create with. */
type UnlinkedWhy = 'refuse' | 'email' | 'no_email';

const UNLINKED_DETAIL: Record<UnlinkedWhy, string> = {
  refuse:
    'No account of this site has this identity, and the site creates none at a first sign-in: have the person prove which account is theirs, then link it with user/identity/link and this linkTicket.',
  email:
    'No account has this identity, but an account of this site has its email; it is never linked on an email alone: have the person prove the account is theirs (password, login link, second factor), then link it with user/identity/link and this linkTicket.',
  no_email:
    'No account of this site has this identity, and the provider gave no email to create one with: have the person prove which account is theirs, then link it with user/identity/link and this linkTicket.',
};

/** What a name may be at most (spec: Name). */
const MAX_NAME = 200;

/**
 * The identity's outcome (see the top of this file): a login (verifyIdentity: 403
 * second_factor_required with its ticket, 403 account_disabled, as identity/verify), an account
 * created (rule `create`, nobody has the identity or its email), or 409 identity_unlinked with a
 * linkTicket and the provider's profile, nothing of any account changed.
 */
export async function identityOutcome(
  scope: WriteScope,
  deps: IdentityCreateDeps,
  identity: ProviderIdentity,
  onNewPerson: 'create' | 'refuse',
): Promise<IdentityOutcome> {
  identity = cleanIdentity(identity);
  const key = { provider: identity.provider, subject: identity.subject };
  try {
    return { outcome: 'login', userId: await verifyIdentity(scope, deps, key) };
  } catch (error) {
    if (!(error instanceof ApiError && error.code === 'invalid_credentials')) throw error;
  }
  const email = identity.email;
  let why: UnlinkedWhy = onNewPerson === 'refuse' ? 'refuse' : email === undefined ? 'no_email' : 'email';
  if (onNewPerson === 'create' && email !== undefined) {
    const [taken] = await deps.db
      .select({ id: users.id })
      .from(users)
      .where(and(holdsEmailOf(scope.site), sql`lower(${users.email}) = lower(${email})`))
      .limit(1);
    if (taken === undefined) {
      // An account made by a social sign-in with an email of an organization that enforces single
      // sign-on would be a way around its IdP (sso/enforcement.ts): refused as a login would be.
      const refused = await refusalOf(
        deps,
        deps.db,
        scope.site,
        { email },
        { kind: 'identity', provider: identity.provider },
      );
      if (refused !== undefined) throw refused;
      try {
        const userId = await createFromIdentity(scope, deps, {
          provider: identity.provider,
          subject: identity.subject,
          email,
          name: nameFor(identity.name, email),
          ...(identity.emailVerified === true && { emailVerified: true }),
        });
        return { outcome: 'created', userId };
      } catch (error) {
        // Another request created it first (the identity: then this is its login), or took the email.
        if (error instanceof ApiError && error.code === 'identity_taken')
          return { outcome: 'login', userId: await verifyIdentity(scope, deps, key) };
        if (!(error instanceof ApiError && error.code === 'email_taken')) throw error;
      }
    }
    why = 'email';
  }
  const { linkTicket, expiresAt } = await issueLinkTicket(deps.db, scope.site, identity);
  throw new ApiError('identity_unlinked', UNLINKED_DETAIL[why], {
    members: {
      linkTicket,
      linkTicketExpiresAt: expiresAt.toISOString(),
      identity: {
        provider: identity.provider,
        subject: identity.subject,
        email: identity.email ?? null,
        emailVerified: identity.emailVerified === true,
        name: identity.name ?? null,
      },
    },
  });
}

/** The account's name: the provider's, else the email's local part (an account needs one). */
function nameFor(name: string | undefined, email: string): string {
  const fallback = (email.split('@')[0] ?? email).slice(0, MAX_NAME);
  const given = name?.trim().slice(0, MAX_NAME);
  return given !== undefined && given !== '' && validProfile(email, given) ? given : fallback;
}

/**
 * What the provider said, as the spec's schemas allow it (spec: Email, Name): an email our rule
 * refuses is dropped (with its verification), a name it refuses too. Never trusted as it came.
 */
export function cleanIdentity(identity: ProviderIdentity): ProviderIdentity {
  const email = identity.email !== undefined && validProfile(identity.email, 'x') ? identity.email : undefined;
  const name =
    identity.name !== undefined && validProfile('x@example.org', identity.name.trim().slice(0, MAX_NAME))
      ? identity.name.trim().slice(0, MAX_NAME)
      : undefined;
  return {
    provider: identity.provider,
    subject: identity.subject,
    ...(email !== undefined && { email, emailVerified: identity.emailVerified === true }),
    ...(name !== undefined && name !== '' && { name }),
  };
}

const validProfile = (email: string, name: string) =>
  compileValidators().body.CreateUserFromIdentityRequest!({ provider: 'x', subject: 'x', email, name });
