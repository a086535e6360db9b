import type { components } from '@user-accounts/client';
import {
  checkCursorShape,
  checkFilters,
  cursorScope,
  cursorsOf,
  FEW_MATCHES,
  fewMatchesPage,
  keyset,
  type ListFilters,
  listQuery,
  MANY_IN_WALK,
  secondWalk,
  walkQuery,
} from '../../accounts/listing.ts';
import { toUser } from '../../accounts/to-user.ts';
import type { Db } from '../../db/client.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

type ListUsersResponse = components['schemas']['ListUsersResponse'];
type ListQuery = ListFilters & { order?: 'asc' | 'desc'; limit?: number; after?: string };

export const LIST_USERS_PATH = '/api/1/user/list';

/**
 * A page of the list. With a metadata filter (which PostgreSQL cannot estimate), a short walk in
 * the list's order first, which a common value fills; a value it found often enough gets a longer
 * walk; else its matches are read through the GIN index and sorted in one statement when few, or
 * walked when many (see accounts/listing.ts).
 */
async function pageOf(db: Db, site: string, filters: ListFilters, walk: ReturnType<typeof keyset>, limit: number) {
  if (filters.metadata === undefined) return listQuery(db, site, filters, walk, limit);
  const walked = await walkQuery(db, site, filters, walk, limit);
  if (walked.length > limit) return walked;
  if (walked.length >= Math.min(MANY_IN_WALK, limit)) {
    const further = await walkQuery(db, site, filters, walk, limit, secondWalk(walked.length, limit));
    if (further.length > limit) return further;
  }
  const few = await fewMatchesPage(db, site, filters, walk, limit);
  return (few[0]?.matches ?? 0) < FEW_MATCHES ? few : listQuery(db, site, filters, walk, limit);
}

export const listUsers = defineOperation({
  name: 'listUsers',
  method: 'GET',
  path: LIST_USERS_PATH,
  scope: 'read',
  request: { query: true },
  parse(c) {
    const query = validQuery<ListQuery>(c, LIST_USERS_PATH);
    checkFilters(query);
    checkCursorShape(query.after);
    return query;
  },
  async handle(c, { order = 'asc', limit = 100, after, ...filters }) {
    const db = c.get('deps').database.db;
    const cursors = await cursorsOf(db);
    const scope = cursorScope(c.get('token').site, filters, order);
    const walk = keyset(after === undefined ? undefined : cursors.read(after, scope), order);
    // One row more than the page: whether there is a next page, without a count.
    const rows = await pageOf(db, c.get('token').site, filters, walk, limit);
    const page = rows.slice(0, limit);
    const last = page.at(-1);
    const next =
      rows.length > limit && last !== undefined
        ? cursors.sign({ c: last.createdAt.getTime(), i: last.id }, scope)
        : null;
    return c.json({ result: { users: page.map(toUser), next } } satisfies ListUsersResponse, 200);
  },
});
