import type { components } from '@user-accounts/client';
import { and, eq, type SQL, sql } from 'drizzle-orm';
import { users } from '../db/schema.ts';
import { userNotFound } from '../errors.ts';
import { etagOf } from '../etag.ts';
import { isUuid } from '../ids.ts';
import { defineOperation } from '../operation.ts';
import { invalidRequest } from '../validation.ts';
import { inReach, toUser, validQuery } from './shared.ts';

export const GET_USER_PATH = '/api/1/user/get';

type GetUserResponse = components['schemas']['GetUserResponse'];

export const getUser = defineOperation({
  name: 'getUser',
  method: 'GET',
  path: GET_USER_PATH,
  scope: 'read',
  request: { query: true },
  parse(c): { _userId?: string; email?: string } {
    const query = validQuery<{ _userId?: string; email?: string }>(c, GET_USER_PATH);
    if ((query._userId === undefined) === (query.email === undefined)) {
      throw invalidRequest('Give exactly one of the query parameters _userId or email.', []);
    }
    return query;
  },
  async handle(c, { _userId: id, email }) {
    let match: SQL;
    if (id !== undefined) {
      if (!isUuid(id)) throw userNotFound();
      match = eq(users.id, id);
    } else {
      match = sql`lower(${users.email}) = lower(${email})`;
    }
    const [row] = await c
      .get('deps')
      .database.db.select()
      .from(users)
      .where(and(match, inReach(c)))
      .limit(1);
    if (row === undefined) throw userNotFound();
    c.header('ETag', etagOf(row.version));
    return c.json({ result: toUser(row) } satisfies GetUserResponse, 200);
  },
});
