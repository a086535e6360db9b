import type { Context } from 'hono';
import { and, eq, sql } from 'drizzle-orm';
import type { components } from '@user-accounts/client';
import type { App, AppEnv } from '../context.ts';
import { users } from '../db/schema.ts';
import { userNotFound } from '../errors.ts';
import { etagOf } from '../etag.ts';
import { isUuid } from '../ids.ts';
import { requireScope, requireToken } from '../middleware/auth.ts';
import { rateLimit } from '../middleware/rate-limit.ts';
import { assertWellFormedStrings, invalidRequest, toFieldErrors } from '../validation.ts';
import { inReach, toUser } from './shared.ts';

export const GET_USER_PATH = '/api/1/user/get';

type GetUserResponse = components['schemas']['GetUserResponse'];

export function registerGetUser(app: App): void {
  app.get(GET_USER_PATH, requireToken(), rateLimit('get'), requireScope('read'), async function getUser(c) {
    const { _userId: id, email } = validQuery(c);

    let match;
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
  });
}

/**
 * The query of get, checked as the spec says: each parameter once, none unknown, `email` trimmed,
 * exactly one of `_userId` and `email`. Shared with the mock, which must refuse what we refuse.
 */
export function validQuery(c: Context<AppEnv>): { _userId?: string; email?: string } {
  // URLSearchParams keeps every parameter, even one with an empty name, which must be refused too.
  // A Map, so that a parameter named __proto__ is just a name.
  const raw = new Map<string, string[]>();
  for (const [name, value] of new URL(c.req.url).searchParams) raw.set(name, [...(raw.get(name) ?? []), value]);
  const repeated = [...raw].filter(([, values]) => values.length > 1);
  if (repeated.length > 0) {
    throw invalidRequest(
      'A query parameter was given more than once.',
      repeated.map(([name]) => ({ pointer: `/${name}`, code: 'not_allowed', message: 'must be given once' })),
    );
  }
  const query: Record<string, string> = Object.fromEntries([...raw].map(([name, values]) => [name, values[0]!]));
  if (typeof query.email === 'string') query.email = query.email.trim();
  assertWellFormedStrings(query);
  const validate = c.get('validators').getUserQuery;
  if (!validate(query)) throw invalidRequest('The query is not valid.', toFieldErrors(validate.errors));
  if ((query._userId === undefined) === (query.email === undefined)) {
    throw invalidRequest('Give exactly one of the query parameters _userId or email.', []);
  }
  return query;
}
