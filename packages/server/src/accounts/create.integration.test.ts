// create and update as functions of a write scope, with no HTTP around them: the embedded
// database and the real hasher. What the caller counts a hash against (HTTP: the token's budget)
// is told through beforeHash, only once a hash is certain.
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { accountHooks } from '../assemble.ts';
import type { Database } from '../db/client.ts';
import { auditLog, users } from '../db/schema.ts';
import { ApiError } from '../errors.ts';
import type { WriteScope } from '../kernel/unit-of-work.ts';
import { createPasswordHasher, type PasswordHasher } from '../passwords/hasher.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { createAccount } from './create.ts';
import { updateAccount } from './update.ts';

let database: Database;
let hasher: PasswordHasher;
const scope = (requestId: string): WriteScope => ({ site: 'default', actor: 'job', requestId });
const PASSWORD = 'Create-unit-password-34';

beforeAll(async () => {
  database = await openMigratedPglite();
  hasher = createPasswordHasher({ concurrency: 1 });
}, 60_000);
afterAll(() => database?.close());

/** The deps, with a count of the hashes the caller was told of. */
function counted() {
  const told = { hashes: 0 };
  const deps = {
    db: database.db,
    accountHooks,
    hasher,
    beforeHash: async () => {
      told.hashes++;
    },
  };
  return { told, deps };
}

const refusal = (promise: Promise<unknown>) =>
  promise.then(
    () => undefined,
    (error: unknown) => (error instanceof ApiError ? { status: error.status, code: error.code } : error),
  );

describe('createAccount and updateAccount', () => {
  it('creates an account, audited under the scope, and tells the caller of its one hash', async () => {
    const { told, deps } = counted();
    const email = `create.${Date.now()}@example.com`;
    const id = await createAccount(scope('c-ok'), deps, { email, name: 'C', password: PASSWORD });
    const [row] = await database.db.select().from(users).where(eq(users.id, id));
    expect(row).toMatchObject({ email, name: 'C', site: 'default', origin: 'api' });
    expect(await hasher.verify(row!.passwordHash!, PASSWORD, 'default')).toBe(true);
    expect(told.hashes).toBe(1);
    const audit = await database.db.select().from(auditLog).where(eq(auditLog.requestId, 'c-ok'));
    expect(audit).toEqual([
      expect.objectContaining({
        operation: 'create',
        userId: id,
        tokenId: 'job',
        status: 201,
        outcome: 'user created',
      }),
    ]);
  });

  it('refuses a taken email with 409 before any hash: the caller is told of none, nothing is written', async () => {
    const { told, deps } = counted();
    const email = `taken.${Date.now()}@example.com`;
    await createAccount(scope('c-first'), deps, { email, name: 'C', password: PASSWORD });
    expect(await refusal(createAccount(scope('c-again'), deps, { email, name: 'D', password: PASSWORD }))).toEqual({
      status: 409,
      code: 'email_taken',
    });
    expect(told.hashes).toBe(1);
    expect(await database.db.select().from(auditLog).where(eq(auditLog.requestId, 'c-again'))).toEqual([]);
  });

  it('changes a password with one hash; a stale If-Match is refused before it, and the password kept', async () => {
    const { told, deps } = counted();
    const email = `update.${Date.now()}@example.com`;
    const id = await createAccount(scope('u-create'), deps, { email, name: 'U', password: PASSWORD });
    const stale = { any: false as const, versions: [999] };
    const change = { _userId: id, password: 'Another-unit-password-34' };
    expect(await refusal(updateAccount(scope('u-stale'), deps, change, stale))).toEqual({
      status: 412,
      code: 'precondition_failed',
    });
    expect(told.hashes).toBe(1);
    const version = await updateAccount(scope('u-ok'), deps, change, undefined);
    expect(told.hashes).toBe(2);
    const [row] = await database.db.select().from(users).where(eq(users.id, id));
    expect(row!.version).toBe(version);
    expect(await hasher.verify(row!.passwordHash!, 'Another-unit-password-34', 'default')).toBe(true);
  });
});
