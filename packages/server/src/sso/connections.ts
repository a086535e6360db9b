// An organization's enterprise sign-in connections (issue 61, point 2). A SAML connection keeps
// the IdP's entity id, single sign-on URL and signing certificates (several at once, for a
// rollover) from its metadata, refreshed from `metadataUrl` daily and when a response is signed
// by a certificate not yet known (saml.ts); and our service provider's key pair of its own (an
// RSA key and a self-signed certificate, certificates.ts), the private key sealed under
// FACTOR_ENCRYPTION_KEY bound to the connection's id, for signed AuthnRequests and encrypted
// assertions. An OIDC connection keeps its issuer, client id and sealed client secret.
import { createHash, X509Certificate } from 'node:crypto';
import { and, asc, count, eq } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { orgs, ssoConnections } from '../db/schema.ts';
import { ApiError } from '../errors.ts';
import { sealingRingFor } from '../kernel/deployment-keys.ts';
import { isUuid, uuidv7 } from '../kernel/ids.ts';
import type { EventEntry } from '../kernel/outbox.ts';
import { open, seal } from '../kernel/secret-box.ts';
import { inWrite, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { lockOrg } from '../orgs/members.ts';
import { holdRoles } from '../orgs/roles.ts';
import { orgNotFound } from '../orgs/rules.ts';
import { checkDiscovery, forgetDiscovery, type RelyingPartyProvider } from '../providers/oauth.ts';
import { selfSignedKeyPair } from './certificates.ts';
import { orgOfVerifiedDomain } from './domains.ts';
import { fetchIdpMetadata, type IdpMetadata, parseIdpMetadata } from './saml-metadata.ts';

export const MAX_CONNECTIONS_PER_ORG = 20;
/** How long the IdP's metadata is kept before it is read again from its URL. */
export const METADATA_REFRESH_MS = 24 * 60 * 60 * 1000;

export type ConnectionRow = typeof ssoConnections.$inferSelect;

export const connectionNotFound = () =>
  new ApiError('connection_not_found', 'No connection of this site serves this email, organization or id.');

const ssoRing = (db: Db, ring: WriteDeps['factorKeys']) => sealingRingFor(db, ring, 'sso_key');
const keyContext = (connectionId: string) => `sso_connection:${connectionId}`;
const secretContext = (connectionId: string) => `sso_connection_secret:${connectionId}`;

/** The identity's provider of a connection's sign-ins, and an OIDC connection's name at the relying party. */
export const identityProviderOf = (connectionId: string) => `sso:${connectionId}`;

/** The scopes an OIDC connection asks for: who, and the email that makes the account. */
const OIDC_SCOPES = ['openid', 'email', 'profile'];

/** An OIDC connection as providers/oauth.ts's relying party sees it. */
export function relyingPartyOf(row: {
  id: string;
  site: string;
  oidcIssuer: string | null;
  oidcClientId: string | null;
}): RelyingPartyProvider {
  return {
    site: row.site,
    name: identityProviderOf(row.id),
    kind: 'oidc',
    issuer: row.oidcIssuer!,
    endpoints: null,
    userinfoMap: null,
    clientId: row.oidcClientId!,
    scopes: OIDC_SCOPES,
  };
}

/** An OIDC connection's client secret, opened (for the callback's code exchange). */
export async function clientSecretOf(db: Db, ring: WriteDeps['factorKeys'], row: ConnectionRow): Promise<string> {
  return open(await ssoRing(db, ring), row.oidcClientSecretSealed!, secretContext(row.id));
}

/** The issuer's discovery document read now: 422 idp_metadata_invalid saying why it cannot be used. */
async function checkIssuer(site: string, connectionId: string, oidc: { issuer: string; clientId: string }) {
  try {
    await checkDiscovery(
      relyingPartyOf({ id: connectionId, site, oidcIssuer: oidc.issuer, oidcClientId: oidc.clientId }),
    );
  } catch (error) {
    const said = error instanceof ApiError ? error.message : 'it could not be read';
    throw new ApiError(
      'idp_metadata_invalid',
      `The issuer's discovery document (${oidc.issuer}/.well-known/openid-configuration) cannot be used: ${said}`,
    );
  }
}

/** A new RSA-2048 key and a self-signed certificate for ten years: our SP's for one connection. */
const newSpKeyPair = (connectionId: string) =>
  selfSignedKeyPair({
    commonName: `user-accounts SSO ${connectionId}`,
    serialNumber: createHash('sha256').update(connectionId).digest('hex').slice(0, 16),
    validForMs: 10 * 365 * 24 * 3600 * 1000,
  });

/** Our SP's private key of the connection, opened (for signing requests and decrypting assertions). */
export async function spKeyOf(db: Db, ring: WriteDeps['factorKeys'], row: ConnectionRow): Promise<string> {
  return open(await ssoRing(db, ring), row.spKeySealed!, keyContext(row.id));
}

export const spEntityIdOf = (publicUrl: string, connectionId: string) => `${publicUrl}/sso/${connectionId}/metadata`;

export type OrgConnection = ReturnType<typeof toConnection>;

/** The connection as the API shows it: never a secret, a private key or a whole certificate. */
export function toConnection(row: ConnectionRow, publicUrl: string) {
  return {
    connectionId: row.id,
    orgId: row.orgId,
    kind: row.kind as 'saml' | 'oidc',
    enforce: row.enforce,
    allowIdpInitiated: row.allowIdpInitiated,
    redirectUris: row.redirectUris,
    defaultRoles: row.defaultRoles,
    saml:
      row.kind !== 'saml'
        ? null
        : {
            idpEntityId: row.samlIdpEntityId!,
            ssoUrl: row.samlSsoUrl!,
            metadataUrl: row.samlMetadataUrl,
            wantsSignedRequests: row.samlWantsSignedRequests,
            certificates: (row.samlIdpCerts ?? []).map((pem) => {
              const cert = new X509Certificate(pem);
              return { fingerprint: cert.fingerprint256, notAfter: new Date(cert.validTo).toISOString() };
            }),
            metadataRefreshedAt: row.samlMetadataRefreshedAt!.toISOString(),
            spEntityId: spEntityIdOf(publicUrl, row.id),
            spMetadataUrl: spEntityIdOf(publicUrl, row.id),
          },
    oidc: row.kind !== 'oidc' ? null : { issuer: row.oidcIssuer!, clientId: row.oidcClientId! },
    createdAt: row.createdAt.toISOString(),
    updatedAt: row.updatedAt.toISOString(),
  };
}

const connectionEvent = (
  type: 'org.connection_created' | 'org.connection_updated' | 'org.connection_deleted',
  row: { id: string; orgId: string; kind: string },
): EventEntry => ({ type, userId: row.orgId, data: { orgId: row.orgId, connectionId: row.id, kind: row.kind } });

const badField = (pointer: string, message: string, code: 'not_allowed' | 'required' = 'not_allowed') =>
  new ApiError('invalid_request', 'The request body is not valid.', {
    errors: [{ pointer, code, message }],
  });

/** The IdP's metadata from the request's `saml` (exactly one of its URL and its document). */
async function metadataOf(saml: { metadataUrl?: string | undefined; metadataXml?: string | undefined } | undefined) {
  if (saml === undefined || (saml.metadataUrl === undefined) === (saml.metadataXml === undefined))
    throw badField('/saml', 'must have exactly one of metadataUrl and metadataXml');
  const metadata: IdpMetadata =
    saml.metadataUrl !== undefined ? await fetchIdpMetadata(saml.metadataUrl) : parseIdpMetadata(saml.metadataXml!);
  return { metadata, metadataUrl: saml.metadataUrl ?? null };
}

const samlColumns = (metadata: IdpMetadata, metadataUrl: string | null) => ({
  samlMetadataUrl: metadataUrl,
  samlIdpEntityId: metadata.entityId,
  samlSsoUrl: metadata.ssoUrl,
  samlWantsSignedRequests: metadata.wantsSignedRequests,
  samlIdpCerts: metadata.certs,
  samlMetadataRefreshedAt: new Date(),
});

export interface NewConnection {
  orgId: string;
  kind: 'saml' | 'oidc';
  saml?: { metadataUrl?: string | undefined; metadataXml?: string | undefined } | undefined;
  oidc?: { issuer: string; clientId: string; clientSecret: string } | undefined;
  redirectUris: string[];
  defaultRoles?: string[] | undefined;
  enforce?: boolean | undefined;
  allowIdpInitiated?: boolean | undefined;
}

/** The kind's own settings: `saml` with SAML only, `oidc` (required) and no IdP-initiated responses with OIDC. */
function checkKind(
  kind: 'saml' | 'oidc',
  input: { saml?: unknown; oidc?: unknown; allowIdpInitiated?: boolean | undefined },
): void {
  if (kind === 'saml' && input.oidc !== undefined) throw badField('/oidc', 'goes with kind oidc only');
  if (kind === 'oidc') {
    if (input.saml !== undefined) throw badField('/saml', 'goes with kind saml only');
    if (input.allowIdpInitiated === true)
      throw badField('/allowIdpInitiated', 'is for SAML connections (an OpenID Connect sign-in always starts here)');
  }
}

/** org/connection/create: a SAML connection (the IdP's metadata, our SP's key pair) or an OpenID Connect one. */
export async function createConnection(
  scope: WriteScope,
  deps: WriteDeps,
  input: NewConnection,
): Promise<ConnectionRow> {
  checkKind(input.kind, input);
  // The organization first: no IdP is asked anything for an organization that is not the site's.
  await assertOrg(deps.db, scope.site, input.orgId);
  const id = uuidv7();
  const ring = await ssoRing(deps.db, deps.factorKeys);
  let kindColumns: Partial<ConnectionRow>;
  if (input.kind === 'saml') {
    const { metadata, metadataUrl } = await metadataOf(input.saml);
    const { certPem, keyPem } = await newSpKeyPair(id);
    kindColumns = {
      ...samlColumns(metadata, metadataUrl),
      spCert: certPem,
      spKeySealed: seal(ring, keyPem, keyContext(id)),
    };
  } else {
    if (input.oidc === undefined) throw badField('/oidc', 'is required for kind oidc', 'required');
    await checkIssuer(scope.site, id, input.oidc);
    kindColumns = {
      oidcIssuer: input.oidc.issuer,
      oidcClientId: input.oidc.clientId,
      oidcClientSecretSealed: seal(ring, input.oidc.clientSecret, secretContext(id)),
    };
  }
  const row = {
    id,
    site: scope.site,
    orgId: input.orgId,
    kind: input.kind,
    enforce: input.enforce ?? false,
    allowIdpInitiated: input.allowIdpInitiated ?? false,
    redirectUris: input.redirectUris,
    defaultRoles: input.defaultRoles ?? [],
    ...kindColumns,
  };
  const done = {
    userId: undefined,
    status: 201,
    outcome: 'connection created',
    moreEvents: [connectionEvent('org.connection_created', row)],
  };
  const made = await inWrite(scope, deps, 'org_connection_create', done, async (tx) => {
    await lockOrg(tx, scope.site, input.orgId);
    await holdRoles(tx, scope.site, row.defaultRoles, '/defaultRoles');
    const [has] = await tx.select({ n: count() }).from(ssoConnections).where(eq(ssoConnections.orgId, input.orgId));
    if (has!.n >= MAX_CONNECTIONS_PER_ORG)
      throw badField('/orgId', `has ${MAX_CONNECTIONS_PER_ORG} connections, the most an organization may have`);
    const [inserted] = await tx.insert(ssoConnections).values(row).returning();
    return inserted!;
  });
  return made!;
}

/** The site's connection, or 404 connection_not_found. */
export async function connectionOf(db: Db, site: string, connectionId: string): Promise<ConnectionRow> {
  if (!isUuid(connectionId)) throw connectionNotFound();
  const [row] = await db
    .select()
    .from(ssoConnections)
    .where(and(eq(ssoConnections.id, connectionId), eq(ssoConnections.site, site)));
  if (row === undefined) throw connectionNotFound();
  return row;
}

/** 404 org_not_found unless the organization is the site's. */
async function assertOrg(db: Db, site: string, orgId: string): Promise<void> {
  if (!isUuid(orgId)) throw orgNotFound();
  const [org] = await db
    .select({ id: orgs.id })
    .from(orgs)
    .where(and(eq(orgs.id, orgId), eq(orgs.site, site)));
  if (org === undefined) throw orgNotFound();
}

/** org/connection/list: oldest first. */
export async function listConnections(db: Db, site: string, orgId: string): Promise<ConnectionRow[]> {
  await assertOrg(db, site, orgId);
  return db
    .select()
    .from(ssoConnections)
    .where(eq(ssoConnections.orgId, orgId))
    .orderBy(asc(ssoConnections.createdAt), asc(ssoConnections.id))
    .limit(MAX_CONNECTIONS_PER_ORG);
}

export interface ConnectionChange {
  connectionId: string;
  saml?: { metadataUrl?: string | undefined; metadataXml?: string | undefined } | undefined;
  oidc?: { issuer?: string | undefined; clientId?: string | undefined; clientSecret?: string | undefined } | undefined;
  redirectUris?: string[] | undefined;
  defaultRoles?: string[] | undefined;
  enforce?: boolean | undefined;
  allowIdpInitiated?: boolean | undefined;
}

/** org/connection/update: what the body names; new metadata replaces the kept certificates. */
export async function updateConnection(
  scope: WriteScope,
  deps: WriteDeps,
  input: ConnectionChange,
): Promise<ConnectionRow> {
  const before = await connectionOf(deps.db, scope.site, input.connectionId);
  checkKind(before.kind as 'saml' | 'oidc', input);
  const saml =
    input.saml === undefined
      ? {}
      : (({ metadata, metadataUrl }) => samlColumns(metadata, metadataUrl))(await metadataOf(input.saml));
  let oidc: Partial<ConnectionRow> = {};
  if (input.oidc !== undefined) {
    const issuer = input.oidc.issuer ?? before.oidcIssuer!;
    const clientId = input.oidc.clientId ?? before.oidcClientId!;
    if (issuer !== before.oidcIssuer || clientId !== before.oidcClientId) {
      forgetDiscovery(scope.site, identityProviderOf(before.id));
      await checkIssuer(scope.site, before.id, { issuer, clientId });
    }
    oidc = {
      oidcIssuer: issuer,
      oidcClientId: clientId,
      ...(input.oidc.clientSecret !== undefined && {
        oidcClientSecretSealed: seal(
          await ssoRing(deps.db, deps.factorKeys),
          input.oidc.clientSecret,
          secretContext(before.id),
        ),
      }),
    };
  }
  const done = {
    userId: undefined,
    status: 200,
    outcome: 'connection updated',
    moreEvents: [connectionEvent('org.connection_updated', before)],
  };
  const changed = await inWrite(scope, deps, 'org_connection_update', done, async (tx) => {
    if (input.defaultRoles !== undefined) await holdRoles(tx, scope.site, input.defaultRoles, '/defaultRoles');
    const [row] = await tx
      .update(ssoConnections)
      .set({
        ...saml,
        ...oidc,
        ...(input.redirectUris !== undefined && { redirectUris: input.redirectUris }),
        ...(input.defaultRoles !== undefined && { defaultRoles: input.defaultRoles }),
        ...(input.enforce !== undefined && { enforce: input.enforce }),
        ...(input.allowIdpInitiated !== undefined && { allowIdpInitiated: input.allowIdpInitiated }),
        updatedAt: new Date(),
      })
      .where(and(eq(ssoConnections.id, before.id), eq(ssoConnections.site, scope.site)))
      .returning();
    if (row === undefined) throw connectionNotFound();
    return row;
  });
  return changed!;
}

/** org/connection/delete. */
export async function deleteConnection(scope: WriteScope, deps: WriteDeps, connectionId: string): Promise<void> {
  const before = await connectionOf(deps.db, scope.site, connectionId);
  const done = {
    userId: undefined,
    status: 200,
    outcome: 'connection deleted',
    moreEvents: [connectionEvent('org.connection_deleted', before)],
  };
  const gone = await inWrite(scope, deps, 'org_connection_delete', done, async (tx) => {
    const [row] = await tx
      .delete(ssoConnections)
      .where(and(eq(ssoConnections.id, connectionId), eq(ssoConnections.site, scope.site)))
      .returning({ id: ssoConnections.id });
    return row;
  });
  if (gone === undefined) throw connectionNotFound();
  forgetDiscovery(scope.site, identityProviderOf(connectionId));
}

/**
 * The IdP's metadata read again from its URL (daily, or on a signature by a certificate not yet
 * known: saml.ts), outside any request's write: the row's certificates and endpoints replaced.
 * Answers the row as it is now; a fetch that fails leaves the row as it was.
 */
export async function refreshMetadata(db: Db, row: ConnectionRow): Promise<ConnectionRow> {
  if (row.samlMetadataUrl === null) return row;
  const metadata = await fetchIdpMetadata(row.samlMetadataUrl);
  const [updated] = await db
    .update(ssoConnections)
    .set({ ...samlColumns(metadata, row.samlMetadataUrl), updatedAt: new Date() })
    .where(eq(ssoConnections.id, row.id))
    .returning();
  return updated ?? row;
}

/**
 * The connection a sign-in starts with: `connectionId`'s, or the first of `orgId`'s, or the first
 * of the organization that has verified `email`'s domain; 404 connection_not_found when none.
 */
export async function connectionForStart(
  db: Db,
  site: string,
  input: { email?: string | undefined; orgId?: string | undefined; connectionId?: string | undefined },
): Promise<ConnectionRow> {
  if (input.connectionId !== undefined) return connectionOf(db, site, input.connectionId);
  const orgId =
    input.orgId ?? (input.email === undefined ? undefined : await orgOfVerifiedDomain(db, site, input.email));
  if (orgId === undefined || !isUuid(orgId)) throw connectionNotFound();
  const [row] = await db
    .select()
    .from(ssoConnections)
    .where(and(eq(ssoConnections.orgId, orgId), eq(ssoConnections.site, site)))
    .orderBy(asc(ssoConnections.createdAt), asc(ssoConnections.id))
    .limit(1);
  if (row === undefined) throw connectionNotFound();
  return row;
}
