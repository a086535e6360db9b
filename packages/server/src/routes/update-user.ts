import { and, eq, sql } from 'drizzle-orm';
import type { components } from '@user-accounts/client';
import { auditWrites, recordAudit } from '../audit.ts';
import type { App } from '../context.ts';
import { users } from '../db/schema.ts';
import { userNotFound } from '../errors.ts';
import { etagOf, parseIfMatch } from '../etag.ts';
import { isUuid } from '../ids.ts';
import { requireScope, requireToken } from '../middleware/auth.ts';
import { idempotent } from '../middleware/idempotency.ts';
import { jsonBody } from '../middleware/json-body.ts';
import { rateLimit } from '../middleware/rate-limit.ts';
import { weakPasswordReason } from '../passwords.ts';
import { inReach, matchingIfMatch, notWritten, preconditionFailed, refuseEmailChange, validBody, weakPassword } from './shared.ts';

type UpdateUserResponse = components['schemas']['UpdateUserResponse'];

export function registerUpdateUser(app: App): void {
  app.post(
    '/api/1/user/update',
    requireToken(),
    rateLimit('update'),
    auditWrites('update'),
    requireScope('write'),
    jsonBody(),
    idempotent(),
    async function updateUser(c) {
      refuseEmailChange(c);
      const input = validBody(c, 'UpdateUserRequest');
      const ifMatch = parseIfMatch(c.req.header('if-match'));
      if (!isUuid(input._userId)) throw userNotFound();
      const { database, hasher } = c.get('deps');
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
        const reason = weakPasswordReason(input.password, { email: row.email, name: input.name ?? row.name });
        if (reason !== undefined) throw weakPassword(reason);
        changes.passwordHash = await hasher.hash(input.password);
      }

      const updated = await database.db.transaction(async (tx) => {
        const rows = await tx
          .update(users)
          .set({ ...changes, updatedAt: sql`now()` })
          .where(current)
          .returning({ version: users.version });
        if (rows.length > 0) {
          await recordAudit(tx, c, { operation: 'update', userId: input._userId, status: 200, outcome: 'user updated' });
        }
        return rows;
      });
      c.set('audited', updated.length > 0);
      if (updated.length === 0) throw await notWritten(database.db, account, ifMatch);
      c.header('ETag', etagOf(updated[0]!.version));
      return c.json({ result: { status: 'user updated' } } satisfies UpdateUserResponse, 200);
    },
  );
}
