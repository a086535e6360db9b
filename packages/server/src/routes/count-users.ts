import type { components } from '@user-accounts/client';
import { and, count } from 'drizzle-orm';
import { users } from '../db/schema.ts';
import { filterConditions, type ListFilters } from '../listing.ts';
import { defineOperation } from '../operation.ts';
import { inReach, validQuery } from './shared.ts';

type CountUsersResponse = components['schemas']['CountUsersResponse'];

const COUNT_USERS_PATH = '/api/1/user/count';

export const countUsers = defineOperation({
  name: 'countUsers',
  method: 'GET',
  path: COUNT_USERS_PATH,
  scope: 'read',
  request: { query: true },
  parse: (c) => validQuery<ListFilters>(c, COUNT_USERS_PATH),
  async handle(c, filters) {
    const [row] = await c
      .get('deps')
      .database.db.select({ count: count() })
      .from(users)
      .where(and(inReach(c), ...filterConditions(filters)));
    return c.json({ result: { count: row!.count } } satisfies CountUsersResponse, 200);
  },
});
