// Keys of the deployment for what a copy of the database must not give away (issue 41, F4, F6,
// F10): the Idempotency-Key's fingerprint of a body (a password in it), a phone code's stored
// MAC, the passkey decoys of unknown emails; and the second step's login tickets (issue 57, G7). Each is an HMAC-SHA256 under a key of its own purpose,
// derived with HKDF-SHA256 (RFC 5869, node:crypto's hkdfSync) from each key of
// FACTOR_ENCRYPTION_KEY's ring (on the embedded database, the key it keeps in DATA_DIR/factor-key),
// so that one variable keys the deployment and a key of one purpose says nothing of another.
//
// A stored MAC names the key it was made with (`<key id>.<base64url>`): the ring's first key
// makes new ones, every key of the ring still checks old ones, as secret-box does. PostgreSQL
// without FACTOR_ENCRYPTION_KEY: a key kept in the database (service_keys `deployment`), said at
// start (factors/key-file.ts): the values are then no safer than the database. Once the variable
// is set, that key still checks what it made (id `@db`, which no ring key id can be).
import { createHmac, hkdfSync, randomBytes, timingSafeEqual } from 'node:crypto';
import { eq } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { serviceKeys } from '../db/schema.ts';
import type { KeyRing } from './secret-box.ts';

export type MacPurpose =
  | 'idempotency_fingerprint'
  | 'phone_code'
  | 'login_code'
  | 'passkey_decoy'
  | 'session_successor'
  | 'session_successor_mask'
  | 'session_locator'
  | 'login_ticket';

export interface DeploymentKeys {
  /** The MAC of `message` as it is stored: `<key id>.<base64url>`, under the current key. */
  mac(purpose: MacPurpose, message: string): string;
  /** The MAC's bytes under the current key (for values derived from it, as the passkey decoys). */
  bytes(purpose: MacPurpose, message: string): Buffer;
  /**
   * The MAC's bytes under every key held, the current one first (what another server may have
   * derived); `own` marks the database's own key (service_keys), which a copy of the database gives.
   */
  bytesAll(purpose: MacPurpose, message: string): { bytes: Buffer; own: boolean }[];
  /** Every stored form a MAC of `message` may have: one per key held, the current one first. */
  macs(purpose: MacPurpose, message: string): string[];
  /** Whether `stored` is a MAC of `message` under a key held (compared in constant time). */
  matches(purpose: MacPurpose, message: string, stored: string): boolean;
  /** False when the key is the database's own (PostgreSQL without FACTOR_ENCRYPTION_KEY). */
  external: boolean;
}

/** The id a MAC made with the database's own key carries: `@` is no ring key id's character. */
export const DATABASE_KEY_ID = '@db';
const ROW = 'deployment';

/** The keys from their roots (id → 32 bytes), the first one current. */
export function deploymentKeysFrom(roots: [string, Buffer][], external: boolean): DeploymentKeys {
  const derived = new Map<string, Map<MacPurpose, Buffer>>();
  const keyOf = (id: string, purpose: MacPurpose): Buffer | undefined => {
    const root = roots.find(([rootId]) => rootId === id)?.[1];
    if (root === undefined) return undefined;
    let byPurpose = derived.get(id);
    if (byPurpose === undefined) {
      byPurpose = new Map();
      derived.set(id, byPurpose);
    }
    let key = byPurpose.get(purpose);
    if (key === undefined) {
      key = Buffer.from(hkdfSync('sha256', root, 'user-accounts', `user-accounts ${purpose} v1`, 32));
      byPurpose.set(purpose, key);
    }
    return key;
  };
  const raw = (id: string, purpose: MacPurpose, message: string) =>
    createHmac('sha256', keyOf(id, purpose)!).update(message).digest();
  const current = roots[0]![0];
  return {
    external,
    bytes: (purpose, message) => raw(current, purpose, message),
    bytesAll: (purpose, message) =>
      roots.map(([id]) => ({ bytes: raw(id, purpose, message), own: id === DATABASE_KEY_ID })),
    mac: (purpose, message) => `${current}.${raw(current, purpose, message).toString('base64url')}`,
    macs: (purpose, message) => roots.map(([id]) => `${id}.${raw(id, purpose, message).toString('base64url')}`),
    matches(purpose, message, stored) {
      const dot = stored.indexOf('.');
      const id = stored.slice(0, dot);
      if (dot < 1 || keyOf(id, purpose) === undefined) return false;
      const given = Buffer.from(stored.slice(dot + 1), 'base64url');
      const expected = raw(id, purpose, message);
      return given.length === expected.length && timingSafeEqual(given, expected);
    },
  };
}

const cache = new WeakMap<Db, Map<KeyRing | undefined, Promise<DeploymentKeys>>>();

/**
 * The deployment's keys: from the ring when there is one (with the database's own key, when one
 * was made before, to check what it made); else the database's own, made by the first server that
 * needs it. Kept per database and ring; a failure (the database away) is not kept.
 */
export function deploymentKeysOf(db: Db, ring: KeyRing | undefined): Promise<DeploymentKeys> {
  let byRing = cache.get(db);
  if (byRing === undefined) {
    byRing = new Map();
    cache.set(db, byRing);
  }
  let keys = byRing.get(ring);
  if (keys === undefined) {
    keys = load(db, ring);
    const kept = byRing;
    keys.catch(() => kept.delete(ring));
    byRing.set(ring, keys);
  }
  return keys;
}

/**
 * The database's own key (service_keys `deployment`): made by the first server that needs it when
 * `make` (there is no ring; insert-if-absent, so every server gets the same one), else the one
 * made before, if any. Also the root of the seal of access-token signing keys without a ring
 * (sessions/signing-keys.ts).
 */
export async function databaseKey(db: Db, make: boolean): Promise<Buffer | undefined> {
  if (make) {
    await db
      .insert(serviceKeys)
      .values({ name: ROW, key: randomBytes(32).toString('base64url') })
      .onConflictDoNothing();
  }
  const [row] = await db.select({ key: serviceKeys.key }).from(serviceKeys).where(eq(serviceKeys.name, ROW));
  return row === undefined ? undefined : Buffer.from(row.key, 'base64url');
}

async function load(db: Db, ring: KeyRing | undefined): Promise<DeploymentKeys> {
  const key = await databaseKey(db, ring === undefined);
  const own: [string, Buffer][] = key === undefined ? [] : [[DATABASE_KEY_ID, key]];
  if (ring === undefined) return deploymentKeysFrom(own, false);
  const held = [...ring.keys.entries()].sort(([a], [b]) => (a === ring.current ? -1 : b === ring.current ? 1 : 0));
  return deploymentKeysFrom([...held, ...own], true);
}

/** How long "there is no database key" is believed (a server without the ring may make one). */
const ABSENT_FOR_MS = 10_000;
const ownKeys = new WeakMap<Db, { key: Buffer } | { absentUntil: number }>();

/**
 * databaseKey, kept per database once read: the row is made once and never changed, and every
 * seal and open asked for it (two statements per provider/start, callback, message and webhook
 * secret, issue 59's bench). Its absence (a ring, and no server ever ran without it) is believed
 * for ABSENT_FOR_MS. A failure is not kept.
 */
async function keptDatabaseKey(db: Db, make: boolean): Promise<Buffer | undefined> {
  const kept = ownKeys.get(db);
  if (kept !== undefined && 'key' in kept) return kept.key;
  if (kept !== undefined && !make && kept.absentUntil > Date.now()) return undefined;
  const key = await databaseKey(db, make);
  ownKeys.set(db, key === undefined ? { absentUntil: Date.now() + ABSENT_FOR_MS } : { key });
  return key;
}

/** What is sealed (secret-box) under the ring, or without one under the database's own key derived for it. */
export type SealPurpose =
  | 'signing_key'
  | 'webhook_secret'
  | 'provider_secret'
  | 'provider_flow'
  | 'sender_secret'
  | 'message_body'
  | 'sso_key';

/**
 * The ring that seals and opens values of `purpose` kept in the database (access-token signing
 * keys, webhook signing secrets, providers' client secrets): FACTOR_ENCRYPTION_KEY's, plus the database's own key (derived
 * for this purpose, id `@db`) to open what was sealed without it; without a ring, that key alone,
 * made by the first server that needs it (then no safer than the database: FACTOR_KEY_MISSING).
 */
export async function sealingRingFor(db: Db, ring: KeyRing | undefined, purpose: SealPurpose): Promise<KeyRing> {
  const own = await keptDatabaseKey(db, ring === undefined);
  const keys = new Map(ring?.keys ?? []);
  if (own !== undefined)
    keys.set(DATABASE_KEY_ID, Buffer.from(hkdfSync('sha256', own, 'user-accounts', `user-accounts ${purpose} v1`, 32)));
  return { current: ring?.current ?? DATABASE_KEY_ID, keys };
}

/** Whether a sealed value was sealed by a key of FACTOR_ENCRYPTION_KEY's ring (not the database's own). */
export const sealedByRing = (ring: KeyRing | undefined, sealed: string) =>
  ring !== undefined && ring.keys.has(sealed.split('.')[1] ?? '');
