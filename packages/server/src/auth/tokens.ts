import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { and, desc, eq, isNull, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { apiTokens, DEFAULT_SITE } from '../db/schema.ts';

export const TOKEN_PREFIX = 'ua_';
export const SCOPES = ['read', 'write', 'verify', 'export', 'events', 'impersonate'] as const;
export type Scope = (typeof SCOPES)[number];
/**
 * The scopes of API_TOKENS and the dev token: all but export, which hands out password hashes, and
 * impersonate, which signs in as anyone (session/impersonate): only an operator grants those two.
 */
export const DEFAULT_SCOPES: readonly Scope[] = ['read', 'write', 'verify', 'events'];

/** Site names: lowercase, URL- and shell-safe, so they can be typed and grepped without quoting. */
export const SITE_NAME = /^[a-z0-9][a-z0-9_-]{0,62}$/;

/** A new token: a recognisable prefix and 256 random bits. */
export function mintToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** Who a request speaks for. `id` names the token in audit rows and idempotency keys. */
export interface TokenInfo {
  id: string;
  site: string;
  scopes: readonly Scope[];
  /** The token's SHA-256, as looked up: what the failed-authentication limit remembers of it. */
  digest?: string;
}

export interface TokenVerifier {
  /** The token's identity when it is accepted now (known, not expired, not revoked). */
  verify(token: string): Promise<TokenInfo | undefined>;
  /**
   * verify's answer when it needs no database: a configured token, or one cached and trusted now;
   * undefined when only verify can tell (the pipeline then awaits it, issue 47).
   */
  verifyKnown?(token: string): TokenInfo | undefined;
  /** Writes the last-used times gathered since the previous flush (one UPDATE, not one per request). */
  flushLastUsed(): Promise<void>;
}

/** A verifier that keeps accepted tokens in memory, told by the database when to forget them. */
export interface CachingTokenVerifier extends TokenVerifier {
  /** Drops every cached token: a token changed somewhere (the database's NOTIFY on TOKENS_CHANNEL). */
  invalidate(): void;
  /** Whether changes are being heard now; while they are not, nothing is cached or read from the cache. */
  setLive(up: boolean): void;
  /** Changes are known to be heard until `until` (performance.now()); past it the cache is bypassed. */
  confirmed(until: number): void;
}

/** What the api_tokens trigger (migration 0006) notifies on every change of a token but its last use. */
export const TOKENS_CHANNEL = 'ua_tokens';

/** An entry is read again after this long even when no change was heard: a bound on what a lost notification costs. */
export const TOKEN_CACHE_MAX_AGE_MS = 60_000;
const TOKEN_CACHE_MAX_ENTRIES = 10_000;
/**
 * Accepted tokens' digests, by the token as sent: a read skips its SHA-256 (about 1% of a get's
 * CPU, issue 33). Only tokens that were accepted get in, so that guesses cannot churn it; bounded.
 */
const DIGEST_CACHE_MAX_ENTRIES = 1_000;

/** Times on performance.now()'s clock: an expiry is the database's, counted down from its answer. */
interface Cached {
  info: TokenInfo;
  expiresAt: number;
  cachedAt: number;
}

/**
 * Accepts the operator's configured tokens (site `default`, checked in memory) and the tokens
 * stored in the database, looked up by hash and then kept in memory while this server hears every
 * change of a token (LISTEN on TOKENS_CHANNEL, see assemble.ts): a revocation drops the cache on
 * every server as it commits. While the listener is down, or its heartbeat has not come back
 * lately, the cache is bypassed and each request reads the database, as before there was a cache.
 */
export function createTokenVerifier(db: Db, configured: readonly string[]): CachingTokenVerifier {
  const configuredByHash = new Map<string, TokenInfo>(
    configured.map((token) => {
      const digest = hashToken(token);
      return [digest, { id: `env:${digest.slice(0, 12)}`, site: DEFAULT_SITE, scopes: DEFAULT_SCOPES, digest }];
    }),
  );
  const cache = new Map<string, Cached>();
  let live = false;
  let confirmedUntil = 0;
  // Moves on every change heard and every change of `live`: a lookup that saw it move while it
  // read the database may hold what a revocation has just replaced, and is not cached.
  let generation = 0;
  let usedSinceFlush = new Map<string, Date>();
  const digests = new Map<string, string>();
  const remember = (token: string, digest: string) => {
    if (digests.has(token)) return;
    if (digests.size >= DIGEST_CACHE_MAX_ENTRIES) digests.clear();
    digests.set(token, digest);
  };
  const lookup = db
    .select({
      id: apiTokens.id,
      site: apiTokens.site,
      scopes: apiTokens.scopes,
      // What is left, by the database's clock (a server's own may differ).
      msLeft: sql<number | null>`extract(epoch from (${apiTokens.expiresAt} - now())) * 1000`,
    })
    .from(apiTokens)
    .where(
      and(
        eq(apiTokens.tokenHash, sql.placeholder('digest')),
        isNull(apiTokens.revokedAt),
        sql`(${apiTokens.expiresAt} is null or ${apiTokens.expiresAt} > now())`,
      ),
    )
    .limit(1)
    .prepare('token_by_hash');

  /** A configured token, or a cached one while the cache is trusted; undefined: ask the database. */
  const known = (token: string, digest: string, now: number): TokenInfo | undefined => {
    const fromEnv = configuredByHash.get(digest);
    if (fromEnv !== undefined) {
      remember(token, digest);
      return fromEnv;
    }
    const cached = live && now < confirmedUntil ? cache.get(digest) : undefined;
    if (cached !== undefined && cached.expiresAt > now && now - cached.cachedAt < TOKEN_CACHE_MAX_AGE_MS) {
      usedSinceFlush.set(cached.info.id, new Date());
      remember(token, digest);
      return cached.info;
    }
    return undefined;
  };

  return {
    verifyKnown(token) {
      const digest = digests.get(token);
      // A token not accepted lately is hashed by verify, off this path.
      return digest === undefined ? undefined : known(token, digest, performance.now());
    },
    async verify(token) {
      const digest = digests.get(token) ?? hashToken(token);
      const now = performance.now();
      const found = known(token, digest, now);
      if (found !== undefined) return found;
      const trusted = live && now < confirmedUntil;
      const before = generation;
      const [row] = await lookup.execute({ digest });
      if (row === undefined) return undefined;
      usedSinceFlush.set(row.id, new Date());
      const info: TokenInfo = { id: row.id, site: row.site, scopes: row.scopes.filter(isScope), digest };
      remember(token, digest);
      if (trusted && generation === before) {
        if (cache.size >= TOKEN_CACHE_MAX_ENTRIES) cache.clear();
        const expiresAt = row.msLeft === null ? Number.POSITIVE_INFINITY : now + Number(row.msLeft);
        cache.set(digest, { info, expiresAt, cachedAt: now });
      }
      return info;
    },
    async flushLastUsed() {
      if (usedSinceFlush.size === 0) return;
      const batch = usedSinceFlush;
      usedSinceFlush = new Map();
      // One statement for every token used since the last flush, each with its own time (two
      // lists as text, which every driver passes alike).
      const ids = [...batch.keys()].join(',');
      const times = [...batch.values()].map((d) => d.toISOString()).join(',');
      await db.execute(sql`update ${apiTokens} set last_used_at = greatest(${apiTokens.lastUsedAt}, used.at)
        from (select unnest(string_to_array(${ids}, ','))::uuid as id,
                     unnest(string_to_array(${times}, ','))::timestamptz as at) as used
        where ${apiTokens.id} = used.id`);
    },
    invalidate() {
      generation++;
      cache.clear();
    },
    setLive(up) {
      generation++;
      live = up;
      cache.clear();
    },
    confirmed(until) {
      confirmedUntil = Math.max(confirmedUntil, until);
    },
  };
}

const isScope = (s: string): s is Scope => (SCOPES as readonly string[]).includes(s);

export interface NewToken {
  site: string;
  scopes: readonly Scope[];
  label: string;
  expiresAt?: Date | undefined;
}

/** Stores a new token (hash and display prefix only) and returns it: the only time it is seen. */
export async function createToken(db: Db, spec: NewToken): Promise<{ id: string; token: string; prefix: string }> {
  const token = mintToken();
  const prefix = token.slice(0, 10);
  const [row] = await db
    .insert(apiTokens)
    .values({
      tokenHash: hashToken(token),
      prefix,
      label: spec.label,
      site: spec.site,
      scopes: [...new Set(spec.scopes)],
      expiresAt: spec.expiresAt ?? null,
    })
    .returning({ id: apiTokens.id });
  return { id: row!.id, token, prefix };
}

/** Whether the database holds a token that would be accepted now (not revoked, not expired). */
export async function hasUsableToken(db: Db): Promise<boolean> {
  const [row] = await db
    .select({ id: apiTokens.id })
    .from(apiTokens)
    .where(and(isNull(apiTokens.revokedAt), sql`(${apiTokens.expiresAt} is null or ${apiTokens.expiresAt} > now())`))
    .limit(1);
  return row !== undefined;
}

export async function listTokens(db: Db, options: { site?: string | undefined } = {}) {
  return db
    .select({
      id: apiTokens.id,
      site: apiTokens.site,
      label: apiTokens.label,
      scopes: apiTokens.scopes,
      prefix: apiTokens.prefix,
      createdAt: apiTokens.createdAt,
      lastUsedAt: apiTokens.lastUsedAt,
      expiresAt: apiTokens.expiresAt,
      revokedAt: apiTokens.revokedAt,
    })
    .from(apiTokens)
    .where(options.site === undefined ? undefined : eq(apiTokens.site, options.site))
    .orderBy(desc(apiTokens.createdAt));
}

/** The tokens not revoked yet whose display prefix (what token list shows) is `prefix`, oldest first. */
export async function unrevokedTokenIds(db: Db, prefix: string): Promise<string[]> {
  const rows = await db
    .select({ id: apiTokens.id })
    .from(apiTokens)
    .where(and(eq(apiTokens.prefix, prefix), isNull(apiTokens.revokedAt)))
    .orderBy(apiTokens.createdAt);
  return rows.map((r) => r.id);
}

/** Revokes a token for good. Returns false when no token has this id (or it was revoked already). */
export async function revokeToken(db: Db, id: string): Promise<boolean> {
  const rows = await db
    .update(apiTokens)
    .set({ revokedAt: sql`now()` })
    .where(and(eq(apiTokens.id, id), isNull(apiTokens.revokedAt)))
    .returning({ id: apiTokens.id });
  return rows.length > 0;
}

/** The dev token has every scope but export and impersonate; one kept from an older version has its scopes set to those. */
async function storeToken(db: Db, token: string, label: string): Promise<void> {
  await db
    .insert(apiTokens)
    .values({ tokenHash: hashToken(token), prefix: token.slice(0, 10), label, scopes: [...DEFAULT_SCOPES] })
    .onConflictDoUpdate({ target: apiTokens.tokenHash, set: { scopes: [...DEFAULT_SCOPES] } });
}

/**
 * The development token of an embedded database: minted on the first start, kept in plain text
 * only in `dataDir/dev-token` (mode 0600) and as a hash in the database. Returns the token and
 * whether it is new (only a new one is ever printed).
 */
export async function ensureDevToken(
  db: Db,
  dataDir: string,
): Promise<{ token: string; minted: boolean; file: string }> {
  const file = join(dataDir, 'dev-token');
  if (existsSync(file)) {
    const token = readFileSync(file, 'utf8').trim();
    await storeToken(db, token, 'dev-token');
    return { token, minted: false, file };
  }
  const token = mintToken();
  await storeToken(db, token, 'dev-token');
  writeFileSync(file, `${token}\n`, { mode: 0o600, flag: 'wx' });
  return { token, minted: true, file };
}
