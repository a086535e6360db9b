// A site's sign-in providers as they are kept (issue 59, point 1): set (create or replace), list,
// remove, and the client secret opened for the code exchange. The secret is sealed with
// secret-box under FACTOR_ENCRYPTION_KEY's ring (without one, PostgreSQL without the variable:
// the database's own key derived for this purpose, as webhook secrets are, which the start's
// warning says), bound to the provider's site and name: a sealed secret copied onto another
// provider's row does not open there. Nothing here returns the secret but openClientSecret.
import { and, asc, eq, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { providers } from '../db/schema.ts';
import { sealingRingFor } from '../kernel/deployment-keys.ts';
import { type KeyRing, open, seal } from '../kernel/secret-box.ts';
import type { ProviderConfig } from './options.ts';

/** The additional data of a provider's sealed secret: it opens on its own row only. */
const contextOf = (site: string, name: string) => `provider ${site} ${name}`;

const providerRing = (db: Db, ring: KeyRing | undefined) => sealingRingFor(db, ring, 'provider_secret');

/** A provider as the operator's list shows it: everything but the secret. */
export interface StoredProvider extends ProviderConfig {
  createdAt: Date;
  updatedAt: Date;
}

/** What `GET /api/1/provider/list` shows of a provider (spec: Provider). */
export interface PublicProvider {
  name: string;
  kind: 'oidc' | 'oauth2';
  issuer: string | null;
  clientId: string;
  scopes: string[];
  redirectUris: string[];
  onNewPerson: 'create' | 'refuse';
}

/**
 * Creates the provider, or replaces the whole configuration of the one of that site and name.
 * `secret` undefined keeps the stored one (a provider being replaced); a new provider needs one
 * (`missing_secret`). Answers whether it was created.
 */
export async function setProvider(
  db: Db,
  config: ProviderConfig,
  secret: string | undefined,
  ring: KeyRing | undefined,
): Promise<'created' | 'replaced' | 'missing_secret'> {
  const sealed =
    secret === undefined ? undefined : seal(await providerRing(db, ring), secret, contextOf(config.site, config.name));
  const values = {
    kind: config.kind,
    issuer: config.issuer,
    endpoints: config.endpoints,
    userinfoMap: config.userinfoMap,
    clientId: config.clientId,
    scopes: config.scopes,
    redirectUris: config.redirectUris,
    onNewPerson: config.onNewPerson,
    keepTokens: config.keepTokens,
  };
  if (sealed === undefined) {
    const updated = await db
      .update(providers)
      .set({ ...values, updatedAt: sql`now()` })
      .where(and(eq(providers.site, config.site), eq(providers.name, config.name)))
      .returning({ name: providers.name });
    return updated.length > 0 ? 'replaced' : 'missing_secret';
  }
  // xmax = 0: the row was inserted, not updated (PostgreSQL's and PGlite's alike).
  const [row] = await db
    .insert(providers)
    .values({ site: config.site, name: config.name, ...values, clientSecretSealed: sealed })
    .onConflictDoUpdate({
      target: [providers.site, providers.name],
      set: { ...values, clientSecretSealed: sealed, updatedAt: sql`now()` },
    })
    .returning({ inserted: sql<boolean>`xmax = 0` });
  return row?.inserted ? 'created' : 'replaced';
}

const configColumns = {
  site: providers.site,
  name: providers.name,
  kind: providers.kind,
  issuer: providers.issuer,
  endpoints: providers.endpoints,
  userinfoMap: providers.userinfoMap,
  clientId: providers.clientId,
  scopes: providers.scopes,
  redirectUris: providers.redirectUris,
  onNewPerson: providers.onNewPerson,
  keepTokens: providers.keepTokens,
  createdAt: providers.createdAt,
  updatedAt: providers.updatedAt,
};

/** Every provider (of one site, or all), by site and name, without secrets: the operator's list. */
export async function listProviders(db: Db, site?: string): Promise<StoredProvider[]> {
  const found = await db
    .select(configColumns)
    .from(providers)
    .where(site === undefined ? undefined : eq(providers.site, site))
    .orderBy(asc(providers.site), asc(providers.name));
  return found as StoredProvider[];
}

/** The site's providers as its login page may see them, by name: never a secret, never another site's. */
export async function siteProviders(db: Db, site: string): Promise<PublicProvider[]> {
  const found = await listProviders(db, site);
  return found.map((p) => ({
    name: p.name,
    kind: p.kind,
    issuer: p.issuer,
    clientId: p.clientId,
    scopes: p.scopes,
    redirectUris: p.redirectUris,
    onNewPerson: p.onNewPerson,
  }));
}

/** The site's provider of that name, without its secret; undefined when it has none. */
export async function findProvider(db: Db, site: string, name: string): Promise<StoredProvider | undefined> {
  const [found] = await db
    .select(configColumns)
    .from(providers)
    .where(and(eq(providers.site, site), eq(providers.name, name)));
  return found as StoredProvider | undefined;
}

/** Removes the provider; false when the site has none of that name. Identities linked through it stay. */
export async function removeProvider(db: Db, site: string, name: string): Promise<boolean> {
  const removed = await db
    .delete(providers)
    .where(and(eq(providers.site, site), eq(providers.name, name)))
    .returning({ name: providers.name });
  return removed.length > 0;
}

/**
 * The provider's client secret, for the code exchange only (never an answer, a log line or an
 * audit row); undefined when there is no such provider. A SealedSecretError when it does not open
 * with this ring (its key gone from FACTOR_ENCRYPTION_KEY, or the row tampered with).
 */
export async function openClientSecret(
  db: Db,
  site: string,
  name: string,
  ring: KeyRing | undefined,
): Promise<string | undefined> {
  const [row] = await db
    .select({ sealed: providers.clientSecretSealed })
    .from(providers)
    .where(and(eq(providers.site, site), eq(providers.name, name)));
  if (row === undefined) return undefined;
  return open(await providerRing(db, ring), row.sealed, contextOf(site, name));
}
