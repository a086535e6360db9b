// Breached-password screening as the operations use it (issue 30, point 4): the verdict on a new
// password (create, update, reset, import), and the mark a right password earns at verify when
// the breach corpus knows it. The range client itself is breached.ts.
import { and, eq } from 'drizzle-orm';
import { users } from '../db/schema.ts';
import { ApiError, type FieldError } from '../errors.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import { inWrite, type WriteDeps } from '../kernel/unit-of-work.ts';
import { type BreachScreen, createBreachScreen } from './breached.ts';

/** BREACHED_PASSWORDS_*: the screen, and what a corpus that does not answer in time decides. */
export interface BreachedPasswords {
  screen: BreachScreen;
  /** BREACHED_PASSWORDS_FAIL=closed: a new password that cannot be checked is refused (503). */
  failClosed: boolean;
}

export function createBreachedPasswords(config: {
  url: string;
  threshold: number;
  timeoutMs: number;
  failClosed: boolean;
}): BreachedPasswords {
  return {
    screen: createBreachScreen({ url: config.url, threshold: config.threshold, timeoutMs: config.timeoutMs }),
    failClosed: config.failClosed,
  };
}

/** A new password's verdict: `unchecked` when the corpus did not answer and the operator chose open. */
export type Verdict = 'accepted' | 'breached' | 'unavailable' | 'unchecked';

export async function judgeNewPassword(
  breached: BreachedPasswords | undefined,
  password: string,
  site: string,
  signal?: AbortSignal,
): Promise<Verdict> {
  if (breached === undefined) return 'accepted';
  const count = await breached.screen.count(password, site, signal);
  if (count === 'unknown') return breached.failClosed ? 'unavailable' : 'unchecked';
  return count >= breached.screen.threshold ? 'breached' : 'accepted';
}

export const BREACHED_DETAIL = 'This password appears in known data breaches; choose another.';
export const breachedFieldError = (pointer: string): FieldError => ({
  pointer,
  code: 'breached',
  message: 'appears in known data breaches',
});

export const breachedPassword = () =>
  new ApiError('breached', BREACHED_DETAIL, { errors: [breachedFieldError('/password')] });

/** Seconds a client is asked to wait after a 503 breach_check_unavailable: the corpus may be back by then. */
export const BREACH_RETRY_AFTER_SECONDS = 5;
export const breachCheckUnavailable = () =>
  new ApiError(
    'breach_check_unavailable',
    'The password could not be checked against known breaches in time; try again shortly.',
    { headers: { 'Retry-After': String(BREACH_RETRY_AFTER_SECONDS) } },
  );

/**
 * After a right password at verify: looks it up (a cached range answers at once; otherwise one
 * range request, bounded by the timeout and the site's slots) and, when the corpus knows it,
 * marks the account and sends user.password_breached. It runs beside the login, never before its
 * answer: verify is not slowed, nor ever refused, by the corpus (fail-open whatever
 * BREACHED_PASSWORDS_FAIL says). Only the hash that was verified is marked: a password changed
 * meanwhile is not the breached one.
 */
export function markIfBreached(
  breached: BreachedPasswords,
  deps: WriteDeps,
  who: { site: string; actor: string; requestId: string },
  account: { userId: string; passwordHash: string; password: string },
  warn: (error: unknown, message: string) => void,
): Promise<void> {
  return (async () => {
    const count = await breached.screen.count(account.password, who.site);
    if (count === 'unknown' || count < breached.screen.threshold) return;
    await inWrite(
      { site: who.site, actor: who.actor, requestId: who.requestId },
      deps,
      'password_breached',
      { userId: account.userId, status: 200, outcome: 'password breached' },
      async (tx) => {
        const [row] = await tx
          .update(users)
          .set({ passwordBreached: true })
          .where(
            and(
              eq(users.id, account.userId),
              eq(users.passwordHash, account.passwordHash),
              eq(users.passwordBreached, false),
              inReachOf(who.site),
            ),
          )
          .returning({ id: users.id });
        return row;
      },
    );
  })().catch((error: unknown) => warn(error, 'could not mark an account whose password is breached'));
}
