import type { components } from '@user-accounts/client';
import { and, eq, sql } from 'drizzle-orm';
import { isUuid } from '../../accounts/ids.ts';
import { inReachOf } from '../../accounts/in-reach.ts';
import { toUser } from '../../accounts/to-user.ts';
import { invalidRequest } from '../../contract/validation.ts';
import { preparedOn } from '../../db/prepared.ts';
import { users } from '../../db/schema.ts';
import { userNotFound } from '../../errors.ts';
import { defineOperation } from '../define-operation.ts';
import { etagOf } from '../etag.ts';
import { validQuery } from './shared.ts';

export const GET_USER_PATH = '/api/1/user/get';

type GetUserResponse = components['schemas']['GetUserResponse'];

// The two reads every site makes most, prepared once (see preparedOn).
const inReachOfPlaceholder = () => inReachOf(sql.placeholder('site'));
const byId = preparedOn((db) =>
  db
    .select()
    .from(users)
    .where(and(eq(users.id, sql.placeholder('id')), inReachOfPlaceholder()))
    .limit(1)
    .prepare('get_user_by_id'),
);
const byEmail = preparedOn((db) =>
  db
    .select()
    .from(users)
    .where(and(sql`lower(${users.email}) = lower(${sql.placeholder('email')})`, inReachOfPlaceholder()))
    .limit(1)
    .prepare('get_user_by_email'),
);

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
    const { db } = c.get('deps').database;
    const site = c.get('token').site;
    let row: typeof users.$inferSelect | undefined;
    if (id !== undefined) {
      if (!isUuid(id)) throw userNotFound();
      [row] = await byId(db).execute({ id, site });
    } else {
      [row] = await byEmail(db).execute({ email, site });
    }
    if (row === undefined) throw userNotFound();
    c.header('ETag', etagOf(row.version));
    return c.json({ result: toUser(row) } satisfies GetUserResponse, 200);
  },
});
