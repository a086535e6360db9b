import type { components } from '@user-accounts/client';
import { and, eq } from 'drizzle-orm';
import { matchingIfMatch, notWritten } from '../../accounts/conditions.ts';
import { isUuid } from '../../accounts/ids.ts';
import { users } from '../../db/schema.ts';
import { userNotFound } from '../errors.ts';
import { parseIfMatch } from '../etag.ts';
import { defineOperation } from '../operation.ts';
import { runWrite } from '../run-write.ts';
import { inReach, validBody } from './shared.ts';

type DeleteUserResponse = components['schemas']['DeleteUserResponse'];

export const deleteUser = defineOperation({
  name: 'deleteUser',
  method: 'DELETE',
  path: '/api/1/user/delete',
  scope: 'write',
  request: { body: 'DeleteUserRequest' },
  writes: 'delete',
  parse(c) {
    const fields = validBody(c, 'DeleteUserRequest');
    return { fields, ifMatch: parseIfMatch(c.req.header('if-match')) };
  },
  async handle(c, { fields: input, ifMatch }) {
    if (!isUuid(input._userId)) throw userNotFound();
    const db = c.get('deps').database.db;
    const account = and(eq(users.id, input._userId), inReach(c));
    const deleted = await runWrite(c, { userId: input._userId, status: 200, outcome: 'user removed' }, async (tx) => {
      const [row] = await tx.delete(users).where(matchingIfMatch(account, ifMatch)).returning({ id: users.id });
      return row;
    });
    if (deleted === undefined) throw await notWritten(db, account, ifMatch);
    return c.json({ result: { status: 'user removed' } } satisfies DeleteUserResponse, 200);
  },
});
