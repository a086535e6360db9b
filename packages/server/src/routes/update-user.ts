import { and, eq, sql } from 'drizzle-orm';
import type { components } from '@user-accounts/client';
import type { App } from '../context.ts';
import { users } from '../db/schema.ts';
import { ApiError, userNotFound } from '../errors.ts';
import { isUuid } from '../ids.ts';
import { requireToken } from '../middleware/auth.ts';
import { jsonBody } from '../middleware/json-body.ts';
import { weakPasswordReason } from '../passwords.ts';
import { validBody, weakPassword } from './shared.ts';

type UpdateUserResponse = components['schemas']['UpdateUserResponse'];

export function registerUpdateUser(app: App): void {
  app.post('/api/1/user/update', requireToken(), jsonBody(), async function updateUser(c) {
    const body = c.get('body');
    if (body !== null && typeof body === 'object' && Object.hasOwn(body, 'email')) {
      throw new ApiError(400, 'field_not_updatable', 'The email of an account cannot be changed.', {
        errors: [{ pointer: '/email', code: 'not_updatable', message: 'cannot be changed' }],
      });
    }
    const input = validBody(c, 'UpdateUserRequest');
    if (!isUuid(input._userId)) throw userNotFound();
    const { database, hasher } = c.get('deps');
    const inReach = and(eq(users.id, input._userId), eq(users.origin, 'api'));

    // Only the given columns are written: an omitted field keeps its value, null clears it.
    const changes: Partial<typeof users.$inferInsert> = {};
    if (input.name !== undefined) changes.name = input.name;
    if (input.phone !== undefined) changes.phone = input.phone;
    if (input.address !== undefined) changes.address = input.address;
    if (input.password !== undefined) {
      // The password may not equal the account's email or (new) name: read them first.
      const [current] = await database.db
        .select({ email: users.email, name: users.name })
        .from(users)
        .where(inReach)
        .limit(1);
      if (current === undefined) throw userNotFound();
      const reason = weakPasswordReason(input.password, {
        email: current.email,
        name: input.name ?? current.name,
      });
      if (reason !== undefined) throw weakPassword(reason);
      changes.passwordHash = await hasher.hash(input.password);
    }

    const updated = await database.db
      .update(users)
      .set({ ...changes, updatedAt: sql`now()` })
      .where(inReach)
      .returning({ id: users.id });
    if (updated.length === 0) throw userNotFound();
    return c.json({ result: { status: 'user updated' } } satisfies UpdateUserResponse, 200);
  });
}
