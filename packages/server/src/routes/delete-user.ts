import { and, eq } from 'drizzle-orm';
import type { components } from '@user-accounts/client';
import { auditWrites, recordAudit } from '../audit.ts';
import type { App } from '../context.ts';
import { users } from '../db/schema.ts';
import { userNotFound } from '../errors.ts';
import { parseIfMatch } from '../etag.ts';
import { isUuid } from '../ids.ts';
import { requireScope, requireToken } from '../middleware/auth.ts';
import { jsonBody } from '../middleware/json-body.ts';
import { rateLimit } from '../middleware/rate-limit.ts';
import { inReach, matchingIfMatch, notWritten, validBody } from './shared.ts';

type DeleteUserResponse = components['schemas']['DeleteUserResponse'];

export function registerDeleteUser(app: App): void {
  app.delete(
    '/api/1/user/delete',
    requireToken(),
    rateLimit('delete'),
    auditWrites('delete'),
    requireScope('write'),
    jsonBody(),
    async function deleteUser(c) {
      const input = validBody(c, 'DeleteUserRequest');
      const ifMatch = parseIfMatch(c.req.header('if-match'));
      if (!isUuid(input._userId)) throw userNotFound();
      const db = c.get('deps').database.db;
      const account = and(eq(users.id, input._userId), inReach(c));
      const current = matchingIfMatch(account, ifMatch);
      const deleted = await db.transaction(async (tx) => {
        const rows = await tx.delete(users).where(current).returning({ id: users.id });
        if (rows.length > 0) {
          await recordAudit(tx, c, { operation: 'delete', userId: input._userId, status: 200, outcome: 'user removed' });
        }
        return rows;
      });
      c.set('audited', deleted.length > 0);
      if (deleted.length === 0) throw await notWritten(db, account, ifMatch);
      return c.json({ result: { status: 'user removed' } } satisfies DeleteUserResponse, 200);
    },
  );
}
