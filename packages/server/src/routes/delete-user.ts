import { and, eq } from 'drizzle-orm';
import type { components } from '@user-accounts/client';
import type { App } from '../context.ts';
import { users } from '../db/schema.ts';
import { userNotFound } from '../errors.ts';
import { isUuid } from '../ids.ts';
import { requireToken } from '../middleware/auth.ts';
import { jsonBody } from '../middleware/json-body.ts';
import { validBody } from './shared.ts';

type DeleteUserResponse = components['schemas']['DeleteUserResponse'];

export function registerDeleteUser(app: App): void {
  app.delete('/api/1/user/delete', requireToken(), jsonBody(), async function deleteUser(c) {
    const input = validBody(c, 'DeleteUserRequest');
    if (!isUuid(input._userId)) throw userNotFound();
    const deleted = await c
      .get('deps')
      .database.db.delete(users)
      .where(and(eq(users.id, input._userId), eq(users.origin, 'api')))
      .returning({ id: users.id });
    if (deleted.length === 0) throw userNotFound();
    return c.json({ result: { status: 'user removed' } } satisfies DeleteUserResponse, 200);
  });
}
