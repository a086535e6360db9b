import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { hash, verify } from '@node-rs/argon2';
import { dictionary } from '@zxcvbn-ts/language-common';
import { serviceUnavailable } from './errors.ts';
import { readHash } from './hashes/foreign.ts';

/** argon2id's cost: memory in KiB, passes, lanes. */
export interface Argon2Params {
  memoryCost: number;
  timeCost: number;
  parallelism: number;
}

// OWASP's argon2id baseline: m=19 MiB, t=2, p=1.
export const DEFAULT_PASSWORD_HASH = 'argon2id:m=19456,t=2,p=1';

/**
 * PASSWORD_HASH, `argon2id:m=KiB,t=passes,p=lanes`. Below OWASP's minimum (its equivalent
 * configurations run from m=47104,t=1 to m=7168,t=5: at least 7 MiB and m·t ≥ 35,840) is refused.
 */
export function parsePasswordHash(raw: string): Argon2Params | Error {
  const match = /^argon2id:m=(\d{1,8}),t=(\d{1,3}),p=(\d{1,3})$/.exec(raw);
  if (match === null) return new Error(`must look like ${DEFAULT_PASSWORD_HASH} (got "${raw}")`);
  const [memoryCost, timeCost, parallelism] = match.slice(1).map(Number) as [number, number, number];
  if (
    memoryCost < 7168 ||
    memoryCost * timeCost < 35_840 ||
    timeCost < 1 ||
    parallelism < 1 ||
    memoryCost > 4_194_304
  ) {
    return new Error(
      `is below OWASP's minimum for argon2id (at least m=7168 and m×t ≥ 35840, e.g. ${DEFAULT_PASSWORD_HASH}) (got "${raw}")`,
    );
  }
  return { memoryCost, timeCost, parallelism };
}

const phcPrefix = (p: Argon2Params) => `$argon2id$v=19$m=${p.memoryCost},t=${p.timeCost},p=${p.parallelism}$`;

export interface PasswordHasher {
  /**
   * The argon2id PHC string of `password`, computed for `site` (the token's). Rejects with 503
   * when no slot is free and the site may not wait (see createPasswordHasher).
   */
  hash(password: string, site: string): Promise<string>;
  /**
   * Whether `password` matches the stored hash (ours, or one `import` took: see hashes/foreign.ts),
   * in the same slots as hashing. Without a
   * stored hash (no such account), it verifies against a stand-in hash and says no, taking as long.
   */
  verify(stored: string | undefined, password: string, site: string): Promise<boolean>;
  /** Whether a stored hash was made otherwise than new hashes are now (replaced at a successful verify). */
  needsRehash(stored: string): boolean;
  /** Hashes computed at once (HASH_CONCURRENCY). */
  readonly concurrency: number;
  /** Hashes running and waiting now, every site together. */
  readonly load: { running: number; waiting: number };
}

export interface HasherOptions {
  /** Hashes computed at once; each holds 19 MiB. Default: the number of cores. */
  concurrency?: number;
  /** Hashes allowed to wait for a slot, every site together (the waiting room). */
  maxWaiting?: number;
  /** Told how long each hash took (its wait for a slot excluded), for the metrics. */
  onHashed?: (seconds: number) => void;
  /** The cost of new hashes (PASSWORD_HASH); default OWASP's baseline. */
  params?: Argon2Params;
}

/**
 * argon2id on libuv's thread pool, never on the event loop, with a bounded number in flight so a
 * flood of creates cannot exhaust memory or starve reads of CPU.
 *
 * The slots are shared by every site of the deployment, so they are shared fairly: each site
 * waits in a queue of its own (first come, first served), and a freed slot goes to the sites in
 * turn. The waiting room is shared too; when it is full, a site with fewer hashes waiting than
 * the busiest site still gets in, and the busiest site's newest waiting hash is refused instead
 * (longest queue drop). A flooding site thus fills the room only while no one else needs it.
 */
export function createPasswordHasher(options: HasherOptions = {}): PasswordHasher {
  const concurrency = options.concurrency ?? availableParallelism();
  // Algorithm 2 is argon2id in @node-rs/argon2.
  const argon2id = {
    algorithm: 2,
    ...(options.params ?? (parsePasswordHash(DEFAULT_PASSWORD_HASH) as Argon2Params)),
  } as const;
  const prefix = phcPrefix(argon2id);
  // The hash an unknown account is checked against, made with the current parameters.
  let standIn: Promise<string> | undefined;
  const maxWaiting = options.maxWaiting ?? 64;
  let running = 0;
  let waiting = 0;
  // The sites with hashes waiting, in the order they are served next: a served site moves to the end.
  const queues = new Map<string, { resolve(): void; reject(error: unknown): void }[]>();
  const saturated = () => serviceUnavailable('Too many password hashes in progress; try again shortly.');

  /** Resolves once the hash may run; rejects with 503 when it may not wait. */
  const slot = (site: string): Promise<void> => {
    // A free slot means no one waits: release() hands each freed slot to a waiting hash first.
    if (running < concurrency) {
      running++;
      return Promise.resolve();
    }
    const mine = queues.get(site)?.length ?? 0;
    if (waiting >= maxWaiting) {
      let busiest: [string, { reject(error: unknown): void }[]] | undefined;
      for (const entry of queues) if (busiest === undefined || entry[1].length > busiest[1].length) busiest = entry;
      if (busiest === undefined || busiest[1].length <= mine) return Promise.reject(saturated());
      busiest[1].pop()!.reject(saturated());
      waiting--;
      if (busiest[1].length === 0) queues.delete(busiest[0]);
    }
    return new Promise<void>((resolve, reject) => {
      const queue = queues.get(site);
      if (queue === undefined) queues.set(site, [{ resolve, reject }]);
      else queue.push({ resolve, reject });
      waiting++;
    });
  };

  const release = () => {
    for (const [site, queue] of queues) {
      const next = queue.shift()!;
      queues.delete(site);
      if (queue.length > 0) queues.set(site, queue);
      waiting--;
      next.resolve(); // the slot passes on: running stays as it is
      return;
    }
    running--;
  };

  /** `work` (one argon2 computation) in `site`'s turn, holding a slot while it runs. */
  const inTurn = async <T>(site: string, work: () => Promise<T>): Promise<T> => {
    await slot(site);
    const started = performance.now();
    try {
      return await work();
    } finally {
      options.onHashed?.((performance.now() - started) / 1000);
      release();
    }
  };

  return {
    concurrency,
    get load() {
      return { running, waiting };
    },
    hash: (password, site) => inTurn(site, () => hash(password.normalize('NFC'), argon2id)),
    verify: (stored, password, site) =>
      inTurn(site, async () => {
        if (stored === undefined) {
          standIn ??= hash(randomBytes(16).toString('hex'), argon2id);
          // As many checks as for an account: a second for a password sent unnormalized.
          await verify(await standIn, password.normalize('NFC')).catch(() => false);
          if (password.normalize('NFC') !== password) await verify(await standIn, password).catch(() => false);
          return false;
        }
        const normalized = password.normalize('NFC');
        // An argon2 hash is ours or was bounded by the import; ours may cost more than its limits.
        const check = stored.startsWith('$argon2')
          ? (given: Buffer) => verify(stored, given).catch(() => false)
          : readHash(stored);
        if (typeof check === 'string') return false;
        // A hash the import accepted that its algorithm still refuses (a parameter its library
        // will not run) is a wrong password, not a 500: that account cannot sign in.
        const safely = (given: Buffer) => check(given).catch(() => false);
        if (await safely(Buffer.from(normalized))) return true;
        // Another system may have hashed the password as it was typed, without normalizing it.
        return normalized !== password && safely(Buffer.from(password));
      }),
    needsRehash: (stored) => !stored.startsWith(prefix),
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
