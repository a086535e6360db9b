// The keys that sign sessions' access tokens (issue 43, point 4): ES256 key pairs made by the
// service, kept in `signing_keys` with the private key sealed like a factor secret, published at
// GET /.well-known/jwks.json, rotated by `cli signing-keys rotate`.
//
// A key's life, all on the server's clock (every time is a row's column):
//   created_at    published (JWKS) from now on; it does not sign yet
//   activates_at  signs from now on (a rotation: created_at + ACTIVATION_DELAY_SECONDS, so that
//                 every server has read it and every verifier's cached JWKS has it before any
//                 token it signed is seen; the first key of a deployment, and `--now`: at once)
//   retired_at    signs no more (= the next key's activates_at)
//   retired_at + PUBLISHED_AFTER_RETIREMENT_SECONDS: unpublished (every token it signed has
//                 expired: the longest lifetime, 3600 s, plus how stale a server's view may be);
//                 the next rotation deletes the row.
//
// Each server keeps the table in memory (a handful of rows) and signs from that: no database
// round trip per token, and none awaited once the first read is done. It reads the table again in
// the background every REFRESH_MS (30 s): so a key made by another server or the CLI is signed
// with and published by every server within STALE_MS (60 s, the bound the timings below allow
// for) of its row's commit, well inside the activation delay. A server that runs the CLI's
// command (the embedded database's socket) reads it at once. A `--now` rotation (tests, an
// emergency) takes effect on the other servers only within that bound; the old key stays
// published meanwhile, so their tokens still verify.
//
// The seal (kernel/secret-box.ts, the kid as context, so a sealed key copied onto another row does
// not open): FACTOR_ENCRYPTION_KEY's ring, as second-factor secrets. Without a ring (PostgreSQL
// without FACTOR_ENCRYPTION_KEY) a key derived (HKDF) from the database's own key (service_keys
// `deployment`, as kernel/deployment-keys.ts falls back to it): the private keys are then no safer
// than the database, which the start's warning (FACTOR_KEY_MISSING) says. Sessions keep working
// either way; a key sealed so (id `@db`) is sealed again under the ring by the next start once
// the variable is set (resealSigningKeys, issue 57), and still opens meanwhile.
import { createHash } from 'node:crypto';
import { gt, isNull, or, sql } from 'drizzle-orm';
import { calculateJwkThumbprint, exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose';
import type { Db } from '../db/client.ts';
import { signingKeys } from '../db/schema.ts';
import { serviceUnavailable } from '../errors.ts';
import { DATABASE_KEY_ID, sealingRingFor } from '../kernel/deployment-keys.ts';
import { type KeyRing, open, SealedSecretError, seal } from '../kernel/secret-box.ts';
import type {
  AccessTokenRequest,
  AccessTokenSigner,
  PublicJwk,
  PublishedKeys,
  SignedAccessToken,
} from './access-tokens.ts';

export const ALGORITHM = 'ES256';
/** ACCESS_TOKEN_LIFETIME's bounds and default, in seconds. */
export const DEFAULT_ACCESS_TOKEN_LIFETIME_SECONDS = 300;
export const MAX_ACCESS_TOKEN_LIFETIME_SECONDS = 3600;
/** Cache-Control max-age of GET /.well-known/jwks.json. */
export const JWKS_MAX_AGE_SECONDS = 300;
/** A server reads the keys again in the background this often… */
export const REFRESH_MS = 30_000;
/** …so its view is never older than this while the database answers (twice the period: a slow read, a busy loop). */
export const STALE_MS = 60_000;
/** A rotated-in key signs this long after it is published: every server and every verifier's cache has it by then. */
export const ACTIVATION_DELAY_SECONDS = JWKS_MAX_AGE_SECONDS + STALE_MS / 1000;
/** A retired key stays published this long: the longest token it may have signed, on the stalest server. */
export const PUBLISHED_AFTER_RETIREMENT_SECONDS = MAX_ACCESS_TOKEN_LIFETIME_SECONDS + STALE_MS / 1000;
/** The JWT's `typ` (RFC 9068): an access token, not an ID token a verifier might confuse it with. */
export const TOKEN_TYPE = 'at+jwt';

export type SigningKeyRow = typeof signingKeys.$inferSelect;
export type KeyState = 'pending' | 'signing' | 'retired' | 'unpublished';

const ms = (date: Date) => date.getTime();
/** Until when a key is published: for ever while it is not retired. */
export const publishedUntil = (row: Pick<SigningKeyRow, 'retiredAt'>): Date | null =>
  row.retiredAt === null ? null : new Date(ms(row.retiredAt) + PUBLISHED_AFTER_RETIREMENT_SECONDS * 1000);

export function stateOf(row: SigningKeyRow, now: number): KeyState {
  if (row.retiredAt !== null && ms(row.retiredAt) <= now) {
    return now < ms(publishedUntil(row)!) ? 'retired' : 'unpublished';
  }
  return ms(row.activatesAt) <= now ? 'signing' : 'pending';
}

/**
 * The key that signs at `now`: the latest activated of those not retired (the kid breaks a tie,
 * the same on every server). When none is activated yet on this server's clock (a clock behind
 * the one of the server that made the first key), the one that activates first: it is published
 * already, and a server must not stop signing over a second of skew.
 */
export function signingKeyOf(rows: SigningKeyRow[], now: number): SigningKeyRow | undefined {
  return (
    rows.filter((row) => stateOf(row, now) === 'signing').sort(newestFirst)[0] ??
    rows.filter((row) => unretired(row, now)).sort((a, b) => ms(a.activatesAt) - ms(b.activatesAt))[0]
  );
}

const unretired = (row: SigningKeyRow, now: number) => row.retiredAt === null || ms(row.retiredAt) > now;

/** The key that signs (or will sign) last first; the kid breaks a tie, the same on every server. */
const newestFirst = (a: SigningKeyRow, b: SigningKeyRow) =>
  ms(b.activatesAt) - ms(a.activatesAt) || ms(b.createdAt) - ms(a.createdAt) || (a.kid < b.kid ? 1 : -1);

/** The published keys, newest first, as JWKS members, and an entity tag of exactly that list. */
export function publish(rows: SigningKeyRow[], now: number): PublishedKeys {
  const keys: PublicJwk[] = rows
    .filter((row) => stateOf(row, now) !== 'unpublished')
    .sort(newestFirst)
    .map((row) => ({
      kty: 'EC',
      crv: 'P-256',
      x: row.publicJwk.x!,
      y: row.publicJwk.y!,
      kid: row.kid,
      alg: ALGORITHM,
      use: 'sig',
    }));
  const etag = `"${createHash('sha256').update(JSON.stringify(keys)).digest('base64url').slice(0, 22)}"`;
  return { keys, etag };
}

/**
 * The ring that seals and opens signing keys: FACTOR_ENCRYPTION_KEY's, plus the database's own key
 * (derived for this purpose) to open what was sealed without it; without a ring, that key alone,
 * made by the first server that needs it.
 */
export function sealingRing(db: Db, ring: KeyRing | undefined): Promise<KeyRing> {
  return sealingRingFor(db, ring, 'signing_key');
}

/**
 * Seals again under the ring each private key sealed by the database's own key (made on
 * PostgreSQL before FACTOR_ENCRYPTION_KEY was set; issue 57): a copy of the database, which holds
 * that key, then opens none. The same key pair, so its tokens and kid stay good. At a server's
 * start; each row changed only if it is as it was read. Answers how many it sealed.
 */
export async function resealSigningKeys(db: Db, ring: KeyRing | undefined): Promise<number> {
  if (ring === undefined) return 0;
  const rows = await db
    .select({ kid: signingKeys.kid, privateSealed: signingKeys.privateSealed })
    .from(signingKeys)
    .where(sql`${signingKeys.privateSealed} like ${`v1.${DATABASE_KEY_ID}.%`}`);
  if (rows.length === 0) return 0;
  const sealing = await sealingRing(db, ring);
  let sealed = 0;
  for (const row of rows) {
    const resealed = seal(sealing, open(sealing, row.privateSealed, row.kid), row.kid);
    const changed = await db
      .update(signingKeys)
      .set({ privateSealed: resealed })
      .where(sql`${signingKeys.kid} = ${row.kid} and ${signingKeys.privateSealed} = ${row.privateSealed}`)
      .returning({ kid: signingKeys.kid });
    sealed += changed.length;
  }
  return sealed;
}

/** A new key pair as its row: the public JWK in clear, the private one sealed under `ring` with the kid as context. */
export async function newSigningKey(ring: KeyRing, activatesAt: Date, now: Date): Promise<SigningKeyRow> {
  const pair = await generateKeyPair(ALGORITHM, { extractable: true });
  const { kty, crv, x, y } = await exportJWK(pair.publicKey);
  const publicJwk = { kty: kty!, crv: crv!, x: x!, y: y! };
  // RFC 7638: the same key has the same kid wherever it is computed.
  const kid = await calculateJwkThumbprint(publicJwk as JWK);
  const privateJwk = await exportJWK(pair.privateKey);
  return {
    kid,
    algorithm: ALGORITHM,
    publicJwk,
    privateSealed: seal(ring, JSON.stringify(privateJwk), kid),
    createdAt: now,
    activatesAt,
    retiredAt: null,
  };
}

/** One advisory lock for every change of the table: the first key and rotations never interleave. */
const lockKeys = sql`select pg_advisory_xact_lock(hashtextextended('signing_keys', 0))`;

/**
 * A key not retired at `now`, made if there is none (the first server that needs one; the advisory
 * lock makes it one key whichever servers ask at once). True when this call made it.
 */
export async function ensureSigningKey(db: Db, ring: KeyRing, now = new Date()): Promise<boolean> {
  return db.transaction(async (tx) => {
    await tx.execute(lockKeys);
    const live = await tx
      .select({ kid: signingKeys.kid })
      .from(signingKeys)
      .where(or(isNull(signingKeys.retiredAt), gt(signingKeys.retiredAt, now)))
      .limit(1);
    if (live.length > 0) return false;
    await tx.insert(signingKeys).values(await newSigningKey(ring, now, now));
    return true;
  });
}

export interface Rotation {
  /** The new key and when it signs. */
  kid: string;
  activatesAt: Date;
  /** Keys that stop signing then (the one signing now, and one still pending from an earlier rotation). */
  retired: string[];
  /** Rows of keys no longer published, deleted. */
  removed: number;
}

/**
 * Publishes a new key that signs from `now` + ACTIVATION_DELAY_SECONDS (`immediately`: from `now`;
 * also when no key signs now, there being nothing to hand over from); every other key retires
 * then. Keys whose publication has ended are deleted.
 */
export async function rotateSigningKey(
  db: Db,
  ring: KeyRing,
  options: { now?: Date; immediately?: boolean } = {},
): Promise<Rotation> {
  const now = options.now ?? new Date();
  return db.transaction(async (tx) => {
    await tx.execute(lockKeys);
    const rows = await tx.select().from(signingKeys);
    const gone = rows.filter((row) => stateOf(row, ms(now)) === 'unpublished').map((row) => row.kid);
    for (const kid of gone) await tx.delete(signingKeys).where(sql`${signingKeys.kid} = ${kid}`);
    const handover = !options.immediately && signingKeyOf(rows, ms(now)) !== undefined;
    const activatesAt = handover ? new Date(ms(now) + ACTIVATION_DELAY_SECONDS * 1000) : now;
    const retired = rows.filter(
      (row) => !gone.includes(row.kid) && (row.retiredAt === null || ms(row.retiredAt) > ms(activatesAt)),
    );
    for (const row of retired)
      await tx.update(signingKeys).set({ retiredAt: activatesAt }).where(sql`${signingKeys.kid} = ${row.kid}`);
    const key = await newSigningKey(ring, activatesAt, now);
    await tx.insert(signingKeys).values(key);
    return { kid: key.kid, activatesAt, retired: retired.map((row) => row.kid), removed: gone.length };
  });
}

/** Every key, newest first, with its state at `now` and the key id of its seal (never the key). */
export async function listSigningKeys(db: Db, now = Date.now()) {
  const rows = await db.select().from(signingKeys);
  return rows.sort(newestFirst).map((row) => ({
    kid: row.kid,
    algorithm: row.algorithm,
    state: stateOf(row, now),
    createdAt: row.createdAt,
    activatesAt: row.activatesAt,
    retiredAt: row.retiredAt,
    publishedUntil: publishedUntil(row),
    sealedWith: row.privateSealed.split('.')[1] ?? '?',
  }));
}

export interface SigningKeysOptions {
  db: Db;
  /** FACTOR_ENCRYPTION_KEY's ring (or the embedded database's key file); undefined: the database's own key. */
  ring: KeyRing | undefined;
  /** The tokens' `iss`. */
  issuer: string;
  /** The tokens' lifetime in seconds (ACCESS_TOKEN_LIFETIME), at most MAX_ACCESS_TOKEN_LIFETIME_SECONDS. */
  lifetimeSeconds: number;
  /** Milliseconds since the epoch; tests move it. */
  clock?: () => number;
  /** Told when a background refresh fails (the view in memory stays in use). */
  onRefreshError?: (error: unknown) => void;
}

export interface SigningKeys extends AccessTokenSigner {
  publishedKeys(): Promise<PublishedKeys>;
  refresh(): Promise<void>;
  /** Stops the periodic refresh (the service's close). */
  close(): void;
}

/** The signer of a server: the keys in memory, read as the header says. */
export function createSigningKeys(options: SigningKeysOptions): SigningKeys {
  const { db, issuer } = options;
  const clock = options.clock ?? Date.now;
  const lifetime = Math.min(options.lifetimeSeconds, MAX_ACCESS_TOKEN_LIFETIME_SECONDS);
  let view: { rows: SigningKeyRow[]; readAt: number } | undefined;
  let reading: Promise<void> | undefined;
  let ring: Promise<KeyRing> | undefined;
  const privateKeys = new Map<string, Promise<CryptoKey>>();

  const sealing = () => {
    ring ??= sealingRing(db, options.ring).catch((error) => {
      ring = undefined;
      throw error;
    });
    return ring;
  };

  async function read(): Promise<void> {
    let rows = await db.select().from(signingKeys);
    if (signingKeyOf(rows, clock()) === undefined) {
      await ensureSigningKey(db, await sealing(), new Date(clock()));
      rows = await db.select().from(signingKeys);
    }
    view = { rows, readAt: clock() };
    // Opened here, so that a token never waits on the database for its seal either: the key that
    // signs, and those that will (a failure is the sign's to report, as a 503).
    const now = clock();
    const signer = signingKeyOf(rows, now);
    const next = rows.filter((row) => stateOf(row, now) === 'pending');
    await Promise.all([signer, ...next].map((row) => row && privateKeyOf(row).catch(() => {})));
  }
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  const reread = () => {
    reading ??= read().finally(() => {
      reading = undefined;
    });
    // Every REFRESH_MS from the first read on, whether or not requests come: an idle server's keys
    // are as fresh as a busy one's. Unref'd: it keeps no process alive.
    if (timer === undefined && !closed) {
      timer = setInterval(() => {
        if (view !== undefined && clock() - view.readAt < REFRESH_MS / 2) return;
        reread().catch((error) => options.onRefreshError?.(error));
      }, REFRESH_MS);
      timer.unref();
    }
    return reading;
  };

  /**
   * The view to use now: read first when there is none; else the one in memory, never awaiting the
   * database (a caller may hold the embedded database's one connection in a transaction), read
   * again behind when older than REFRESH_MS (the timer keeps it so while the database answers).
   */
  async function current(): Promise<SigningKeyRow[]> {
    if (view === undefined) await reread();
    else if (clock() - view.readAt > REFRESH_MS) reread().catch((error) => options.onRefreshError?.(error));
    return view!.rows;
  }

  function privateKeyOf(row: SigningKeyRow): Promise<CryptoKey> {
    let key = privateKeys.get(row.kid);
    if (key === undefined) {
      key = (async () => {
        let jwk: JWK;
        try {
          jwk = JSON.parse(open(await sealing(), row.privateSealed, row.kid)) as JWK;
        } catch (error) {
          if (!(error instanceof SealedSecretError)) throw error;
          ring = undefined; // the database's own key may have been made since
          throw serviceUnavailable(
            `The access-token signing key ${row.kid} does not open here (${error.message}): every server must have the same FACTOR_ENCRYPTION_KEY.`,
            error,
          );
        }
        return (await importJWK(jwk, ALGORITHM)) as CryptoKey;
      })();
      const kept = key;
      kept.catch(() => {
        if (privateKeys.get(row.kid) === kept) privateKeys.delete(row.kid);
      });
      privateKeys.set(row.kid, kept);
    }
    return key;
  }

  return {
    async sign(request: AccessTokenRequest): Promise<SignedAccessToken> {
      let rows = await current();
      const now = clock();
      let row = signingKeyOf(rows, now);
      if (row === undefined) {
        await reread();
        rows = view!.rows;
        row = signingKeyOf(rows, now);
      }
      if (row === undefined) throw serviceUnavailable('No access-token signing key is active; try again shortly.');
      const iat = Math.floor(now / 1000);
      // Never past the session's own end: a token outliving its session would be good where the
      // session is not (issue 43's review).
      const end =
        request.notAfter === undefined ? Number.POSITIVE_INFINITY : Math.floor(request.notAfter.getTime() / 1000);
      const exp = Math.max(iat, Math.min(iat + lifetime, end));
      const claims = {
        sid: request.sessionId,
        amr: request.amr,
        aal: request.aal,
        ...(request.actor === undefined ? {} : { act: { sub: request.actor } }),
      };
      const accessToken = await new SignJWT(claims)
        .setProtectedHeader({ alg: ALGORITHM, kid: row.kid, typ: TOKEN_TYPE })
        .setIssuer(issuer)
        .setAudience(request.site)
        .setSubject(request.userId)
        .setIssuedAt(iat)
        .setExpirationTime(exp)
        .sign(await privateKeyOf(row));
      return { accessToken, accessTokenExpiresAt: new Date(exp * 1000) };
    },
    async publishedKeys() {
      const rows = await current();
      return publish(rows, clock());
    },
    async refresh() {
      await reread();
    },
    close() {
      closed = true;
      clearInterval(timer);
    },
  };
}
