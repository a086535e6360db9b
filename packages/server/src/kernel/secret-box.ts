// Second-factor secrets at rest (issue 29): AES-256-GCM under a key from the configuration
// (FACTOR_ENCRYPTION_KEY). A stored secret names the key that sealed it, so keys rotate without a
// migration: the first key of the ring seals every new secret, the others are kept for reading
// until no row names them. The factor's id is the GCM additional data: a sealed secret copied onto
// another factor's row does not open there.
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';

/** Keys by id; `current` seals, every one opens. */
export interface KeyRing {
  current: string;
  keys: ReadonlyMap<string, Buffer>;
}

const FORMAT = 'v1';
const KEY_ID = /^[A-Za-z0-9_-]{1,32}$/;

/**
 * `id:base64,id:base64,…` (each key 32 bytes, base64 or base64url); the first seals. An Error
 * saying what is wrong, never echoing a key.
 */
export function parseKeyRing(raw: string): KeyRing | Error {
  const entries = raw.split(',').map((e) => e.trim());
  const keys = new Map<string, Buffer>();
  for (const [i, entry] of entries.entries()) {
    const colon = entry.indexOf(':');
    const id = entry.slice(0, colon);
    const key = Buffer.from(entry.slice(colon + 1), 'base64');
    if (colon < 1 || !KEY_ID.test(id))
      return new Error(`entry ${i + 1} must be ID:KEY with an ID of letters, digits, _ or -`);
    if (key.length !== 32)
      return new Error(`entry ${i + 1}'s key must be 32 bytes in base64 (openssl rand -base64 32)`);
    if (keys.has(id)) return new Error(`entry ${i + 1} repeats the key id ${id}`);
    keys.set(id, key);
  }
  return { current: entries[0]!.slice(0, entries[0]!.indexOf(':')), keys };
}

/** A ring of one new random key, as the embedded development setup mints it. */
export function mintKeyRingText(id = 'dev'): string {
  return `${id}:${randomBytes(32).toString('base64')}`;
}

/** `v1.<key id>.<iv>.<ciphertext+tag>` (base64url), bound to `context` (the factor's id). */
export function seal(ring: KeyRing, plaintext: string, context: string): string {
  const iv = randomBytes(12);
  const cipher = createCipheriv('aes-256-gcm', ring.keys.get(ring.current)!, iv);
  cipher.setAAD(Buffer.from(context));
  const body = Buffer.concat([cipher.update(plaintext, 'utf8'), cipher.final(), cipher.getAuthTag()]);
  return [FORMAT, ring.current, iv.toString('base64url'), body.toString('base64url')].join('.');
}

/** Thrown when a sealed secret names a key the ring lacks, or does not open (tampered, other context). */
export class SealedSecretError extends Error {
  override name = 'SealedSecretError';
}

export function open(ring: KeyRing, sealed: string, context: string): string {
  const [format, id, iv, body] = sealed.split('.');
  if (format !== FORMAT || id === undefined || iv === undefined || body === undefined)
    throw new SealedSecretError('not a sealed secret');
  const key = ring.keys.get(id);
  if (key === undefined)
    throw new SealedSecretError(`sealed with key "${id}", which FACTOR_ENCRYPTION_KEY no longer lists`);
  const bytes = Buffer.from(body, 'base64url');
  const decipher = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  decipher.setAAD(Buffer.from(context));
  decipher.setAuthTag(bytes.subarray(bytes.length - 16));
  try {
    return Buffer.concat([decipher.update(bytes.subarray(0, bytes.length - 16)), decipher.final()]).toString('utf8');
  } catch {
    throw new SealedSecretError(`the secret sealed with key "${id}" does not open`);
  }
}
