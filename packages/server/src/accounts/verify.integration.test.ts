// verify as a function of a write scope, with no HTTP around it: the embedded database, the real
// hasher and the database lockout.
import { randomBytes } from 'node:crypto';
import { hash as bcryptHash } from '@node-rs/bcrypt';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { addressKey } from '../auth/failed-authentications.ts';
import type { Database } from '../db/client.ts';
import { auditLog, users } from '../db/schema.ts';
import { ApiError } from '../errors.ts';
import { uuidv7 } from '../kernel/ids.ts';
import type { WriteScope } from '../kernel/unit-of-work.ts';
import { databaseLockout, lockoutKey } from '../limits/lockout.ts';
import { createPasswordHasher } from '../passwords/hasher.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { type VerifyDeps, verifyPassword } from './verify.ts';

let database: Database;
let deps: VerifyDeps;
const scope = (requestId: string): WriteScope => ({ site: 'default', actor: 'job', requestId });
const PASSWORD = 'Verify-unit-password-34';
const lock = { limit: 2, windowSeconds: 60, lockSeconds: 60, maxLockSeconds: 60 };

beforeAll(async () => {
  database = await openMigratedPglite();
  deps = {
    db: database.db,
    hasher: createPasswordHasher({ concurrency: 1 }),
    lockout: databaseLockout(database.db),
    verifyLimits: { identifier: lock, address: { ...lock, limit: 100 } },
    warn: () => {},
  };
}, 60_000);
afterAll(async () => {
  deps?.hasher.close();
  await database?.close();
});

async function account(disabled = false): Promise<{ id: string; email: string }> {
  const id = uuidv7();
  const email = `${id}@example.com`;
  const passwordHash = await deps.hasher.hash(PASSWORD, 'default');
  await database.db
    .insert(users)
    .values({ id, site: 'default', email, name: 'V', passwordHash, disabled, origin: 'api' });
  return { id, email };
}

const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => (error instanceof ApiError ? { status: error.status, code: error.code } : error),
  );

describe('verifyPassword', () => {
  it('answers the account of a right password, and audits the success under the scope', async () => {
    const { id, email } = await account();
    const request = { email, password: PASSWORD, sent: PASSWORD };
    expect((await verifyPassword(scope('v-ok'), deps, request)).userId).toBe(id);
    const rows = await database.db.select().from(auditLog).where(eq(auditLog.requestId, 'v-ok'));
    expect(rows).toEqual([
      expect.objectContaining({
        operation: 'verify',
        userId: id,
        tokenId: 'job',
        status: 200,
        outcome: 'password verified',
      }),
    ]);
  });

  it('refuses a wrong password and an unknown account alike, then locks the identifier', async () => {
    const { id } = await account();
    const wrong = { _userId: id, password: 'Not-the-password-1', sent: 'Not-the-password-1' };
    expect(await refusal(verifyPassword(scope('v-wrong'), deps, wrong))).toEqual({
      status: 422,
      code: 'invalid_credentials',
    });
    const unknown = { email: 'nobody.34@example.com', password: PASSWORD, sent: PASSWORD };
    expect(await refusal(verifyPassword(scope('v-unknown'), deps, unknown))).toEqual({
      status: 422,
      code: 'invalid_credentials',
    });
    await refusal(verifyPassword(scope('v-wrong'), deps, wrong));
    const right = { _userId: id, password: PASSWORD, sent: PASSWORD };
    expect(await refusal(verifyPassword(scope('v-locked'), deps, right))).toEqual({
      status: 429,
      code: 'too_many_attempts',
    });
  });

  it('counts by the account id whichever identifier named it, and the address apart, in the statement that reads the account; a success clears the one and takes back the other', async () => {
    const { id, email } = await account();
    const address = '203.0.113.34';
    const byId = lockoutKey('default', 'id', id);
    const fromAddress = lockoutKey('default', 'address', addressKey(address));
    const wrong = { email, password: 'Not-the-password-2', sent: 'Not-the-password-2', address };
    await refusal(verifyPassword(scope('v-count'), deps, wrong));
    expect((await deps.lockout.read(byId))?.failures).toBe(1);
    expect(await deps.lockout.read(lockoutKey('default', 'email', email))).toBeUndefined();
    expect((await deps.lockout.read(fromAddress))?.failures).toBe(1);
    const right = { _userId: id, password: PASSWORD, sent: PASSWORD, address };
    expect((await verifyPassword(scope('v-count-ok'), deps, right)).userId).toBe(id);
    expect(await deps.lockout.read(byId)).toBeUndefined();
    expect((await deps.lockout.read(fromAddress))?.failures).toBe(1);
    // An unknown email counts as given.
    const unknown = `nobody.${id}@example.com`;
    await refusal(
      verifyPassword(scope('v-count-unknown'), deps, { email: unknown, password: PASSWORD, sent: PASSWORD }),
    );
    expect((await deps.lockout.read(lockoutKey('default', 'email', unknown)))?.failures).toBe(1);
  });

  it('refuses a disabled account with 403 account_disabled, and writes nothing', async () => {
    const { email } = await account(true);
    const request = { email, password: PASSWORD, sent: PASSWORD };
    expect(await refusal(verifyPassword(scope('v-disabled'), deps, request))).toEqual({
      status: 403,
      code: 'account_disabled',
    });
    expect(await database.db.select().from(auditLog).where(eq(auditLog.requestId, 'v-disabled'))).toEqual([]);
  });
});

// A costly imported hash (issue 41, F8): PBKDF2-SHA512 at import's limit, 10,000,000 rounds, some
// seconds of a core, far past a short deadline. Nobody knows its password: every guess is wrong.
const UNGUESSABLE = () => {
  const b64 = (bytes: Buffer) => bytes.toString('base64').replace(/=+$/, '');
  return `$pbkdf2-sha512$10000000$${b64(randomBytes(16))}$${b64(randomBytes(64))}`;
};

async function imported(passwordHash: string): Promise<{ id: string; email: string }> {
  const id = uuidv7();
  const email = `${id}@example.com`;
  await database.db.insert(users).values({ id, site: 'default', email, name: 'I', passwordHash, origin: 'api' });
  return { id, email };
}

/** A scope whose deadline passes after `ms`, as the HTTP deadline's (its commit point refuses after it). */
const due = (requestId: string, ms: number): WriteScope => {
  const signal = AbortSignal.timeout(ms);
  return {
    ...scope(requestId),
    deadline: {
      commit() {
        if (signal.aborted) throw new Error('past the deadline');
      },
      signal,
    },
  };
};

describe('verifyPassword against a costly imported hash', () => {
  it('counts a check that runs out of time as a failure: after the limit, 429 too_many_attempts', async () => {
    expect(deps.hasher.isCostly(UNGUESSABLE())).toBe(true);
    const { email } = await imported(UNGUESSABLE());
    const guess = (n: number) =>
      refusal(verifyPassword(due(`v-costly-${n}`, 150), deps, { email, password: `guess-${n}`, sent: `guess-${n}` }));
    // As many at once as the limit: one checks, the others wait in the costly lane; the deadline
    // passes for all of them before any check is done.
    const late = await Promise.all(Array.from({ length: lock.limit }, (_, n) => guess(n)));
    for (const answer of late) expect(answer).toMatchObject({ name: 'TimeoutError' });
    // Each was a guess: the next is refused before any check.
    const started = performance.now();
    expect(await guess(99)).toEqual({ status: 429, code: 'too_many_attempts' });
    expect(performance.now() - started).toBeLessThan(1_000);
  }, 60_000);

  it("stops a check's work when its deadline passes: the next costly check (another account's right password) runs at once", async () => {
    const attacked = await imported(UNGUESSABLE());
    const password = 'Costly-victim-password-41';
    // bcrypt 11: costly too (beyond 8 times our own hash), a fraction of a second.
    const victim = await imported(await bcryptHash(password, { cost: 11 }));
    const started = performance.now();
    const late = await refusal(
      verifyPassword(due('v-stop-late', 200), deps, {
        email: attacked.email,
        password: 'x-41-guess',
        sent: 'x-41-guess',
      }),
    );
    expect(late).toMatchObject({ name: 'TimeoutError' });
    const attackEnded = performance.now();
    const verified = await verifyPassword(scope('v-stop-victim'), deps, {
      email: victim.email,
      password,
      sent: password,
    });
    expect(verified.userId).toBe(victim.id);
    const victimMs = performance.now() - attackEnded;
    console.log(
      `[verify.test] costly check stopped: the late verify answered in ${Math.round(attackEnded - started)} ms, then the victim's costly verify in ${Math.round(victimMs)} ms`,
    );
    // The PBKDF2 check alone takes seconds: its slot and core were not held for it.
    expect(victimMs).toBeLessThan(2_500);
  }, 60_000);
});
