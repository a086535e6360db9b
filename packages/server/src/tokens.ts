import { createHash, randomBytes } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import type { Db } from './db/client.ts';
import { apiTokens } from './db/schema.ts';

export const TOKEN_PREFIX = 'ua_';

/** A new token: a recognisable prefix and 256 random bits. */
export function mintToken(): string {
  return TOKEN_PREFIX + randomBytes(32).toString('base64url');
}

export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

export interface TokenVerifier {
  /** Whether the presented token is accepted. Looks tokens up by hash, never by value. */
  verify(token: string): Promise<boolean>;
}

/** Accepts the operator's configured tokens and the tokens stored (hashed) in the database. */
export function createTokenVerifier(db: Db, configured: readonly string[]): TokenVerifier {
  const configuredHashes = new Set(configured.map(hashToken));
  return {
    async verify(token) {
      const digest = hashToken(token);
      if (configuredHashes.has(digest)) return true;
      const rows = await db
        .select({ id: apiTokens.id })
        .from(apiTokens)
        .where(eq(apiTokens.tokenHash, digest))
        .limit(1);
      return rows.length > 0;
    },
  };
}

export async function storeToken(db: Db, token: string, label: string): Promise<void> {
  await db
    .insert(apiTokens)
    .values({ tokenHash: hashToken(token), prefix: token.slice(0, 8), label })
    .onConflictDoNothing();
}

/**
 * The development token of an embedded database: minted on the first start, kept in plain text
 * only in `dataDir/dev-token` (mode 0600) and as a hash in the database. Returns the token and
 * whether it is new (only a new one is ever printed).
 */
export async function ensureDevToken(db: Db, dataDir: string): Promise<{ token: string; minted: boolean; file: string }> {
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
