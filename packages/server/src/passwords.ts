import { availableParallelism } from 'node:os';
import { hash } from '@node-rs/argon2';
import { dictionary } from '@zxcvbn-ts/language-common';
import { serviceUnavailable } from './errors.ts';

// OWASP's argon2id baseline: m=19 MiB, t=2, p=1. Algorithm 2 is Argon2id in @node-rs/argon2.
const ARGON2ID = { algorithm: 2, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const;

export interface PasswordHasher {
  /** The argon2id PHC string of `password`; rejects with 503 when too many hashes wait. */
  hash(password: string): Promise<string>;
  /** Hashes running and waiting now. */
  readonly load: { running: number; waiting: number };
}

export interface HasherOptions {
  /** Hashes computed at once; each holds 19 MiB. Default: the number of cores. */
  concurrency?: number;
  /** Hashes allowed to wait for a slot before new ones get 503. */
  maxWaiting?: number;
  /** Told how long each hash took (its wait for a slot excluded), for the metrics. */
  onHashed?: (seconds: number) => void;
}

/**
 * argon2id on libuv's thread pool, never on the event loop, with a bounded number in flight so a
 * flood of creates cannot exhaust memory or starve reads of CPU.
 */
export function createPasswordHasher(options: HasherOptions = {}): PasswordHasher {
  const concurrency = options.concurrency ?? availableParallelism();
  const maxWaiting = options.maxWaiting ?? 64;
  let running = 0;
  const waiting: (() => void)[] = [];

  const release = () => {
    const next = waiting.shift();
    if (next) next();
    else running--;
  };

  return {
    get load() {
      return { running, waiting: waiting.length };
    },
    async hash(password) {
      if (running < concurrency) running++;
      else if (waiting.length < maxWaiting) await new Promise<void>((r) => waiting.push(r));
      else throw serviceUnavailable('Too many password hashes in progress; try again shortly.');
      const started = performance.now();
      try {
        return await hash(password.normalize('NFC'), ARGON2ID);
      } finally {
        options.onHashed?.((performance.now() - started) / 1000);
        release();
      }
    },
  };
}

// zxcvbn's list of the ~30,000 most common passwords, by frequency (the contract asks for ≥ 10,000).
const COMMON = new Set(dictionary['passwords-common']);

/** Why a password is refused, or undefined when it may be used. Compares ignoring case. */
export function weakPasswordReason(password: string, context: { email?: string; name?: string }): string | undefined {
  const folded = password.normalize('NFC').toLowerCase();
  if (COMMON.has(folded)) return 'is too common';
  if (context.email !== undefined && folded === context.email.normalize('NFC').toLowerCase()) {
    return 'must not be the email';
  }
  if (context.name !== undefined && folded === context.name.normalize('NFC').toLowerCase()) {
    return 'must not be the name';
  }
  return undefined;
}
