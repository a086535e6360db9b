// Passkeys (WebAuthn; issue 29, point 3) with @simplewebauthn/server, which checks what is
// WebAuthn's own (CBOR, COSE keys, signatures, origins, RP id hashes, counters); here is what is
// ours: a site's relying party (cli site set --rp-id --origins), challenges that are good once
// (a row per challenge, as SHA-256, deleted by the first answer that names it, right or wrong),
// bound to the site, the purpose and the account they were made for, and the credentials as
// enabled factors of user_factors (nothing secret: a public key and a counter).
import { createHash, randomUUID } from 'node:crypto';
import type {
  AuthenticationResponseJSON,
  generateRegistrationOptions,
  RegistrationResponseJSON,
} from '@simplewebauthn/server';
import { and, count, eq, gt, isNotNull, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { passkeyChallenges, recoveryCodes, siteSettings, userFactors, users } from '../db/schema.ts';
import { ApiError, accountDisabled, invalidCredentials, userNotFound } from '../errors.ts';
import type { DeploymentKeys } from '../kernel/deployment-keys.ts';
import { isUuid, uuidv7 } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import { refusalOf } from '../kernel/sign-in-gate.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { newRecoveryCodes, recoveryCodeHash } from './recovery-codes.ts';

/**
 * @simplewebauthn/server, loaded at the first passkey operation: with its certificate parsers
 * (@peculiar/x509) it is about 25 ms of CPU at every server and CLI start otherwise, for a feature
 * many deployments never use. Loaded once; relyingPartyOf, which every passkey operation calls
 * before its transaction, waits for it, so that the load never happens with a transaction open.
 */
let library: Promise<typeof import('@simplewebauthn/server')> | undefined;
const webauthn = () => {
  // A load that failed is tried again at the next operation rather than kept.
  library ??= import('@simplewebauthn/server').catch((error: unknown) => {
    library = undefined;
    throw error;
  });
  return library;
};

/** Five minutes, as the login's ticket: time to touch a key, never a session. */
export const CHALLENGE_MS = 5 * 60_000;
/** A site's challenges not yet answered, at most: past it the oldest go (one site never fills the table). */
export const CHALLENGES_PER_SITE = 10_000;
/** EdDSA, ES256, RS256: what authenticators make (the library's default adds ML-DSA, still experimental in Node). */
const ALGORITHMS = [-8, -7, -257];

export const passkeysNotConfigured = (site: string) =>
  new ApiError(
    'passkeys_not_configured',
    `Site ${site} has no WebAuthn relying party: run cli site set --site ${site} --rp-id ID --origins URL[,URL…].`,
  );
/** A passkey alone is a login only with the authenticator's user verification (issue 41, F5). */
export const userVerificationRequired = () =>
  new ApiError(
    'user_verification_required',
    'A passkey alone logs in only with user verification (a PIN or biometric on the authenticator); ask the browser for options with userVerification "required", or use the passkey as a second factor after the password.',
  );

export interface RelyingParty {
  id: string;
  name: string;
  origins: string[];
}

/** The site's relying party, or 409 saying what its operator must set. */
export async function relyingPartyOf(db: Db, site: string): Promise<RelyingParty> {
  const [row] = await db
    .select({ id: siteSettings.rpId, name: siteSettings.rpName, origins: siteSettings.rpOrigins })
    .from(siteSettings)
    .where(eq(siteSettings.site, site));
  if (row?.id == null || row.origins == null || row.origins.length === 0) throw passkeysNotConfigured(site);
  await webauthn();
  return { id: row.id, name: row.name ?? site, origins: row.origins };
}

const challengeHash = (challenge: string) => createHash('sha256').update(challenge).digest('base64url');

/** The account's id as WebAuthn's user handle: its 16 bytes. */
const userHandleOf = (userId: string) => new Uint8Array(Buffer.from(userId.replace(/-/g, ''), 'hex'));
const userIdOfHandle = (handle: string): string | undefined => {
  const hex = Buffer.from(handle, 'base64url').toString('hex');
  return hex.length === 32
    ? `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`
    : undefined;
};

/**
 * Keeps a challenge for `purpose`, bound to the site and (when given) the account. One statement,
 * one round trip: it also drops the site's expired challenges and, past CHALLENGES_PER_SITE, its
 * oldest (the statement's deletes see the table without the new row, so the site keeps at most the bound).
 */
async function keepChallenge(db: Db, site: string, purpose: 'register' | 'login', challenge: string, userId?: string) {
  const t = passkeyChallenges;
  await db.execute(sql`with expired as (
      delete from ${t} where ${t.site} = ${site} and ${t.expiresAt} < now()
    ), beyond as (
      delete from ${t} where ${t.challengeHash} in (select ${t.challengeHash} from ${t} where ${t.site} = ${site}
        order by ${t.expiresAt} desc offset ${CHALLENGES_PER_SITE - 1})
    )
    insert into ${t} (challenge_hash, site, purpose, user_id, expires_at)
    values (${challengeHash(challenge)}, ${site}, ${purpose}, ${userId ?? null},
      now() + make_interval(secs => ${CHALLENGE_MS / 1000}))`);
}

/** The challenge the answer's clientDataJSON names, or undefined when it names none. */
function challengeOf(clientDataJSON: unknown): string | undefined {
  if (typeof clientDataJSON !== 'string') return undefined;
  try {
    const data = JSON.parse(Buffer.from(clientDataJSON, 'base64url').toString('utf8')) as { challenge?: unknown };
    return typeof data.challenge === 'string' && data.challenge.length > 0 ? data.challenge : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Takes the challenge (deletes it: good once, whatever follows) when it is the site's, for
 * `purpose` and not expired; answers the account it was bound to (null: none).
 */
async function takeChallenge(
  tx: Db,
  site: string,
  purpose: 'register' | 'login',
  challenge: string,
): Promise<{ userId: string | null } | undefined> {
  const [taken] = await tx
    .delete(passkeyChallenges)
    .where(
      and(
        eq(passkeyChallenges.challengeHash, challengeHash(challenge)),
        eq(passkeyChallenges.site, site),
        eq(passkeyChallenges.purpose, purpose),
        gt(passkeyChallenges.expiresAt, sql`now()`),
      ),
    )
    .returning({ userId: passkeyChallenges.userId });
  return taken;
}

async function passkeysOf(db: Db, userId: string) {
  return db
    .select({ credentialId: userFactors.credentialId, transports: userFactors.transports })
    .from(userFactors)
    .where(and(eq(userFactors.userId, userId), eq(userFactors.type, 'passkey'), isNotNull(userFactors.enabledAt)));
}

type Transport = NonNullable<
  Parameters<typeof generateRegistrationOptions>[0]['excludeCredentials']
>[number]['transports'];
const descriptors = (rows: { credentialId: string | null; transports: string[] | null }[]) =>
  rows.map((row) => ({
    id: row.credentialId!,
    ...(row.transports === null ? {} : { transports: row.transports as Transport }),
  }));

/** Registration's options for the account: a challenge kept for it, its passkeys excluded. */
export async function registrationOptions(db: Db, site: string, userId: string) {
  const rp = await relyingPartyOf(db, site);
  if (!isUuid(userId)) throw userNotFound();
  const [account] = await db
    .select({ id: users.id, email: users.email })
    .from(users)
    .where(and(eq(users.id, userId), inReachOf(site)));
  if (account === undefined) throw userNotFound();
  const options = await (await webauthn()).generateRegistrationOptions({
    rpName: rp.name,
    rpID: rp.id,
    userID: userHandleOf(account.id),
    userName: account.email,
    userDisplayName: account.email,
    attestationType: 'none',
    excludeCredentials: descriptors(await passkeysOf(db, account.id)),
    authenticatorSelection: { residentKey: 'preferred', userVerification: 'preferred' },
    supportedAlgorithmIDs: ALGORITHMS,
    timeout: CHALLENGE_MS,
  });
  await keepChallenge(db, site, 'register', options.challenge, account.id);
  return options;
}

/**
 * Registers the passkey of the browser's answer as an enabled factor (its challenge taken
 * first: a wrong answer spends it too), with recovery codes when the account has none yet.
 */
export async function addPasskey(
  scope: WriteScope,
  deps: WriteDeps,
  request: { userId: string; response: RegistrationResponseJSON; label?: string | undefined },
): Promise<{ factorId: string; recoveryCodes?: string[] }> {
  const rp = await relyingPartyOf(deps.db, scope.site);
  if (!isUuid(request.userId)) throw userNotFound();
  const challenge = challengeOf(request.response.response?.clientDataJSON);
  const factorId = uuidv7();
  let refusal: ApiError = invalidCredentials('passkey');
  const added = await inWrite(
    scope,
    deps,
    'factor_add',
    {
      userId: request.userId,
      status: 201,
      outcome: 'factor enabled',
      factor: { factorId, type: 'passkey' },
    },
    async (tx) => {
      const [account] = await tx
        .select({ id: users.id })
        .from(users)
        .where(and(eq(users.id, request.userId), inReachOf(scope.site)))
        .for('update');
      if (account === undefined) {
        refusal = userNotFound();
        return undefined;
      }
      if (challenge === undefined) return undefined;
      const taken = await takeChallenge(tx, scope.site, 'register', challenge);
      if (taken === undefined || taken.userId !== account.id) return undefined;
      const verified = await (await webauthn())
        .verifyRegistrationResponse({
          response: request.response,
          expectedChallenge: challenge,
          expectedOrigin: rp.origins,
          expectedRPID: rp.id,
          requireUserVerification: false,
          supportedAlgorithmIDs: ALGORITHMS,
        })
        .catch(() => undefined);
      if (!verified?.verified) return undefined;
      const { credential } = verified.registrationInfo;
      // Unique within the site only (issue 57, G8): another site's credential of the same id is
      // none of this one's business, and a refusal here would tell its accounts from the decoys.
      const [taken2] = await tx
        .select({ id: userFactors.id })
        .from(userFactors)
        .where(and(eq(userFactors.site, scope.site), eq(userFactors.credentialId, credential.id)));
      if (taken2 !== undefined) return undefined;
      await tx.insert(userFactors).values({
        id: factorId,
        userId: account.id,
        site: scope.site,
        type: 'passkey',
        label: request.label ?? null,
        enabledAt: sql`now()`,
        credentialId: credential.id,
        publicKey: Buffer.from(credential.publicKey).toString('base64url'),
        signCount: credential.counter,
        transports: credential.transports ?? null,
      });
      // Codes come with the first factor enabled: when the account has none yet (as confirm).
      const [codesBefore] = await tx
        .select({ n: count() })
        .from(recoveryCodes)
        .where(eq(recoveryCodes.userId, account.id));
      if (codesBefore!.n > 0) return { factorId };
      const codes = newRecoveryCodes();
      await tx
        .insert(recoveryCodes)
        .values(codes.map((code) => ({ userId: account.id, codeHash: recoveryCodeHash(code) })));
      return { factorId, recoveryCodes: codes };
    },
  );
  if (added === undefined) throw refusal;
  return added;
}

/** A decoy credential id for an email with no passkey of the site: the same each time, from a key of ours. */
/** The transports real registrations report (the browser's getTransports(), sorted), and none reported. */
const DECOY_TRANSPORTS: (Transport | undefined)[] = [
  ['hybrid', 'internal'],
  ['hybrid', 'internal'],
  ['internal'],
  ['hybrid', 'internal', 'usb'],
  ['usb'],
  ['nfc', 'usb'],
  ['hybrid', 'usb'],
  undefined,
];
/** Credential id lengths in bytes of common authenticators (16: Google, 20: Apple, 32: Windows Hello, 64: security keys). */
const DECOY_ID_BYTES = [16, 16, 20, 20, 32, 32, 48, 64];

/**
 * The credentials an email with no passkeys is answered with (issue 41, F6): derived from an
 * HMAC of the site and email under the deployment's key, so that the same email gets the same
 * ones each time and no one without the key can tell them from real ones: one to three of them
 * (most accounts have one), each of a length and with transports real authenticators have.
 */
export function decoyCredentials(keys: DeploymentKeys, site: string, email: string) {
  const of = (what: string) => keys.bytes('passkey_decoy', `${site}\n${email.toLowerCase()}\n${what}`);
  const shape = of('shape');
  const count = shape[0]! < 192 ? 1 : shape[0]! < 243 ? 2 : 3;
  return Array.from({ length: count }, (_, i) => {
    const length = DECOY_ID_BYTES[shape[1 + 2 * i]! % DECOY_ID_BYTES.length]!;
    const transports = DECOY_TRANSPORTS[shape[2 + 2 * i]! % DECOY_TRANSPORTS.length];
    const id = Buffer.concat([of(`id ${i} 0`), of(`id ${i} 1`)]).subarray(0, length);
    return { id: id.toString('base64url'), ...(transports === undefined ? {} : { transports }) };
  });
}

/**
 * A login's options: for an email (its passkeys, or a decoy when there is no such account or it
 * has none, so that the answer tells nothing), an account id (404 when none), or neither (a
 * discoverable login). The challenge is bound to the account asked for; for an unknown email, to
 * a random id that names no account.
 */
export async function loginOptions(
  db: Db,
  site: string,
  request: { email?: string | undefined; userId?: string },
  keys: DeploymentKeys,
) {
  const rp = await relyingPartyOf(db, site);
  let bound: string | undefined;
  let allow: { id: string; transports?: Transport }[] = [];
  if (request.userId !== undefined || request.email !== undefined) {
    const match =
      request.userId !== undefined
        ? isUuid(request.userId)
          ? eq(users.id, request.userId)
          : sql`false`
        : sql`lower(${users.email}) = lower(${request.email})`;
    const [account] = await db
      .select({ id: users.id })
      .from(users)
      .where(and(match, inReachOf(site)));
    if (account === undefined && request.userId !== undefined) throw userNotFound();
    bound = account?.id ?? randomUUID();
    // The same work for an email with no account as for one with: its passkeys looked up (none
    // for the random id), and the decoy worked out whether it is used or not.
    allow = descriptors(await passkeysOf(db, bound));
    const decoy = request.email === undefined ? [] : decoyCredentials(keys, site, request.email);
    if (allow.length === 0) allow = decoy;
  }
  const options = await (await webauthn()).generateAuthenticationOptions({
    rpID: rp.id,
    allowCredentials: allow,
    userVerification: 'preferred',
    timeout: CHALLENGE_MS,
  });
  await keepChallenge(db, site, 'login', options.challenge, bound);
  return options;
}

/**
 * Checks an assertion in the caller's transaction: its challenge (taken), the credential (an
 * enabled passkey of an account in reach of the site; of `forUser` when given, and of the account
 * the challenge was made for), the signature, origin, RP id and counter; moves the counter and
 * the factor's last use on. Answers the account and whether it is disabled, or undefined when
 * the assertion is not accepted. With `requireUserVerification` (a passkey alone), a right
 * assertion without the UV flag answers `userVerified: false` and moves nothing on.
 */
export async function checkAssertion(
  tx: Db,
  site: string,
  rp: RelyingParty,
  response: AuthenticationResponseJSON,
  forUser?: string,
  /** Told the account once the credential names one (for the audit row of a refusal too). */
  onAccount?: (userId: string) => void,
  requireUserVerification = false,
): Promise<{ userId: string; disabled: boolean; userVerified: boolean } | undefined> {
  const challenge = challengeOf(response.response?.clientDataJSON);
  if (challenge === undefined || typeof response.id !== 'string') return undefined;
  const taken = await takeChallenge(tx, site, 'login', challenge);
  if (taken === undefined) return undefined;
  const [factor] = await tx
    .select({
      id: userFactors.id,
      userId: userFactors.userId,
      publicKey: userFactors.publicKey,
      signCount: userFactors.signCount,
      disabled: users.disabled,
    })
    .from(userFactors)
    .innerJoin(users, eq(users.id, userFactors.userId))
    .where(
      and(
        eq(userFactors.site, site),
        eq(userFactors.credentialId, response.id),
        eq(userFactors.type, 'passkey'),
        isNotNull(userFactors.enabledAt),
        inReachOf(site),
      ),
    )
    .for('update', { of: userFactors });
  if (factor === undefined) return undefined;
  onAccount?.(factor.userId);
  if (taken.userId !== null && taken.userId !== factor.userId) return undefined;
  if (forUser !== undefined && forUser !== factor.userId) return undefined;
  const handle = response.response.userHandle;
  if (handle != null && userIdOfHandle(handle) !== factor.userId) return undefined;
  const verified = await (await webauthn())
    .verifyAuthenticationResponse({
      response,
      expectedChallenge: challenge,
      expectedOrigin: rp.origins,
      expectedRPID: rp.id,
      credential: {
        id: response.id,
        publicKey: new Uint8Array(Buffer.from(factor.publicKey!, 'base64url')),
        counter: factor.signCount ?? 0,
      },
      requireUserVerification: false,
    })
    .catch(() => undefined);
  if (!verified?.verified) return undefined;
  const { userVerified } = verified.authenticationInfo;
  if (requireUserVerification && !userVerified)
    return { userId: factor.userId, disabled: factor.disabled, userVerified };
  await tx
    .update(userFactors)
    .set({ signCount: verified.authenticationInfo.newCounter, lastUsedAt: sql`now()` })
    .where(eq(userFactors.id, factor.id));
  return { userId: factor.userId, disabled: factor.disabled, userVerified };
}

/**
 * The login with a passkey alone: the account's id, 422 invalid_credentials, 422
 * user_verification_required (a right passkey whose authenticator did not verify its user: a
 * security key without a PIN is possession only, one factor), 403 account_disabled.
 */
export async function verifyPasskey(
  scope: WriteScope,
  deps: WriteDeps,
  request: { response: AuthenticationResponseJSON },
): Promise<string> {
  const rp = await relyingPartyOf(deps.db, scope.site);
  let refusal: ApiError = invalidCredentials('passkey');
  const verified = await inWrite(
    scope,
    deps,
    'passkey_verify',
    (userId: string) => ({ userId, status: 200, outcome: 'passkey verified' }),
    async (tx) => {
      const checked = await checkAssertion(
        tx,
        scope.site,
        rp,
        request.response,
        undefined,
        (userId) => scope.report?.({ userId }),
        true,
      );
      if (checked === undefined) return undefined;
      if (!checked.userVerified) {
        refusal = userVerificationRequired();
        return undefined;
      }
      if (checked.disabled) {
        refusal = accountDisabled();
        return undefined;
      }
      // The account's organization wants it signed in through its IdP (sso/enforcement.ts).
      const refused = await refusalOf(deps, tx, scope.site, { userId: checked.userId }, { kind: 'passkey' });
      if (refused !== undefined) {
        refusal = refused;
        return undefined;
      }
      return checked.userId;
    },
  );
  if (verified === undefined) throw refusal;
  return verified;
}
