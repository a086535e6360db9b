// An organization's enterprise sign-in connections (issue 61, point 2). A SAML connection keeps
// the IdP's entity id, single sign-on URL and signing certificates (several at once, for a
// rollover) from its metadata, refreshed from `metadataUrl` daily and when a response is signed
// by a certificate not yet known (saml.ts); and our service provider's key pair of its own (an
// RSA key and a self-signed certificate, @peculiar/x509), the private key sealed under
// FACTOR_ENCRYPTION_KEY bound to the connection's id, for signed AuthnRequests and encrypted
// assertions. An OIDC connection keeps its issuer, client id and sealed client secret.
import { createHash, webcrypto, X509Certificate } from 'node:crypto';
// @peculiar/x509 reads its classes' metadata through tsyringe, which needs this polyfill of Reflect.
import 'reflect-metadata';
import * as x509 from '@peculiar/x509';
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
import { orgOfVerifiedDomain } from './domains.ts';
import { fetchIdpMetadata, type IdpMetadata, parseIdpMetadata } from './saml-metadata.ts';

export const MAX_CONNECTIONS_PER_ORG = 20;
/** How long the IdP's metadata is kept before it is read again from its URL. */
export const METADATA_REFRESH_MS = 24 * 60 * 60 * 1000;

export type ConnectionRow = typeof ssoConnections.$inferSelect;

export const connectionNotFound = () =>
  new ApiError('connection_not_found', 'No connection of this site serves this email, organization or id.');

x509.cryptoProvider.set(webcrypto as unknown as Crypto);

const ssoRing = (db: Db, ring: WriteDeps['factorKeys']) => sealingRingFor(db, ring, 'sso_key');
const keyContext = (connectionId: string) => `sso_connection:${connectionId}`;

/** A new RSA-2048 key and a self-signed certificate for ten years: our SP's for one connection. */
async function newSpKeyPair(connectionId: string): Promise<{ certPem: string; keyPem: string }> {
  const algorithm = {
    name: 'RSASSA-PKCS1-v1_5',
    hash: 'SHA-256',
    publicExponent: new Uint8Array([1, 0, 1]),
    modulusLength: 2048,
  };
  const keys = (await webcrypto.subtle.generateKey(algorithm, true, ['sign', 'verify'])) as CryptoKeyPair;
  const now = Date.now();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    serialNumber: createHash('sha256').update(connectionId).digest('hex').slice(0, 16),
    name: `CN=user-accounts SSO ${connectionId}`,
    notBefore: new Date(now - 60_000),
    notAfter: new Date(now + 10 * 365 * 24 * 3600 * 1000),
    signingAlgorithm: algorithm,
    keys,
  });
  const pkcs8 = Buffer.from(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey as webcrypto.CryptoKey));
  const keyPem = `-----BEGIN PRIVATE KEY-----\n${pkcs8
    .toString('base64')
    .match(/.{1,64}/g)!
    .join('\n')}\n-----END PRIVATE KEY-----\n`;
  return { certPem: cert.toString('pem'), keyPem };
}

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

const badField = (pointer: string, message: string) =>
  new ApiError('invalid_request', 'The request body is not valid.', {
    errors: [{ pointer, code: 'not_allowed', message }],
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
  redirectUris: string[];
  defaultRoles?: string[] | undefined;
  enforce?: boolean | undefined;
  allowIdpInitiated?: boolean | undefined;
}

/** org/connection/create (SAML; OIDC connections come with issue 59's OpenID Connect machinery). */
export async function createConnection(
  scope: WriteScope,
  deps: WriteDeps,
  input: NewConnection,
): Promise<ConnectionRow> {
  if (input.kind !== 'saml')
    throw badField(
      '/kind',
      'oidc connections are not served yet: use saml (OpenID Connect comes with provider sign-in)',
    );
  if (!isUuid(input.orgId)) throw orgNotFound();
  const { metadata, metadataUrl } = await metadataOf(input.saml);
  const id = uuidv7();
  const { certPem, keyPem } = await newSpKeyPair(id);
  const sealed = seal(await ssoRing(deps.db, deps.factorKeys), keyPem, keyContext(id));
  const row = {
    id,
    site: scope.site,
    orgId: input.orgId,
    kind: 'saml',
    enforce: input.enforce ?? false,
    allowIdpInitiated: input.allowIdpInitiated ?? false,
    redirectUris: input.redirectUris,
    defaultRoles: input.defaultRoles ?? [],
    ...samlColumns(metadata, metadataUrl),
    spCert: certPem,
    spKeySealed: sealed,
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

/** org/connection/list: oldest first. */
export async function listConnections(db: Db, site: string, orgId: string): Promise<ConnectionRow[]> {
  if (!isUuid(orgId)) throw orgNotFound();
  const [org] = await db
    .select({ id: orgs.id })
    .from(orgs)
    .where(and(eq(orgs.id, orgId), eq(orgs.site, site)));
  if (org === undefined) throw orgNotFound();
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
  const saml =
    input.saml === undefined
      ? {}
      : (({ metadata, metadataUrl }) => samlColumns(metadata, metadataUrl))(await metadataOf(input.saml));
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
