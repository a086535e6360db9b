// Where the keys of second-factor secrets come from, for the server and the CLI alike (the CLI's
// import seals imported TOTP secrets, and must seal them with the key the server will open them with).
import { existsSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { type KeyRing, mintKeyRingText, parseKeyRing } from '../kernel/secret-box.ts';

/** Said at start on PostgreSQL without the key: what is unavailable, and what mends it. */
export const FACTOR_KEY_MISSING =
  'FACTOR_ENCRYPTION_KEY is not set: second factors are unavailable on this server until it restarts with the key ' +
  '(factor/totp, factor/confirm, factor/verify with a code, and import rows with a totp secret answer 503 ' +
  'factors_not_configured; passwords, passkeys and everything else work); and Idempotency-Key fingerprints, phone codes, ' +
  'passkey decoys and login tickets are keyed, and the private keys signing access tokens, the webhook signing ' +
  "secrets and the sign-in providers' client secrets sealed, by a key kept in the database, which a copy of it gives away";

/** The key file cannot be used: the server refuses to start, the CLI to run. */
export class FactorKeyFileError extends Error {
  override name = 'FactorKeyFileError';
}

/**
 * FACTOR_ENCRYPTION_KEY; else, on the embedded database, a key of its own kept beside it in
 * `DATA_DIR/factor-key` (mode 0600, minted at the first start, as the dev token is: the folder is
 * one machine's development data, and its copy goes with the database); else none, said once
 * (`warn`): PostgreSQL serves many servers, and a key minted by one would not open another's
 * secrets, so factor operations answer 503 until the operator sets it. The same keys key the
 * deployment's HMACs (deployment-keys.ts), which without them use a key kept in the database.
 */
export function factorKeysFor(
  config: { factorKeys?: KeyRing | undefined; dataDir: string },
  kind: 'pglite' | 'postgres',
  warn: (message: string) => void,
): KeyRing | undefined {
  if (config.factorKeys !== undefined) return config.factorKeys;
  if (kind !== 'pglite') {
    warn(FACTOR_KEY_MISSING);
    return undefined;
  }
  const file = join(config.dataDir, 'factor-key');
  if (!existsSync(file)) writeFileSync(file, `${mintKeyRingText('dev')}\n`, { mode: 0o600, flag: 'wx' });
  // Not unsafeSecretFile's remedy ("remove it"): without this key the factors' secrets are lost.
  if ((statSync(file).mode & 0o077) !== 0)
    throw new FactorKeyFileError(`${file} holds the key of second-factor secrets and others can read it: chmod 600 it`);
  const ring = parseKeyRing(readFileSync(file, 'utf8').trim());
  if (ring instanceof Error) throw new FactorKeyFileError(`${file}: ${ring.message}`);
  return ring;
}
