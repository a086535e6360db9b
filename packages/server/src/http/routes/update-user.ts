import type { components } from '@user-accounts/client';
import { and, eq, sql } from 'drizzle-orm';
import { matchingIfMatch, notWritten, preconditionFailed } from '../../accounts/conditions.ts';
import { checkPhoneVerified, contactChanges, phoneless } from '../../accounts/contacts.ts';
import { isUuid } from '../../accounts/ids.ts';
import {
  assertSiteSchema,
  checkMetadata,
  mergedMetadata,
  siteMetadataValidator,
  sizeFault,
} from '../../accounts/metadata.ts';
import { endTicketsOfUpdate } from '../../accounts/tickets.ts';
import { users } from '../../db/schema.ts';
import { weakPasswordReason } from '../../passwords/hasher.ts';
import { sqlState, userNotFound } from '../errors.ts';
import { etagOf, parseIfMatch } from '../etag.ts';
import { defineOperation } from '../operation.ts';
import { answerWith, jsonAnswer, runWrite } from '../run-write.ts';
import { invalidRequest } from '../validation.ts';
import { emailTaken } from './create-user.ts';
import { hashPassword, inReach, refuseBreached, validBody, weakPassword } from './shared.ts';

type UpdateUserResponse = components['schemas']['UpdateUserResponse'];

export const updateUser = defineOperation({
  name: 'updateUser',
  method: 'POST',
  path: '/api/1/user/update',
  scope: 'write',
  request: { body: 'UpdateUserRequest' },
  idempotent: true,
  writes: 'update',
  parse(c) {
    const fields = validBody(c, 'UpdateUserRequest');
    const ifMatch = parseIfMatch(c.req.header('if-match'));
    // What can be told without the account: a common password, or one equal to the new name or
    // email. The account's email and name are compared once it is read.
    if (fields.password !== undefined) {
      const reason = weakPasswordReason(fields.password, { name: fields.name, email: fields.email });
      if (reason !== undefined) throw weakPassword(reason);
    }
    if (fields.metadata !== undefined) checkMetadata(fields.metadata);
    checkPhoneVerified(fields, false);
    return { fields, ifMatch };
  },
  async handle(c, { fields: input, ifMatch }) {
    if (!isUuid(input._userId)) throw userNotFound();
    const { database } = c.get('deps');
    const account = and(eq(users.id, input._userId), inReach(c));
    const current = matchingIfMatch(account, ifMatch);

    // Only the given columns are written: an omitted field keeps its value, null clears it.
    const changes: Partial<typeof users.$inferInsert> = {};
    if (input.name !== undefined) changes.name = input.name;
    if (input.phone !== undefined) changes.phone = input.phone;
    if (input.address !== undefined) changes.address = input.address;
    if (input.password !== undefined) {
      // The password may not equal the account's email or (new) name: read them first. A stale
      // If-Match is refused here too, before a 50 ms hash is spent on it.
      const [row] = await database.db
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
      await refuseBreached(c, input.password);
      changes.passwordHash = await hashPassword(c, input.password);
    }

    const answer = (version: number) =>
      jsonAnswer({ result: { status: 'user updated' } } satisfies UpdateUserResponse, { etag: etagOf(version) });
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
    c.get('write').userId = input._userId;
    const updated = await runWrite(
      c,
      (row: { version: number }) => ({
        userId: input._userId,
        status: 200,
        outcome: 'user updated',
        changed,
        answer: answer(row.version),
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
        const [row] = await tx
          .update(users)
          .set({
            ...changes,
            // A new password is not the one a verify found breached.
            ...(changes.passwordHash !== undefined && { passwordBreached: false }),
            ...contacts,
            ...(patch !== undefined && { metadata: mergedMetadata(patch) }),
            updatedAt: sql`now()`,
          })
          .where(current)
          .returning({ version: users.version, metadata: users.metadata });
        if (row !== undefined && patch !== undefined) {
          const tooLarge = sizeFault(row.metadata, '/metadata');
          if (tooLarge !== undefined) throw invalidRequest('The merged metadata would be too large.', [tooLarge]);
          assertSiteSchema(await siteMetadataValidator(tx, c.get('token').site), row.metadata);
        }
        return row;
      },
    ).catch((error: unknown) => {
      // Another account in reach has the new email (users_site_email_origin_key); or the account
      // has no phone to verify (users_phone_verified_check). Nothing was written.
      if (sqlState(error) === '23505') throw emailTaken();
      if (sqlState(error) === '23514') throw phoneless();
      throw error;
    });
    if (updated === undefined) throw await notWritten(database.db, account, ifMatch);
    return answerWith(c, 200, answer(updated.version));
  },
});
