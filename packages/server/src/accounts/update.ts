// update: an account's fields, password and metadata, as a merge: only what is given changes.
import type { components } from '@user-accounts/client';
import { and, eq, sql } from 'drizzle-orm';
import { users } from '../db/schema.ts';
import { invalidRequest, sqlState, userNotFound } from '../errors.ts';
import type { HookDeps } from '../kernel/account-hooks.ts';
import { isUuid } from '../kernel/ids.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import type { EventEntry } from '../kernel/outbox.ts';
import { inWrite, type KeptAnswer, type WriteDeps, type WriteScope } from '../kernel/unit-of-work.ts';
import { weakPasswordReason } from '../passwords/hasher.ts';
import type { IfMatch } from './conditions.ts';
import { matchingIfMatch, notWritten, plainTarget, preconditionFailed } from './conditions.ts';
import { contactChanges, phoneless } from './contacts.ts';
import { emailTaken } from './create.ts';
import { assertSiteSchema, mergedMetadata, siteSchemaOf, sizeFault } from './metadata.ts';
import { hashNewPassword, type NewPasswordDeps, weakPassword } from './new-password.ts';
import { endTicketsOfUpdate } from './tickets.ts';

export type AccountChange = components['schemas']['UpdateUserRequest'];

/**
 * Changes the account `input._userId` of the scope's site as `input` says (already checked
 * against the spec and the password rules that need no account), when `ifMatch` holds: its new
 * version, or 404, 412, 409 email_taken, 400 (password rules, metadata), the screening's
 * refusals. `answer` is what the caller answers with the new version (kept for its Idempotency-Key).
 */
export async function updateAccount(
  scope: WriteScope,
  deps: WriteDeps & HookDeps & NewPasswordDeps,
  input: AccountChange,
  ifMatch: IfMatch,
  answer?: (version: number) => KeptAnswer,
): Promise<number> {
  if (!isUuid(input._userId)) throw userNotFound();
  const { db } = deps;
  const account = and(eq(users.id, input._userId), inReachOf(scope.site));
  const current = matchingIfMatch(account, ifMatch);

  // Only the given columns are written: an omitted field keeps its value, null clears it.
  const changes: Partial<typeof users.$inferInsert> = {};
  if (input.name !== undefined) changes.name = input.name;
  if (input.phone !== undefined) changes.phone = input.phone;
  if (input.address !== undefined) changes.address = input.address;
  if (input.password !== undefined) {
    // The password may not equal the account's email or (new) name: read them first. A stale
    // If-Match is refused here too, before a 50 ms hash is spent on it.
    const [row] = await db
      .select({ email: users.email, name: users.name, version: users.version })
      .from(users)
      .where(account)
      .limit(1);
    if (row === undefined) throw userNotFound();
    if (ifMatch !== undefined && !ifMatch.any && !ifMatch.versions.includes(row.version)) throw preconditionFailed();
    const reason = weakPasswordReason(input.password, {
      email: input.email ?? row.email,
      name: input.name ?? row.name,
    });
    if (reason !== undefined) throw weakPassword(reason);
    changes.passwordHash = await hashNewPassword(scope, deps, input.password);
  }

  const patch = input.metadata;
  const contacts = contactChanges(input);
  const given = (name: keyof typeof input) => (input[name] === undefined ? [] : [name]);
  const changed = [
    ...given('email'),
    ...given('emailVerified'),
    ...Object.keys(changes).map((k) => (k === 'passwordHash' ? 'password' : k)),
    ...given('phoneVerified'),
    ...(patch === undefined ? [] : ['metadata']),
  ];
  scope.report?.({ userId: input._userId });
  const updated = await inWrite(
    scope,
    deps,
    'update',
    (row: { version: number; ended: EventEntry[] }) => ({
      userId: input._userId,
      status: 200,
      outcome: 'user updated',
      changed,
      ...(answer && { answer: answer(row.version) }),
      moreEvents: row.ended,
    }),
    async (tx) => {
      // The tickets this change ends (a new email, password or phone), judged against the row as it is.
      await endTicketsOfUpdate(tx, current, input._userId, {
        ...(input.email !== undefined && { email: input.email }),
        password: input.password !== undefined,
        ...(input.phone !== undefined && { phone: input.phone }),
      });
      // A metadata patch merges in this one statement (no read-modify-write): two updates of
      // different keys at once both stay. What it leaves is checked before the commit.
      const updating = tx
        .update(users)
        .set({
          ...changes,
          // A new password is not the one a verify found breached, nor one set before the inbox was proven.
          ...(changes.passwordHash !== undefined && { passwordBreached: false, passwordUnproven: false }),
          ...contacts,
          ...(patch !== undefined && { metadata: mergedMetadata(patch) }),
          updatedAt: sql`now()`,
        })
        .where(current)
        .returning({ version: users.version, metadata: users.metadata });
      // Parsed once per connection for each set of columns a request changes (a bounded few), not at
      // every write (issue 63); with If-Match's list of versions (its length the client's), anew.
      const [row] = plainTarget(ifMatch) ? await updating.prepare('update_account').execute() : await updating;
      if (row !== undefined && patch !== undefined) {
        const tooLarge = sizeFault(row.metadata, '/metadata');
        if (tooLarge !== undefined) throw invalidRequest('The merged metadata would be too large.', [tooLarge]);
        await assertSiteSchema(scope.site, await siteSchemaOf(tx, scope.site), row.metadata, scope.deadline?.signal);
      }
      if (row === undefined) return undefined;
      // A new password: the other domains' hooks, in this write (its sessions end: sessions/hooks.ts).
      const ended =
        changes.passwordHash === undefined ? [] : await deps.accountHooks.passwordChanged(tx, input._userId);
      return { version: row.version, ended };
    },
  ).catch((error: unknown) => {
    // Another account in reach has the new email (users_site_email_origin_key); or the account
    // has no phone to verify (users_phone_verified_check). Nothing was written.
    if (sqlState(error) === '23505') throw emailTaken();
    if (sqlState(error) === '23514') throw phoneless();
    throw error;
  });
  if (updated === undefined) throw await notWritten(db, account, ifMatch);
  return updated.version;
}
