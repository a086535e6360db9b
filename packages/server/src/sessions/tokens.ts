// Session tokens (issue 43): `uas_` and 256 random bits in base64url, stored only as their
// SHA-256. A refresh's successor is derived from the token it replaces, under a deployment key
// (factors/deployment-keys.ts, purpose `session_successor`): whoever holds the old token within
// the grace window recomputes the same successor, so no plaintext is ever stored and every
// concurrent refresh of one token agrees (under whichever held key made it: successorsOf).
import { createHash, randomBytes } from 'node:crypto';
import type { DeploymentKeys } from '../factors/deployment-keys.ts';

/** What every session token starts with: a leaked one is recognisable (secret scanners). */
export const TOKEN_PREFIX = 'uas_';

/** A new session token: the prefix and 256 random bits. */
export const newSessionToken = (): string => `${TOKEN_PREFIX}${randomBytes(32).toString('base64url')}`;

/** What is stored of a token: its SHA-256, base64url. Any string hashes (a malformed one finds nothing). */
export const hashSessionToken = (token: string): string => createHash('sha256').update(token).digest('base64url');

/** The token a refresh of `token` gives: the same on every server and at every retry. */
export const successorOf = (keys: DeploymentKeys, token: string): string =>
  `${TOKEN_PREFIX}${keys.bytes('session_successor', token).toString('base64url')}`;

/**
 * Every token a refresh of `token` may have given: one per deployment key held, the current key's
 * first. While FACTOR_ENCRYPTION_KEY is rotated, servers differ on the current key; a repeated
 * refresh answers whichever of these the session holds (sessions/refresh.ts).
 */
export const successorsOf = (keys: DeploymentKeys, token: string): string[] => [
  ...new Set(keys.bytesAll('session_successor', token).map((k) => `${TOKEN_PREFIX}${k.bytes.toString('base64url')}`)),
];

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
