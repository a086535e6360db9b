// Session tokens (issue 43): `uas_` and 256 random bits in base64url, stored only as their
// SHA-256. A refresh's successor is derived from the token it replaces, under a deployment key
// (kernel/deployment-keys.ts, purpose `session_successor`): whoever holds the old token within
// the grace window recomputes the same successor, so no plaintext is ever stored and every
// concurrent refresh of one token agrees (under whichever held key made it: successorsOf).
//
// A successor also carries its session (issue 57, G3): its first 16 bytes are an AES-256 block,
// under a key of the deployment's (purpose `session_locator`), of the session's family (12 random
// bytes, sessions.token_family) and the token's generation (the refreshes before it); its last 16
// are the HMAC's first. A replaced token then finds its session, and says it is older than the
// current one, however many refreshes back it was replaced, with nothing kept per replaced
// token; the block cannot be made or changed without the key, and opened gives away only which
// session and generation (nothing of the token's other 128 bits).
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';
import type { DeploymentKeys } from '../kernel/deployment-keys.ts';

/** What every session token starts with: a leaked one is recognisable (secret scanners). */
export const TOKEN_PREFIX = 'uas_';

/** A new session token: the prefix and 256 random bits. */
export const newSessionToken = (): string => `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;

/** What is stored of a token: its SHA-256, base64url. Any string hashes (a malformed one finds nothing). */
export const hashSessionToken = (token: string): string => createHash('sha256').update(token).digest('base64url');

/** Where a successor says it belongs: its session's family and its own generation. */
export interface Locator {
  family: string;
  generation: number;
}

/** A new session's family (at its first refresh): 12 random bytes, base64url. */
export const newTokenFamily = (): string => randomBytes(12).toString('base64url');

/** The AES-256 key of locators under each deployment key held, the current one first. */
const blockKeys = (keys: DeploymentKeys): Buffer[] => keys.bytesAll('session_locator', 'aes-256').map((k) => k.bytes);

function sealLocator(key: Buffer, at: Locator): Buffer {
  const block = Buffer.alloc(16);
  Buffer.from(at.family, 'base64url').copy(block, 0, 0, 12);
  block.writeUInt32BE(at.generation, 12);
  const cipher = createCipheriv('aes-256-ecb', key, null).setAutoPadding(false);
  return Buffer.concat([cipher.update(block), cipher.final()]);
}

function openLocator(key: Buffer, sealed: Buffer): Locator {
  const decipher = createDecipheriv('aes-256-ecb', key, null).setAutoPadding(false);
  const block = Buffer.concat([decipher.update(sealed), decipher.final()]);
  return { family: block.subarray(0, 12).toString('base64url'), generation: block.readUInt32BE(12) };
}

const TOKEN = /^uas_[A-Za-z0-9_-]{43}$/;

/**
 * What `token` would say of its session under each key held (a token of ours opens to its own
 * under the key that made it, any other string to noise no session has), or none for a string
 * that is not a token's shape.
 */
export const locatorsOf = (keys: DeploymentKeys, token: string): Locator[] => {
  if (!TOKEN.test(token)) return [];
  const sealed = Buffer.from(token.slice(TOKEN_PREFIX.length), 'base64url').subarray(0, 16);
  return blockKeys(keys).map((key) => openLocator(key, sealed));
};

/** Whether `token` carries this locator (under a key held here). */
export const carries = (keys: DeploymentKeys, token: string, at: Locator): boolean =>
  locatorsOf(keys, token).some((l) => l.family === at.family && l.generation === at.generation);

/**
 * Every token a refresh of `token` may have given: one per deployment key held, the current key's
 * first, each carrying `at` (the session's family and the successor's generation). While
 * FACTOR_ENCRYPTION_KEY is rotated, servers differ on the current key; a repeated refresh answers
 * whichever of these the session holds (sessions/refresh.ts). Without `at`, the successors made
 * before locators (issue 43's: the whole HMAC), which a refresh within the grace of a token
 * replaced then may still be answered.
 */
export const successorsOf = (keys: DeploymentKeys, token: string, at?: Locator): string[] => {
  const macs = keys.bytesAll('session_successor', token).map((k) => k.bytes);
  if (at === undefined) return [...new Set(macs.map((mac) => `${TOKEN_PREFIX}${mac.toString('base64url')}`))];
  const blocks = blockKeys(keys);
  return [
    ...new Set(
      macs.map(
        (mac, i) =>
          `${TOKEN_PREFIX}${Buffer.concat([sealLocator(blocks[i]!, at), mac.subarray(0, 16)]).toString('base64url')}`,
      ),
    ),
  ];
};

const xor = (a: Buffer, b: Buffer): Buffer => Buffer.from(a.map((byte, i) => byte ^ b[i]!));

/**
 * `successor` hidden for a server that cannot derive it (it lacks the current key of the server
 * that made it): XOR an HMAC of `token` under each key held, `.`-joined; beside a ring, never under
 * the database's own key (a copy of the database gives that one). Without `token` and one of those
 * keys, the masks say nothing of the successor: no more than its derivation already gives away.
 */
export const maskSuccessor = (keys: DeploymentKeys, token: string, successor: string): string => {
  const raw = Buffer.from(successor.slice(TOKEN_PREFIX.length), 'base64url');
  return keys
    .bytesAll('session_successor_mask', token)
    .filter((k) => !(k.own && keys.external))
    .map((k) => xor(raw, k.bytes).toString('base64url'))
    .join('.');
};

/** The successors `masks` (maskSuccessor's) hide, as far as the keys held here unmask them. */
export const unmaskSuccessors = (keys: DeploymentKeys, token: string, masks: string): string[] => {
  const pads = keys.bytesAll('session_successor_mask', token).map((k) => k.bytes);
  return masks
    .split('.')
    .map((m) => Buffer.from(m, 'base64url'))
    .filter((m) => m.length === 32)
    .flatMap((m) => pads.map((pad) => `${TOKEN_PREFIX}${xor(m, pad).toString('base64url')}`));
};
