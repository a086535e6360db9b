import type { components } from '@user-accounts/client';
import { and, eq, sql } from 'drizzle-orm';
import { identitiesJson, parsedIdentities } from '../../accounts/linked-identities.ts';
import { SHOWN_COLUMNS } from '../../accounts/listing.ts';
import { toUser } from '../../accounts/to-user.ts';
import { fromColumn, lockoutColumns, lockoutOf, readCounters } from '../../accounts/unlock.ts';
import { preparedOn } from '../../db/prepared.ts';
import { users } from '../../db/schema.ts';
import { invalidRequest, userNotFound } from '../../errors.ts';
import { accountWithIdentity } from '../../identities/identities.ts';
import { emailDeliverableSql } from '../../kernel/email-deliverable.ts';
import { isUuid } from '../../kernel/ids.ts';
import { inReachOf } from '../../kernel/in-reach.ts';
import { defineOperation } from '../define-operation.ts';
import { etagOf } from '../etag.ts';
import { validQuery } from './shared.ts';

export const GET_USER_PATH = '/api/1/user/get';

type GetUserResponse = components['schemas']['GetUserResponse'];
type Query = { _userId?: string; email?: string; provider?: string; subject?: string };

// The two reads every site makes most, prepared once (see preparedOn), the account's identities
// read in the same statement (at most 20, by user_identities_user_idx).
const inReachOfPlaceholder = () => inReachOf(sql.placeholder('site'));
// What the answer and its ETag need, no more: the password hash, the site and the deletion
// columns were read, parsed and mapped on every get for nothing (issue 47).
// The account's lockout counters too, when they are in this database (issue 64): no round trip more.
const SELECTED = {
  ...SHOWN_COLUMNS,
  emailDeliverable: emailDeliverableSql(sql.placeholder('site')),
  version: users.version,
  identities: identitiesJson(),
  ...lockoutColumns(sql.placeholder('site')),
};
const byId = preparedOn((db) =>
  db
    .select(SELECTED)
    .from(users)
    .where(and(eq(users.id, sql.placeholder('id')), inReachOfPlaceholder()))
    .limit(1)
    .prepare('get_user_by_id'),
);
const byEmail = preparedOn((db) =>
  db
    .select(SELECTED)
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
  parse(c): Query {
    const query = validQuery<Query>(c, GET_USER_PATH);
    // Exactly one way to name the account: _userId, email, or provider with subject.
    const ways = [query._userId, query.email, query.provider ?? query.subject].filter((w) => w !== undefined);
    if (ways.length !== 1 || (query.provider === undefined) !== (query.subject === undefined)) {
      throw invalidRequest(
        'Give exactly one of the query parameters _userId or email, or both provider and subject.',
        [],
      );
    }
    return query;
  },
  async handle(c, { _userId, email, provider, subject }) {
    const { database, lockout, verifyLimits } = c.get('deps');
    const { db } = database;
    const site = c.get('token').site;
    let id = _userId;
    if (provider !== undefined && subject !== undefined) {
      id = await accountWithIdentity(db, site, { provider, subject });
      if (id === undefined) throw userNotFound();
    }
    let row: Awaited<ReturnType<ReturnType<typeof byId>['execute']>>[number] | undefined;
    if (id !== undefined) {
      if (!isUuid(id)) throw userNotFound();
      [row] = await byId(db).execute({ id, site });
    } else {
      [row] = await byEmail(db).execute({ email, site });
    }
    if (row === undefined) throw userNotFound();
    // With Redis (REDIS_URL) the counts are there, and in the database only while it did not answer.
    const [password, secondFactor] =
      lockout.db === db
        ? [fromColumn(row.passwordCounter), fromColumn(row.secondFactorCounter)]
        : await readCounters(lockout, site, row.id);
    c.header('ETag', etagOf(row.version));
    return c.json(
      {
        result: toUser(row, parsedIdentities(row.identities)),
        lockout: lockoutOf(password, secondFactor, verifyLimits.identifier),
      } satisfies GetUserResponse,
      200,
    );
  },
});
