// The SAML sign-in (issue 61, points 3 and 4): the HTTP-Redirect AuthnRequest (signed when the IdP
// wants it) with a RelayState we keep (single use, 10 minutes), and the check of the response the
// site's backend forwards. Every XML signature is @node-saml/node-saml's (over xml-crypto): it
// verifies the Response's or the Assertion's signature with the connection's certificates only,
// and hands back only what the signature covers, which is all we then read (no signature
// wrapping). Beside it: InResponseTo bound to this RelayState's request (its cache below holds that
// one id), Destination and Recipient the redirectUri, Audience our entity id, Issuer the IdP's,
// 3 minutes of skew, each assertion ID once across every replica (a primary key), no comment and
// no DOCTYPE in the document. Any failed check is one 422 sso_response_invalid naming it.
import { createHash, randomBytes } from 'node:crypto';
import { type CacheProvider, SAML, type SamlConfig, ValidateInResponseTo } from '@node-saml/node-saml';
import { DOMParser } from '@xmldom/xmldom';
import { and, eq, gt, sql } from 'drizzle-orm';
import xpath from 'xpath';
import type { Db } from '../db/client.ts';
import { ssoAssertions, ssoRequests } from '../db/schema.ts';
import { ApiError, sqlState } from '../errors.ts';
import type { WriteDeps } from '../kernel/unit-of-work.ts';
import {
  type ConnectionRow,
  connectionOf,
  METADATA_REFRESH_MS,
  refreshMetadata,
  spEntityIdOf,
  spKeyOf,
} from './connections.ts';

export const REQUEST_LIFETIME_MS = 10 * 60 * 1000;
export const CLOCK_SKEW_MS = 3 * 60 * 1000;
/** A response whose signature no kept certificate verifies reads the metadata again at most this often. */
const REFRESH_ON_UNKNOWN_CERT_MS = 60 * 1000;
const MAX_RESPONSE_BYTES = 300_000;

// biome-ignore lint/suspicious/noControlCharactersInRegex: refusing them is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

export const responseInvalid = (detail: string) => new ApiError('sso_response_invalid', detail);
const sha256 = (text: string) => createHash('sha256').update(text).digest('base64url');

/** node-saml for one connection and one sign-in: our SP's options, the IdP's certificates. */
function samlFor(
  row: ConnectionRow,
  publicUrl: string,
  spKey: string,
  options: { redirectUri: string; cache: CacheProvider; inResponseTo: ValidateInResponseTo; requestId?: string },
): SAML {
  const entityId = spEntityIdOf(publicUrl, row.id);
  const config: SamlConfig = {
    idpCert: row.samlIdpCerts ?? [],
    issuer: entityId,
    audience: entityId,
    callbackUrl: options.redirectUri,
    entryPoint: row.samlSsoUrl!,
    wantAssertionsSigned: false,
    wantAuthnResponseSigned: false,
    acceptedClockSkewMs: CLOCK_SKEW_MS,
    validateInResponseTo: options.inResponseTo,
    requestIdExpirationPeriodMs: REQUEST_LIFETIME_MS,
    cacheProvider: options.cache,
    decryptionPvk: spKey,
    identifierFormat: null,
    disableRequestedAuthnContext: true,
    ...(row.samlWantsSignedRequests && { privateKey: spKey, signatureAlgorithm: 'sha256' as const }),
    ...(options.requestId !== undefined && { generateUniqueId: () => options.requestId! }),
  };
  return new SAML(config);
}

/** A cache that knows one request: the one this RelayState was made for (or none, IdP-initiated). */
function cacheOf(requestId: string | undefined): CacheProvider {
  const now = new Date().toISOString();
  return {
    saveAsync: async (_key, value) => ({ value, createdAt: Date.parse(now) }),
    getAsync: async (key) => (requestId !== undefined && key === requestId ? now : null),
    removeAsync: async () => null,
  };
}

/** The IdP's metadata read again when it is older than a day; a failure keeps the row as it was. */
async function fresh(db: Db, row: ConnectionRow, log?: (error: unknown) => void): Promise<ConnectionRow> {
  if (row.samlMetadataUrl === null) return row;
  if (Date.now() - (row.samlMetadataRefreshedAt?.getTime() ?? 0) < METADATA_REFRESH_MS) return row;
  try {
    return await refreshMetadata(db, row);
  } catch (error) {
    log?.(error);
    return row;
  }
}

export interface SamlStart {
  authorizationUrl: string;
}

/** sso/start for a SAML connection: the IdP's URL with the AuthnRequest and our RelayState. */
export async function startSaml(
  deps: WriteDeps,
  publicUrl: string,
  row: ConnectionRow,
  redirectUri: string,
): Promise<SamlStart> {
  const current = await fresh(deps.db, row);
  const requestId = `_${randomBytes(20).toString('hex')}`;
  const relayState = randomBytes(32).toString('base64url');
  const spKey = await spKeyOf(deps.db, deps.factorKeys, current);
  const saml = samlFor(current, publicUrl, spKey, {
    redirectUri,
    cache: cacheOf(requestId),
    inResponseTo: ValidateInResponseTo.always,
    requestId,
  });
  const authorizationUrl = await saml.getAuthorizeUrlAsync(relayState, undefined, {});
  // Expired requests of every site go as new ones come: the table stays bounded by 10 minutes of starts.
  await deps.db.delete(ssoRequests).where(sql`${ssoRequests.expiresAt} < now() - interval '1 minute'`);
  await deps.db.insert(ssoRequests).values({
    stateHash: sha256(relayState),
    site: current.site,
    connectionId: current.id,
    requestId,
    redirectUri,
    expiresAt: new Date(Date.now() + REQUEST_LIFETIME_MS),
  });
  return { authorizationUrl };
}

/** What a checked response says: who, and the connection it came through. */
export interface SamlAssertion {
  connection: ConnectionRow;
  nameId: string;
  email: string | undefined;
  name: string | undefined;
}

const parse = (xml: string): Document => {
  const problems: string[] = [];
  const doc = new DOMParser({
    onError: (level, message) => {
      if (level !== 'warning') problems.push(message);
    },
  }).parseFromString(xml, 'text/xml') as unknown as Document;
  if (problems.length > 0) throw responseInvalid('The response is not well-formed XML.');
  return doc;
};

/** Refuses what a signature check must never be asked to read around: DOCTYPEs, comments. */
function assertPlain(xml: string): Document {
  if (/<!DOCTYPE/i.test(xml)) throw responseInvalid('The response has a DOCTYPE, which is refused.');
  const doc = parse(xml);
  if ((xpath.select('//comment()', doc) as Node[]).length > 0)
    throw responseInvalid('The response has an XML comment (one in a NameID changes what it says): refused.');
  return doc;
}

const attr = (doc: Node, path: string): string | undefined => {
  const found = xpath.select(path, doc) as Attr[];
  return found[0]?.value;
};

/** The first value of one of the assertion's attributes, by any of its usual names. */
function attributeOf(attributes: Record<string, unknown> | undefined, names: string[]): string | undefined {
  for (const name of names) {
    const value = attributes?.[name];
    const first = Array.isArray(value) ? value[0] : value;
    if (typeof first === 'string' && first.length > 0) return first;
  }
  return undefined;
}

/**
 * The checked response: the RelayState taken (single use), the connection's certificates tried
 * (and its metadata read again once when none verifies), then every check of the file's header.
 */
export async function checkSamlResponse(
  deps: WriteDeps,
  publicUrl: string,
  site: string,
  input: { samlResponse: string; relayState?: string | undefined; connectionId?: string | undefined },
  log?: (error: unknown) => void,
): Promise<SamlAssertion> {
  if (input.samlResponse.length > MAX_RESPONSE_BYTES) throw responseInvalid('The response is too large.');
  let requestId: string | undefined;
  let redirectUris: string[];
  let row: ConnectionRow;
  const [taken] =
    input.relayState === undefined
      ? []
      : await deps.db
          .delete(ssoRequests)
          .where(
            and(
              eq(ssoRequests.stateHash, sha256(input.relayState)),
              eq(ssoRequests.site, site),
              gt(ssoRequests.expiresAt, sql`now()`),
            ),
          )
          .returning();
  if (taken !== undefined) {
    requestId = taken.requestId;
    redirectUris = [taken.redirectUri];
    row = await connectionOf(deps.db, site, taken.connectionId).catch(() => {
      throw responseInvalid('The connection of this sign-in is gone.');
    });
  } else {
    // Not a RelayState of ours: an IdP-initiated response, served only where the connection allows it.
    if (input.connectionId === undefined)
      throw responseInvalid('The relayState is unknown, used or expired: start the sign-in again (sso/start).');
    row = await connectionOf(deps.db, site, input.connectionId).catch(() => {
      throw responseInvalid('The relayState is not ours, and no connection of this site has this connectionId.');
    });
    if (!row.allowIdpInitiated)
      throw responseInvalid('The connection does not accept IdP-initiated responses (allowIdpInitiated is off).');
    redirectUris = row.redirectUris;
  }
  if (row.kind !== 'saml') throw responseInvalid('The connection is not a SAML connection.');

  const xml = Buffer.from(input.samlResponse, 'base64').toString('utf8');
  const doc = assertPlain(xml);
  const destination = attr(doc, "/*[local-name()='Response']/@Destination");
  if (destination === undefined || !redirectUris.includes(destination))
    throw responseInvalid(
      `The response's Destination is not the redirectUri of this sign-in (got ${JSON.stringify(destination ?? null)}).`,
    );

  const spKey = await spKeyOf(deps.db, deps.factorKeys, row);
  const validate = (current: ConnectionRow) =>
    samlFor(current, publicUrl, spKey, {
      redirectUri: redirectUris[0]!,
      cache: cacheOf(requestId),
      inResponseTo: requestId === undefined ? ValidateInResponseTo.ifPresent : ValidateInResponseTo.always,
    }).validatePostResponseAsync({ SAMLResponse: input.samlResponse });
  let result: Awaited<ReturnType<SAML['validatePostResponseAsync']>>;
  try {
    result = await validate(row);
  } catch (error) {
    const message = (error as Error).message ?? String(error);
    // Signed by a certificate we do not know yet: the IdP may have rolled over; read its metadata again, once.
    const recent = Date.now() - (row.samlMetadataRefreshedAt?.getTime() ?? 0) < REFRESH_ON_UNKNOWN_CERT_MS;
    if (/signature/i.test(message) && row.samlMetadataUrl !== null && !recent) {
      try {
        row = await refreshMetadata(deps.db, row);
      } catch (failure) {
        log?.(failure);
        throw refused(message);
      }
      try {
        result = await validate(row);
      } catch (again) {
        throw refused((again as Error).message ?? String(again));
      }
    } else throw refused(message);
  }
  const profile = result.profile;
  if (profile === null || result.loggedOut) throw responseInvalid('The response holds no assertion.');
  if (profile.issuer !== row.samlIdpEntityId)
    throw responseInvalid(
      `The assertion's Issuer is not the IdP's entity id (got ${JSON.stringify(profile.issuer ?? null)}).`,
    );
  // What follows is read from the signed assertion only.
  const assertion = parse(profile.getAssertionXml!());
  const recipient = attr(assertion, "//*[local-name()='SubjectConfirmationData']/@Recipient");
  if (recipient !== undefined && !redirectUris.includes(recipient))
    throw responseInvalid(
      `The assertion's Recipient is not the redirectUri of this sign-in (got ${JSON.stringify(recipient)}).`,
    );
  const assertionId = attr(assertion, "/*[local-name()='Assertion']/@ID");
  if (assertionId === undefined || assertionId.length > 256) throw responseInvalid('The assertion has no ID.');
  const nameId = profile.nameID;
  if (typeof nameId !== 'string' || nameId.length === 0 || nameId.length > 255 || CONTROL.test(nameId))
    throw responseInvalid('The assertion has no NameID of 1 to 255 printable characters.');
  const notOnOrAfter =
    attr(assertion, "//*[local-name()='Conditions']/@NotOnOrAfter") ??
    attr(assertion, "//*[local-name()='SubjectConfirmationData']/@NotOnOrAfter");
  const until = Math.max(Date.parse(notOnOrAfter ?? '') || 0, Date.now()) + CLOCK_SKEW_MS;
  try {
    await deps.db.insert(ssoAssertions).values({ connectionId: row.id, assertionId, expiresAt: new Date(until) });
  } catch (error) {
    if (sqlState(error) === '23505') throw responseInvalid('This assertion was used already (its ID is taken).');
    throw error;
  }
  // Assertions past their end of validity go as new ones come.
  await deps.db.delete(ssoAssertions).where(sql`${ssoAssertions.expiresAt} < now()`);
  const attributes = profile.attributes as Record<string, unknown> | undefined;
  const email =
    attributeOf(attributes, [
      'email',
      'mail',
      'urn:oid:0.9.2342.19200300.100.1.3',
      'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/emailaddress',
    ]) ?? (/^[^@\s]+@[^@\s]+$/.test(nameId) ? nameId : undefined);
  const name =
    attributeOf(attributes, ['name', 'displayName', 'http://schemas.xmlsoap.org/ws/2005/05/identity/claims/name']) ??
    undefined;
  return { connection: row, nameId, email, name };
}

/** node-saml's refusal, said as the check that failed (never the document). */
function refused(message: string): ApiError {
  const said = message.length > 200 ? `${message.slice(0, 199)}…` : message;
  return responseInvalid(`The response failed a check: ${said}.`);
}
