// Session tokens (issue 43): `uas_` and 256 random bits in base64url, stored only as their
// SHA-256. A refresh's successor is derived from the token it replaces, under a deployment key
// (factors/deployment-keys.ts, purpose `session_successor`): whoever holds the old token within
// the grace window recomputes the same successor, so no plaintext is ever stored and every
// concurrent refresh of one token agrees.
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
