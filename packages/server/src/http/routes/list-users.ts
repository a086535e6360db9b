import type { components } from '@user-accounts/client';
import { identitiesOf } from '../../accounts/linked-identities.ts';
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
import { inHeavyRead } from '../heavy-read.ts';
import { validQuery } from './shared.ts';

type ListUsersResponse = components['schemas']['ListUsersResponse'];
type User = ListUsersResponse['result']['users'][number];
type ListQuery = ListFilters & { order?: 'asc' | 'desc'; limit?: number; after?: string };

export const LIST_USERS_PATH = '/api/1/user/list';

/**
 * A page of the list. With a search, its matches first when few (below). With a metadata filter (which PostgreSQL cannot estimate), a short walk in
 * the list's order first, which a common value fills; a value it found often enough gets a longer
 * walk; else its matches are read through the GIN index and sorted in one statement when few, or
 * walked when many (see accounts/listing.ts).
 */
async function pageOf(db: Db, site: string, filters: ListFilters, walk: ReturnType<typeof keyset>, limit: number) {
  if (filters.metadata === undefined && filters.search === undefined) return listQuery(db, site, filters, walk, limit);
  // A search: its matches read through their indexes (the readings' bitmaps ORed) and sorted,
  // when there are few; else the walk in the list's order, which many matches fill at once. Left
  // to itself, PostgreSQL walked the creation index for an id or a phone, filtering each row:
  // 2.5–6 s a page at 500,000 accounts, where the matches' read takes under 2 ms (issue 64).
  if (filters.metadata === undefined) {
    const few = await fewMatchesPage(db, site, filters, walk, limit);
    return (few[0]?.matches ?? 0) < FEW_MATCHES ? few : listQuery(db, site, filters, walk, limit);
  }
  const walked = await walkQuery(db, site, filters, walk, limit);
  if (walked.length > limit) return walked;
  if (walked.length >= Math.min(MANY_IN_WALK, limit)) {
    const further = await walkQuery(db, site, filters, walk, limit, secondWalk(walked.length, limit));
    if (further.length > limit) return further;
  }
  const few = await fewMatchesPage(db, site, filters, walk, limit);
  return (few[0]?.matches ?? 0) < FEW_MATCHES ? few : listQuery(db, site, filters, walk, limit);
}

/**
 * The most bytes of JSON a page's `users` may take (the spec's 2 MB): a page of 1,000 accounts
 * with 63 KiB of metadata each was 63 MB, built in one piece while every site waited (issue 41, F2).
 */
export const PAGE_BYTES = 2 * 1024 * 1024;
/**
 * Accounts read from the database at first (ten of the largest are 660 KB); each later read takes
 * as many as READ_BYTES hold at the weight of those read so far. Small reads, so that no one
 * read holds the database's connection (the embedded database's is every site's) or the event
 * loop long: another site's requests pass between them.
 */
export const FIRST_READ = 10;
export const READ_BYTES = 256 * 1024;

/**
 * The page: accounts read a few at a time in the walk's order and written out one by one, until
 * `limit` of them or PAGE_BYTES of JSON; `next` is set when accounts are left after the page.
 * At most a read of rows (about READ_BYTES) and the page's text are held at once, whatever the limit.
 */
async function boundedPage(
  db: Db,
  site: string,
  filters: ListFilters,
  start: ReturnType<typeof keyset>,
  order: 'asc' | 'desc',
  limit: number,
) {
  const users: string[] = [];
  let bytes = 0;
  let last: { createdAt: Date; id: string } | undefined;
  let walk = start;
  let batch = Math.min(limit, FIRST_READ);
  for (;;) {
    // One row more than the batch: whether any are left after it, without a count.
    const rows = await pageOf(db, site, filters, walk, batch);
    // The page's identities in one statement (at most 20 an account).
    const identities = await identitiesOf(
      db,
      rows.slice(0, batch).map((r) => r.id),
    );
    for (const row of rows.slice(0, batch)) {
      const text = JSON.stringify(toUser(row, identities.get(row.id) ?? []) satisfies User);
      const size = Buffer.byteLength(text) + (users.length > 0 ? 1 : 0);
      // The first account always goes in (one is at most about 66 KB): a walk always ends.
      if (users.length > 0 && bytes + size > PAGE_BYTES) return { users, last, more: true };
      users.push(text);
      bytes += size;
      last = row;
    }
    if (rows.length <= batch) return { users, last, more: false };
    if (users.length >= limit) return { users, last, more: true };
    // Sized by what the accounts read so far weighed, and by what is left of the page's bytes.
    const weight = bytes / users.length;
    const fits = Math.ceil(Math.min(READ_BYTES, PAGE_BYTES - bytes + weight) / weight);
    batch = Math.max(1, Math.min(limit - users.length, fits));
    walk = keyset({ c: last!.createdAt.getTime(), i: last!.id, t: 0 }, order);
  }
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
    const site = c.get('token').site;
    const scope = cursorScope(site, filters, order);
    const walk = keyset(after === undefined ? undefined : cursors.read(after, scope), order);
    // A place among the site's heavy reads (HEAVY_READS_PER_SITE), held while the page is built.
    const page = await inHeavyRead(c, c.get('deps').heavyReads, () =>
      boundedPage(db, site, filters, walk, order, limit),
    );
    const next: ListUsersResponse['result']['next'] =
      page.more && page.last !== undefined
        ? cursors.sign({ c: page.last.createdAt.getTime(), i: page.last.id }, scope)
        : null;
    // Written as text from the accounts' own: the page is not built a second time as one object.
    const body = `{"result":{"users":[${page.users.join(',')}],"next":${JSON.stringify(next)}}}`;
    return c.body(body, 200, { 'Content-Type': 'application/json' });
  },
});
