// Identities (issue 44): who an account is at another provider ("Sign in with Google"), as the
// site's own OAuth code found out. The service keeps who is who and never merges: it creates an
// account from an identity only when asked (identity/create, refused when the email is another
// account's), links one only when asked (link, after the person proved the account is theirs),
// and one (provider, subject) belongs to at most one account of a site, by the unique index
// user_identities_site_provider_subject_key (a race between two creates or links is settled there).
import type { components } from '@user-accounts/client';
import { and, count, eq, sql } from 'drizzle-orm';
import { verifiedAtCreate } from '../accounts/contacts.ts';
import { emailTaken } from '../accounts/create.ts';
import { assertSiteSchema } from '../accounts/metadata.ts';
import { type Db, rows } from '../db/client.ts';
import { metadataSchemas, userIdentities, users } from '../db/schema.ts';
import {
  ApiError,
  accountDisabled,
  invalidCredentials,
  secondFactorRequired,
  sqlState,
  userNotFound,
} from '../errors.ts';
import { enabledFactorTypes } from '../factors/factors.ts';
import { generationOf, makeLoginTicket } from '../factors/login-ticket.ts';
import { assertSignInMethodLeft } from '../factors/sign-in-methods.ts';
import { isUuid, uuidv7 } from '../kernel/ids.ts';
import { holdsEmailOf, inReachOf } from '../kernel/in-reach.ts';
import type { EventEntry } from '../kernel/outbox.ts';
import { refusalOf } from '../kernel/sign-in-gate.ts';
import { inWrite, type KeptAnswer, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { checkAccountLimit } from '../limits/accounts.ts';
import type { LoginMethod } from '../sessions/rules.ts';
import { takeLinkTicket } from './link-tickets.ts';

/**
 * A login through another provider: `fed` (not one of RFC 8176's values, but the one other
 * identity services use for a federated login), level 1: what the provider checked is not ours to rate.
 */
export const IDENTITY_LOGIN: LoginMethod = { aal: 1, amr: ['fed'] };

/** The identities an account may have. */
export const MAX_IDENTITIES = 20;

export const identityTaken = () => new ApiError('identity_taken', 'An account of this site already has this identity.');
export const identityNotFound = () => new ApiError('identity_not_found', 'This account has no such identity.');
export const identityLimitReached = () =>
  new ApiError(
    'identity_limit_reached',
    `This account has ${MAX_IDENTITIES} identities, the most it may have; unlink one first.`,
  );

/** An identity as a request names it. */
export interface IdentityKey {
  provider: string;
  subject: string;
}

/** The condition of the site's row of this identity. */
const identityIs = (site: string, key: IdentityKey) =>
  and(
    eq(userIdentities.site, site),
    eq(userIdentities.provider, key.provider),
    eq(userIdentities.subject, key.subject),
  );

/** Whether an account of the site has this identity (any account: in reach, in its grace period, or another writer's). */
async function identityHeld(db: Db, site: string, key: IdentityKey): Promise<boolean> {
  const [row] = await db.select({ id: userIdentities.id }).from(userIdentities).where(identityIs(site, key)).limit(1);
  return row !== undefined;
}

/** The account in reach that has this identity, for get: its id, or undefined. */
export async function accountWithIdentity(db: Db, site: string, key: IdentityKey): Promise<string | undefined> {
  const [row] = await db
    .select({ id: users.id })
    .from(userIdentities)
    .innerJoin(users, eq(users.id, userIdentities.userId))
    .where(and(identityIs(site, key), inReachOf(site)))
    .limit(1);
  return row?.id;
}

/** The enterprise connection an identity came through (sso/): named on its user.identity_linked. */
export interface IdentityVia {
  connectionId: string;
  orgId: string;
}

/** user.identity_linked or user.identity_unlinked: the account and which identity (nothing secret). */
const identityEvent = (
  type: 'user.identity_linked' | 'user.identity_unlinked',
  userId: string,
  key: IdentityKey,
  via?: IdentityVia,
): EventEntry => ({
  type,
  userId,
  data: { _userId: userId, provider: key.provider, subject: key.subject, ...via },
});

export type NewIdentityAccount = components['schemas']['CreateUserFromIdentityRequest'];

export interface IdentityCreateDeps extends WriteDeps {
  maxAccountsPerSite?: number | undefined;
}

/**
 * Creates an account with no password and the identity linked (identity/create): 409
 * identity_taken when an account of the site has the identity, 409 email_taken when one has the
 * email (never merged), else the new id. Checked first, to answer without a write; the unique
 * indexes settle races (of two at once, one creates, the other gets the 409).
 */
export async function createFromIdentity(
  scope: WriteScope,
  deps: IdentityCreateDeps,
  input: NewIdentityAccount,
  answer?: (id: string) => KeptAnswer,
  via?: IdentityVia,
): Promise<string> {
  const { site } = scope;
  const key = { provider: input.provider, subject: input.subject };
  const [before] = await rows<{ identity: boolean; email: boolean; schema: unknown }>(
    deps.db,
    sql`select exists (select 1 from ${userIdentities} where ${identityIs(site, key)}) as identity,
      exists (select 1 from ${users} where ${and(holdsEmailOf(site), sql`lower(${users.email}) = lower(${input.email})`)}) as email,
      (select ${metadataSchemas.schema} from ${metadataSchemas} where ${metadataSchemas.site} = ${site}) as schema`,
  );
  if (before!.identity) throw identityTaken();
  if (before!.email) throw emailTaken();
  const schema = typeof before!.schema === 'string' ? JSON.parse(before!.schema) : before!.schema;
  await assertSiteSchema(site, schema, input.metadata ?? {}, scope.deadline?.signal);

  const id = uuidv7();
  try {
    await inWrite(
      scope,
      deps,
      'identity_create',
      {
        userId: id,
        status: 201,
        outcome: 'user created',
        moreEvents: [identityEvent('user.identity_linked', id, key, via)],
        ...(answer && { answer: answer(id) }),
      },
      async (tx) => {
        await checkAccountLimit(tx, site, 1, deps.maxAccountsPerSite);
        await tx.insert(users).values({
          id,
          site,
          email: input.email,
          name: input.name,
          phone: input.phone ?? null,
          address: input.address ?? null,
          ...verifiedAtCreate(input),
          metadata: input.metadata ?? {},
          passwordHash: null,
          origin: 'api',
        });
        await tx.insert(userIdentities).values({
          id: uuidv7(),
          site,
          userId: id,
          provider: key.provider,
          subject: key.subject,
          email: input.email,
          emailVerified: input.emailVerified ?? false,
        });
        return id;
      },
    );
  } catch (error) {
    // A unique index refused it: a concurrent write committed the identity or the email first.
    // Which one: the identity, when the site has it now (the other write has committed: the index
    // waited for it), else the email.
    if (sqlState(error) === '23505') throw (await identityHeld(deps.db, site, key)) ? identityTaken() : emailTaken();
    throw error;
  }
  return id;
}

/** The account's row, locked for the rest of the transaction; undefined when not in reach. */
async function lockAccount(tx: Db, site: string, userId: string) {
  const [row] = await tx
    .select({ id: users.id, passwordHash: users.passwordHash, disabled: users.disabled })
    .from(users)
    .where(and(eq(users.id, userId), inReachOf(site)))
    .for('update');
  return row;
}

export type LinkRequest =
  | (IdentityKey & {
      userId: string;
      email?: string | undefined;
      emailVerified?: boolean | undefined;
      linkTicket?: undefined;
      via?: IdentityVia | undefined;
    })
  | { userId: string; linkTicket: string; provider?: undefined; subject?: undefined; via?: undefined };

/**
 * Links the identity to the account (link): 404 user_not_found, 409 identity_taken (another
 * account has it), 409 identity_limit_reached. Linking one the account has already takes the
 * email and its verification as given, with no event. With a `linkTicket` (provider/callback's
 * identity_unlinked), the identity and its email are the ticket's: 422 invalid_ticket when it
 * cannot be used; it is spent in the link's transaction (a refused link leaves it usable).
 */
export async function linkIdentity(scope: WriteScope, deps: WriteDeps, request: LinkRequest): Promise<void> {
  if (!isUuid(request.userId)) throw userNotFound();
  const { site } = scope;
  scope.report?.({ userId: request.userId });
  try {
    await inWrite(
      scope,
      deps,
      'identity_link',
      ({ added, key }: { added: boolean; key: IdentityKey }) => ({
        userId: request.userId,
        status: 200,
        outcome: 'identity linked',
        ...(added && {
          moreEvents: [identityEvent('user.identity_linked', request.userId, key, request.via ?? undefined)],
        }),
      }),
      async (tx) => {
        const account = await lockAccount(tx, site, request.userId);
        if (account === undefined) throw userNotFound();
        const given =
          request.linkTicket === undefined
            ? { ...request, emailVerified: request.emailVerified ?? false }
            : await takeLinkTicket(tx, site, request.linkTicket);
        const key = { provider: given.provider, subject: given.subject };
        const [held] = await tx
          .select({ id: userIdentities.id, userId: userIdentities.userId })
          .from(userIdentities)
          .where(identityIs(site, key))
          .for('update');
        if (held !== undefined) {
          if (held.userId !== account.id) throw identityTaken();
          await tx
            .update(userIdentities)
            .set({ email: given.email ?? null, emailVerified: given.emailVerified })
            .where(eq(userIdentities.id, held.id));
          return { added: false, key };
        }
        const [has] = await tx.select({ n: count() }).from(userIdentities).where(eq(userIdentities.userId, account.id));
        if (has!.n >= MAX_IDENTITIES) throw identityLimitReached();
        await tx.insert(userIdentities).values({
          id: uuidv7(),
          site,
          userId: account.id,
          provider: key.provider,
          subject: key.subject,
          email: given.email ?? null,
          emailVerified: given.emailVerified,
        });
        return { added: true, key };
      },
    );
  } catch (error) {
    // Another account's link of it committed between the look and the insert: the index refused ours.
    if (sqlState(error) === '23505') throw identityTaken();
    throw error;
  }
}

/**
 * Unlinks the identity from the account (unlink): 404 user_not_found or identity_not_found, 409
 * last_sign_in_method when the account would have no password, no passkey and no identity left.
 */
export async function unlinkIdentity(
  scope: WriteScope,
  deps: WriteDeps,
  request: IdentityKey & { userId: string },
): Promise<void> {
  if (!isUuid(request.userId)) throw userNotFound();
  const { site } = scope;
  const key = { provider: request.provider, subject: request.subject };
  scope.report?.({ userId: request.userId });
  await inWrite(
    scope,
    deps,
    'identity_unlink',
    {
      userId: request.userId,
      status: 200,
      outcome: 'identity unlinked',
      moreEvents: [identityEvent('user.identity_unlinked', request.userId, key)],
    },
    async (tx) => {
      // The account's row lock orders unlinks (and links) of one account: two unlinks of its last
      // two identities at once cannot both see the other one left.
      const account = await lockAccount(tx, site, request.userId);
      if (account === undefined) throw userNotFound();
      const [gone] = await tx
        .delete(userIdentities)
        .where(and(identityIs(site, key), eq(userIdentities.userId, account.id)))
        .returning({ id: userIdentities.id });
      if (gone === undefined) throw identityNotFound();
      // Thrown: the transaction rolls back, the identity stays.
      await assertSignInMethodLeft(tx, account, 'identity');
      return true;
    },
  );
}

/**
 * The account in reach that has the identity, for a login (identity/verify): its id; 422
 * invalid_credentials for every miss, 403 account_disabled, 403 second_factor_required with the
 * ticket of the second step (as verify: factors/login-ticket.ts). Audited as verify is: 200, or
 * the 403 of the second step.
 */
export async function verifyIdentity(scope: WriteScope, deps: WriteDeps, key: IdentityKey): Promise<string> {
  const { site } = scope;
  const [found] = await deps.db
    .select({ id: users.id, disabled: users.disabled })
    .from(userIdentities)
    .innerJoin(users, eq(users.id, userIdentities.userId))
    .where(and(identityIs(site, key), inReachOf(site)))
    .limit(1);
  if (found === undefined) throw invalidCredentials('identity');
  scope.report?.({ userId: found.id });
  if (found.disabled) throw accountDisabled();
  // The account's organization wants it signed in through its IdP (sso/enforcement.ts): an
  // identity of that organization's connections passes, any other is refused.
  const refused = await refusalOf(
    deps,
    deps.db,
    site,
    { userId: found.id },
    { kind: 'identity', provider: key.provider },
  );
  if (refused !== undefined) throw refused;
  const verified = await inWrite(
    scope,
    deps,
    'identity_verify',
    (w: { factors: string[] }) =>
      w.factors.length === 0
        ? { userId: found.id, status: 200, outcome: 'identity verified' }
        : { userId: found.id, status: 403, outcome: 'second_factor_required' },
    async (tx) => {
      // Disabled, or the identity unlinked, since it was read: refused as then.
      const [now] = await tx
        .select({ disabled: users.disabled })
        .from(users)
        .where(and(eq(users.id, found.id), inReachOf(site)))
        .for('update');
      if (now === undefined) throw invalidCredentials('identity');
      if (now.disabled) throw accountDisabled();
      const [still] = await tx
        .select({ id: userIdentities.id })
        .from(userIdentities)
        .where(and(identityIs(site, key), eq(userIdentities.userId, found.id)));
      if (still === undefined) throw invalidCredentials('identity');
      const factors = await enabledFactorTypes(tx, found.id);
      return { factors, generation: factors.length === 0 ? undefined : await generationOf(tx, found.id) };
    },
  );
  if (verified!.factors.length > 0) {
    const ticket = await makeLoginTicket(deps, site, found.id, verified!.generation!, 'fed', key.provider);
    throw secondFactorRequired('identity', ticket, verified!.factors);
  }
  return found.id;
}
