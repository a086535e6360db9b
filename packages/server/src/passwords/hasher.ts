import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { hash, verify } from '@node-rs/argon2';
import { context, type Tracer, trace } from '@opentelemetry/api';
import { dictionary } from '@zxcvbn-ts/language-common';
import { serviceUnavailable } from '../errors.ts';
import { createFairLane, type FairLane } from '../limits/fair-lane.ts';
import { inSpan } from '../tracing.ts';
import { createCostlyChecker } from './costly-check.ts';
import { argon2Cost, checkPassword, type HashCost, hashCost } from './foreign.ts';

/** An argon2id hash's memory (KiB) and passes. */
const ARGON2ID_COST = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),p=\d+\$/;

/** argon2id's cost: memory in KiB, passes, lanes. */
export interface Argon2Params {
  memoryCost: number;
  timeCost: number;
  parallelism: number;
}

// OWASP's argon2id baseline: m=19 MiB, t=2, p=1.
export const DEFAULT_PASSWORD_HASH = 'argon2id:m=19456,t=2,p=1';
/**
 * The cost of new hashes under PASSWORD_HASH_PROFILE=test (test suites only; a production start
 * refuses it): still argon2id in the same PHC format, at about 0.5 ms rather than 25–80 ms.
 */
export const TEST_PASSWORD_HASH = 'argon2id:m=1024,t=1,p=1';

/**
 * PASSWORD_HASH, `argon2id:m=KiB,t=passes,p=lanes`. Below OWASP's minimum (its equivalent
 * configurations run from m=47104,t=1 to m=7168,t=5: at least 7 MiB and m·t ≥ 35,840) is refused.
 */
export function parsePasswordHash(raw: string, { floor = true } = {}): Argon2Params | Error {
  const match = /^argon2id:m=(\d{1,8}),t=(\d{1,3}),p=(\d{1,3})$/.exec(raw);
  if (match === null) return new Error(`must look like ${DEFAULT_PASSWORD_HASH} (got "${raw}")`);
  const [memoryCost, timeCost, parallelism] = match.slice(1).map(Number) as [number, number, number];
  // Without the floor (the test profile's own cost): argon2's own minimum, 8 KiB per lane.
  if (!floor) {
    const fine = timeCost >= 1 && parallelism >= 1 && memoryCost >= 8 * parallelism && memoryCost <= 4_194_304;
    return fine ? { memoryCost, timeCost, parallelism } : new Error(`is not a valid argon2id cost (got "${raw}")`);
  }
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
   * when no slot is free and the site may not wait (see createPasswordHasher), and with
   * `signal`'s reason when it aborts before a slot is free (the request is gone).
   */
  hash(password: string, site: string, signal?: AbortSignal): Promise<string>;
  /**
   * Whether `password` matches the stored hash (ours, or one `import` took: see passwords/foreign.ts),
   * in the same slots as hashing, or in the costly lane for a hash that costs far more than ours.
   * Without a stored hash (no such account), it verifies against a stand-in hash and says no,
   * taking as long as for one of ours.
   */
  verify(stored: string | undefined, password: string, site: string, signal?: AbortSignal): Promise<boolean>;
  /** Whether a stored hash was made otherwise than new hashes are now (replaced at a successful verify). */
  needsRehash(stored: string): boolean;
  /**
   * Whether checking `stored` costs much more than one of ours (COSTLY_FACTOR): such a check runs
   * in the costly lane, in a process killed when its request is gone, and a check that runs out of
   * time counts as a failed guess (accounts/verify.ts).
   */
  isCostly(stored: string): boolean;
  /** Ends what the hasher keeps running between checks (the costly lane's idle process). */
  close(): void;
  /** Hashes computed at once in the shared lane (HASH_CONCURRENCY). */
  readonly concurrency: number;
  /** Hashes running and waiting now, every site and both lanes together. */
  readonly load: { running: number; waiting: number };
}

/**
 * A hash costs "much more" than the server's own when checking it is estimated to take more than
 * this many times the CPU of a PASSWORD_HASH hash, or more than twice its memory: such hashes
 * (imported from another system) are checked in a lane of their own. The spec states it.
 */
export const COSTLY_FACTOR = 8;

export interface HasherOptions {
  /** Hashes computed at once in the shared lane; each holds PASSWORD_HASH's memory. Default: the number of cores. */
  concurrency?: number;
  /** Hashes allowed to wait for a slot, every site together (the waiting room). */
  maxWaiting?: number;
  /** Costly hashes (see COSTLY_FACTOR) checked at once, in a lane of their own. Default 1. */
  costlyConcurrency?: number;
  /** Costly hashes allowed to wait, every site together. Default 16. */
  costlyMaxWaiting?: number;
  /** Told how long each hash took (its wait for a slot excluded), for the metrics. */
  onHashed?: (seconds: number) => void;
  /** The cost of new hashes (PASSWORD_HASH); default OWASP's baseline. */
  params?: Argon2Params;
  /**
   * The cost an imported hash is compared with to choose its lane (COSTLY_FACTOR); default
   * `params`. The test profile hashes far more cheaply than production but keeps OWASP's baseline
   * here, so that every imported hash takes the lane it takes in production.
   */
  costReference?: Argon2Params;
  /** When tracing is on: a span per hash or check in a traced request, its run a child span. */
  tracer?: Tracer;
}

/**
 * argon2id on libuv's thread pool, never on the event loop, with a bounded number in flight so a
 * flood of creates cannot exhaust memory or starve reads of CPU.
 *
 * The slots are shared by every site of the deployment, so they are shared fairly, by time (see
 * limits/fair-lane.ts): a freed slot goes to the waiting site that used the least hashing time
 * lately. The waiting room is shared too; when it is full, a site with fewer hashes waiting than
 * the busiest site still gets in, and the busiest site's newest waiting hash is refused instead
 * (longest queue drop). A hash whose request is gone before its turn never runs.
 *
 * An imported hash may cost far more than ours (bcrypt 16 takes seconds; an argon2id of 128 MiB
 * holds that much memory): those are checked in a costly lane of their own, so that they can
 * never take the shared slots, and the memory they hold is bounded by its size.
 */
export function createPasswordHasher(options: HasherOptions = {}): PasswordHasher {
  const concurrency = options.concurrency ?? availableParallelism();
  // Algorithm 2 is argon2id in @node-rs/argon2.
  const argon2id = {
    algorithm: 2,
    ...(options.params ?? (parsePasswordHash(DEFAULT_PASSWORD_HASH) as Argon2Params)),
  } as const;
  const prefix = phcPrefix(argon2id);
  const own = argon2Cost(argon2id.memoryCost, argon2id.timeCost);
  const reference =
    options.costReference === undefined
      ? own
      : argon2Cost(options.costReference.memoryCost, options.costReference.timeCost);
  const costly = (cost: HashCost) =>
    cost.cpuMs > COSTLY_FACTOR * reference.cpuMs || cost.memoryBytes > 2 * reference.memoryBytes;
  // The hash an unknown account is checked against, made with the current parameters.
  let standIn: Promise<string> | undefined;
  const saturated = () => serviceUnavailable('Too many password hashes in progress; try again shortly.');
  const shared = createFairLane({ slots: concurrency, maxWaiting: options.maxWaiting ?? 64, saturated });
  const costlyLane = createFairLane({
    slots: options.costlyConcurrency ?? 1,
    maxWaiting: options.costlyMaxWaiting ?? 16,
    saturated,
  });
  // A costly check runs in a process of its own, killed when its request is gone: its core is free
  // at once, where a check on the thread pool would run on for seconds past the deadline.
  const costlyChecks = createCostlyChecker({
    maxIdle: options.costlyConcurrency ?? 1,
    failed: () => serviceUnavailable('The password check did not complete; try again shortly.'),
  });
  const isCostly = (stored: string) => costly(hashCost(stored) ?? own);

  /** `work` (one password check or hash) in `site`'s turn of `lane`, timed for the metrics. */
  const plainTurn = <T>(
    _what: 'hash' | 'verify',
    lane: FairLane,
    site: string,
    estimateMs: number,
    work: () => Promise<T>,
    signal?: AbortSignal,
  ) =>
    lane.run(
      site,
      estimateMs,
      async () => {
        const started = performance.now();
        try {
          return await work();
        } finally {
          options.onHashed?.((performance.now() - started) / 1000);
        }
      },
      signal,
    );
  const tracer = options.tracer;
  // Chosen once: without tracing, a hash takes the plain path and nothing of OpenTelemetry runs.
  // With it, `password hash` (or `verify`) spans the wait for a slot and the run, and its child
  // `… run` the run alone. The slot may come free in another request's context: the parents are
  // explicit.
  const inTurn: typeof plainTurn =
    tracer === undefined
      ? plainTurn
      : (what, lane, site, estimateMs, work, signal) => {
          const parent = context.active();
          if (trace.getSpan(parent) === undefined) return plainTurn(what, lane, site, estimateMs, work, signal);
          const queued = performance.now();
          const attributes = { 'user_accounts.hash.lane': lane === shared ? 'shared' : 'costly' };
          return inSpan(tracer, `password ${what}`, parent, attributes, (span) =>
            plainTurn(
              what,
              lane,
              site,
              estimateMs,
              () => {
                span.setAttribute('user_accounts.hash.wait_ms', Math.round((performance.now() - queued) * 100) / 100);
                return inSpan(tracer, `password ${what} run`, trace.setSpan(parent, span), {}, work);
              },
              signal,
            ),
          );
        };

  return {
    concurrency,
    get load() {
      const [a, b] = [shared.load, costlyLane.load];
      return { running: a.running + b.running, waiting: a.waiting + b.waiting };
    },
    hash: (password, site, signal) =>
      inTurn('hash', shared, site, own.cpuMs, () => hash(password.normalize('NFC'), argon2id), signal),
    verify(stored, password, site, signal) {
      if (stored === undefined) {
        return inTurn(
          'verify',
          shared,
          site,
          own.cpuMs,
          async () => {
            standIn ??= hash(randomBytes(16).toString('hex'), argon2id);
            // As many checks as for an account: a second for a password sent unnormalized.
            await verify(await standIn, password.normalize('NFC')).catch(() => false);
            if (password.normalize('NFC') !== password) await verify(await standIn, password).catch(() => false);
            return false;
          },
          signal,
        );
      }
      const cost = hashCost(stored) ?? own;
      if (!costly(cost))
        return inTurn('verify', shared, site, cost.cpuMs, () => checkPassword(stored, password), signal);
      return inTurn('verify', costlyLane, site, cost.cpuMs, () => costlyChecks.check(stored, password, signal), signal);
    },
    isCostly,
    // Never down: an argon2id hash costing at least as much in memory and in passes stays, so a
    // server set cheaper (the test profile pointed at a real database) cannot weaken real hashes.
    needsRehash: (stored) => {
      if (stored.startsWith(prefix)) return false;
      const m = ARGON2ID_COST.exec(stored);
      return m === null || Number(m[1]) < argon2id.memoryCost || Number(m[2]) < argon2id.timeCost;
    },
    close: () => costlyChecks.close(),
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
