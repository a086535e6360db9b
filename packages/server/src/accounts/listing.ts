// list and count: the filters as SQL, and list's cursors. Pages are by key (created_at, id), so a
// page deep in the list costs what the first costs, and rows written meanwhile neither repeat
// nor push others out of the walk.
import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto';
import { and, asc, count, countDistinct, desc, eq, gt, isNotNull, lt, type SQL, sql } from 'drizzle-orm';
import type { Db } from '../db/client.ts';
import { serviceKeys, userFactors, userIdentities, users } from '../db/schema.ts';
import { ApiError, invalidRequest } from '../errors.ts';
import { emailDeliverableSql } from '../kernel/email-deliverable.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import { type Identity, identitiesOf } from './linked-identities.ts';
import { metadataContains, parseMetadataFilter, siteMetadataContains } from './metadata.ts';

export interface ListFilters {
  email?: string;
  name?: string;
  createdAfter?: string;
  createdBefore?: string;
  disabled?: boolean;
  /** A JSON object as text: accounts whose metadata contains it (`@>`). */
  metadata?: string;
  /** What a person pasted: an id, an email's start or domain, a name, a phone, an identity's subject (searchCondition). */
  search?: string;
}

/** The query's own rules beyond its schema: the created range, and the metadata filter's JSON. */
export function checkFilters(filters: ListFilters): void {
  checkInstants(filters);
  if (filters.metadata !== undefined) parseMetadataFilter(filters.metadata);
  if (filters.search !== undefined && filters.search.trim() === '')
    throw invalidRequest('The query is not valid.', [
      { pointer: '/search', code: 'invalid_format', message: 'must hold more than spaces' },
    ]);
}

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** A domain as people paste one: labels and dots, no `@`, no space (`acme.example`). */
const DOMAIN = /^[^\s@]+\.[^\s@.]+$/;
/** A phone number as people write one: digits with `+`, spaces, dots, dashes and brackets among them. */
const PHONE = /^\+?[0-9 ().-]+$/;

/**
 * user/list's `search`: an account matching any of its readings (the spec's ListSearch). Each
 * reading is a condition one index answers (schema.ts: the email prefix and domain indexes, the
 * name prefix and word indexes, the phone-digits index, the primary key, and the identities'
 * subject index), so that PostgreSQL ORs their bitmaps: a search reads its matches, never the
 * site's accounts. The identities' subjects are looked up first, as an array (an InitPlan), so
 * that the primary key answers them in the same OR.
 */
export function searchCondition(text: string, site?: string): SQL {
  const term = text.trim().toLowerCase();
  const readings: SQL[] = [sql`lower(${users.email}) like ${`${literal(term)}%`}`];
  if (UUID.test(term)) readings.push(sql`${users.id} = ${term}::uuid`);
  const domain = term.startsWith('@') ? term.slice(1) : DOMAIN.test(term) ? term : undefined;
  if (domain !== undefined && domain !== '')
    readings.push(sql`regexp_replace(lower(${users.email}), '^.*@', '') = ${domain}`);
  readings.push(sql`lower(${users.name}) like ${`${literal(term)}%`}`);
  if (!/\s/.test(term))
    readings.push(sql`regexp_split_to_array(lower(${users.name}), '[[:space:]]+') @> array[${term}]::text[]`);
  const digits = term.replace(/[^0-9]/g, '').replace(/^0+/, '');
  if (PHONE.test(term) && digits.length >= 6 && digits.length <= 20)
    readings.push(
      sql`reverse(regexp_replace(${users.phone}, '[^0-9]', '', 'g')) like ${`${[...digits].reverse().join('')}%`}`,
    );
  const subject = sql`${userIdentities.subject} = ${text.trim()}`;
  const subjects = sql`array(select ${userIdentities.userId} from ${userIdentities} where ${
    site === undefined ? subject : and(eq(userIdentities.site, site), subject)
  } limit 100)`;
  readings.push(sql`${users.id} = any(${subjects})`);
  return sql`(${sql.join(readings, sql` or `)})`;
}

/**
 * The spec's words for the created range: an RFC 3339 instant that exists. The schema's date-time
 * lets through a leap second (`…T23:59:60Z`), which a Date cannot hold, and year 0000, which
 * PostgreSQL has not: both 400, not 500.
 */
export function checkInstants(filters: ListFilters): void {
  const bad = (['createdAfter', 'createdBefore'] as const).filter((name) => {
    const text = filters[name];
    if (text === undefined) return false;
    const at = new Date(text);
    return Number.isNaN(at.getTime()) || at.getUTCFullYear() < 1;
  });
  if (bad.length > 0) {
    throw invalidRequest(
      'The query is not valid.',
      bad.map((name) => ({
        pointer: `/${name}`,
        code: 'invalid_format',
        message: 'must be an instant from year 1 on, without a leap second',
      })),
    );
  }
}

/** `%`, `_` and `\` taken as themselves in a LIKE pattern. */
const literal = (text: string) => text.replace(/[\\%_]/g, (c) => `\\${c}`);

/**
 * The filters' conditions, to AND with the token's reach. With `site`, the metadata filter takes
 * the site-scoped form its index serves (metadata.ts); without, the plain one, for rows already
 * read (the walk's subquery, which has no site column).
 */
export function filterConditions(filters: ListFilters, site?: string): SQL[] {
  const conditions: SQL[] = [];
  if (filters.email !== undefined) {
    const wanted = filters.email.toLowerCase();
    // The two shapes each have an index (see schema.ts): keep these expressions as they are there.
    conditions.push(
      wanted.startsWith('@')
        ? sql`regexp_replace(lower(${users.email}), '^.*@', '') = ${wanted.slice(1)}`
        : sql`lower(${users.email}) like ${`${literal(wanted)}%`}`,
    );
  }
  if (filters.name !== undefined)
    conditions.push(sql`lower(${users.name}) like ${`%${literal(filters.name.toLowerCase())}%`}`);
  if (filters.createdAfter !== undefined) conditions.push(gt(users.createdAt, new Date(filters.createdAfter)));
  if (filters.createdBefore !== undefined) conditions.push(lt(users.createdAt, new Date(filters.createdBefore)));
  if (filters.disabled !== undefined) conditions.push(eq(users.disabled, filters.disabled));
  if (filters.metadata !== undefined) {
    const wanted = parseMetadataFilter(filters.metadata);
    conditions.push(site === undefined ? metadataContains(wanted) : siteMetadataContains(site, wanted));
  }
  if (filters.search !== undefined) conditions.push(searchCondition(filters.search, site));
  return conditions;
}

export const invalidCursor = (why = 'is not a cursor of this list') =>
  new ApiError(
    'invalid_cursor',
    'This cursor was not given by this service for these filters; start again without after.',
    {
      errors: [{ pointer: '/after', code: 'invalid_format', message: why }],
    },
  );

/** A cursor as sign() writes it: two base64url parts. Checked without data, so the mock refuses alike. */
const CURSOR_SHAPE = /^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/;

/** 400 invalid_cursor for what cannot be a cursor of any list, before any key is read. */
export function checkCursorShape(after: string | undefined): void {
  if (after !== undefined && !CURSOR_SHAPE.test(after)) throw invalidCursor();
}

// A page's cursor: where it ended, signed with what it may be used for.
interface Position {
  /** created_at of the last row, in ms (the column keeps milliseconds). */
  c: number;
  /** Its id, which orders rows created in the same millisecond. */
  i: string;
  /** When the cursor was given, in ms. */
  t: number;
}

const CURSOR_LIFETIME_MS = 24 * 60 * 60 * 1000;

export interface Cursors {
  sign(position: Omit<Position, 't'>, scope: string): string;
  /** The position, or 400 invalid_cursor when it was not signed for this scope or is too old. */
  read(cursor: string, scope: string): Position;
}

/**
 * The signing key is the deployment's, kept in the database and made by the first server that
 * needs it, so that a cursor given by one server is good on every other.
 */
const loaded = new WeakMap<Db, Promise<Cursors>>();
export function cursorsOf(db: Db): Promise<Cursors> {
  let cursors = loaded.get(db);
  if (cursors === undefined) {
    cursors = loadCursors(db);
    // A failure (the database away) is not kept: the next request tries again.
    cursors.catch(() => loaded.delete(db));
    loaded.set(db, cursors);
  }
  return cursors;
}

async function loadCursors(db: Db): Promise<Cursors> {
  await db
    .insert(serviceKeys)
    .values({ name: 'cursor', key: randomBytes(32).toString('base64url') })
    .onConflictDoNothing();
  const [row] = await db.select().from(serviceKeys).where(eq(serviceKeys.name, 'cursor'));
  const key = Buffer.from(row!.key, 'base64url');
  const mac = (body: string, scope: string) => createHmac('sha256', key).update(`${scope}\n${body}`).digest();
  return {
    sign(position, scope) {
      const body = Buffer.from(JSON.stringify({ ...position, t: Date.now() })).toString('base64url');
      return `${body}.${mac(body, scope).toString('base64url')}`;
    },
    read(cursor, scope) {
      const [body, signature, ...rest] = cursor.split('.');
      if (body === undefined || signature === undefined || rest.length > 0) throw invalidCursor();
      const given = Buffer.from(signature, 'base64url');
      const expected = mac(body, scope);
      if (given.length !== expected.length || !timingSafeEqual(given, expected)) throw invalidCursor();
      const position = JSON.parse(Buffer.from(body, 'base64url').toString()) as Position;
      if (Date.now() - position.t > CURSOR_LIFETIME_MS) throw invalidCursor('is more than 24 hours old');
      return position;
    },
  };
}

/** What a cursor is good for: the site and the filters and order it was given with. */
export const cursorScope = (site: string, filters: ListFilters, order: 'asc' | 'desc') =>
  JSON.stringify([
    site,
    order,
    filters.email,
    filters.name,
    filters.createdAfter,
    filters.createdBefore,
    filters.disabled,
    filters.metadata,
    filters.search,
  ]);

/** The rows after `position` in the walk's order, and the walk's ORDER BY. */
export function keyset(position: Position | undefined, order: 'asc' | 'desc') {
  const orderBy = order === 'asc' ? [asc(users.createdAt), asc(users.id)] : [desc(users.createdAt), desc(users.id)];
  if (position === undefined) return { after: undefined, orderBy, order };
  const at = new Date(position.c).toISOString();
  // A row comparison, which PostgreSQL reads as a range of the (site, created_at, id) index; the
  // same test spelt with OR is a filter, which reads every row before the cursor again.
  const after =
    order === 'asc'
      ? sql`(${users.createdAt}, ${users.id}) > (${at}::timestamptz, ${position.i}::uuid)`
      : sql`(${users.createdAt}, ${users.id}) < (${at}::timestamptz, ${position.i}::uuid)`;
  return { after, orderBy, order };
}

/**
 * A metadata filter's page is first looked for by walking this many of the site's accounts in
 * the list's order (the creation index, then the filter on each row: about 0.3 ms at 1M
 * accounts). A filter that one account in 10 or more matches fills a page of 100 there, and
 * nothing else is read. More would cost every rarer filter more before its own read.
 */
export const WALK_BUDGET = 1_000;

/**
 * When the walk did not fill the page but found at least this many matches (one account in 100
 * or more), the page is read by a second walk sized from what the first found (twice the rows it
 * should take, at most LONG_WALK): for a page of 100, about 20,000 rows at one in 100, where
 * counting the matches first would read thousands of them at random. A walk, not the planner's
 * choice: it would read such a value through the GIN index whenever its sample missed it.
 */
export const MANY_IN_WALK = 10;
export const LONG_WALK = 100_000;

/** The second walk's length, from the matches the first found (see MANY_IN_WALK). */
export const secondWalk = (found: number, limit: number) =>
  Math.min(LONG_WALK, Math.ceil((2 * (limit + 1) * WALK_BUDGET) / Math.max(found, 1)));

/**
 * When the walk found fewer: under this many matches, the page is read through the GIN
 * index and sorted (reading every match: about 5 µs each at 1M accounts, a random heap page
 * each, which bounds it); from it on, by walking the creation index to the end of the page
 * (about 0.5 µs a row, in order). For a page of 100 the two cost alike at about
 * sqrt(100 × accounts / 16) matches: 2,500 at 1M.
 */
export const FEW_MATCHES = 3_000;

/**
 * The first matches of a metadata filter within the next WALK_BUDGET accounts in reach, in the
 * list's order, one more than `limit` at most: a page, when it has `limit` + 1 rows. Why not ask
 * PostgreSQL: it cannot estimate jsonb containment from its statistics beyond their sample, and
 * a count of the matches first cost as much as the page for a common value: at 1M
 * accounts, 40–90 ms to count 10,000 of a quarter of the accounts, where this walk takes 0.5 ms.
 * The subquery is named `users`, so that the filters' columns are its columns.
 */
export function walkQuery(
  db: Db,
  site: string,
  filters: ListFilters,
  walk: ReturnType<typeof keyset>,
  limit: number,
  budget = WALK_BUDGET,
) {
  const window = db
    .select(SHOWN_COLUMNS)
    .from(users)
    .where(and(inReachOf(site), walk.after))
    .orderBy(...walk.orderBy)
    .limit(budget)
    .as('users');
  return db
    .select({ ...SHOWN_COLUMNS, emailDeliverable: deliverableOn(site) })
    .from(window)
    .where(and(...filterConditions(filters)))
    .orderBy(...walk.orderBy)
    .limit(limit + 1);
}

/**
 * The page of the filters' matches after the cursor (`limit` + 1 rows at most), in the walk's
 * order, with how many matches there are, counted up to FEW_MATCHES: fewer, and the page is
 * the answer; as many, and the caller walks instead (listQuery). Asked only when the walk did
 * not fill the page: left to itself, PostgreSQL walked the creation index for a filter that 200
 * of 1M accounts matched, reading half of them: 546 ms a page.
 *
 * One statement: the matches are read once through the GIN index (PostgreSQL rechecks each
 * match's row, a random heap page: that is the cost), counted, and sorted for the page's
 * top-N. Their ids first and the page by primary key after cost more (measured at 1M accounts, a
 * filter 500 matched: 4.4 ms against 2.8 ms): a round trip more, and PostgreSQL read the second
 * statement's rows through the GIN index again (the `@>` estimated at 100 rows), every match
 * twice. The subquery is named `users`, so that the filters' columns are its columns.
 */
export function fewMatchesPage(
  db: Db,
  site: string,
  filters: ListFilters,
  walk: ReturnType<typeof keyset>,
  limit: number,
) {
  const matches = db
    .select(SHOWN_COLUMNS)
    .from(users)
    .where(and(inReachOf(site), ...filterConditions(filters, site), walk.after))
    .limit(FEW_MATCHES)
    .as('users');
  // The window is counted over every row of the subquery, before the ORDER BY's top-N.
  return db
    .select({
      ...SHOWN_COLUMNS,
      emailDeliverable: deliverableOn(site),
      matches: sql<number>`count(*) over ()`.mapWith(Number),
    })
    .from(matches)
    .orderBy(...walk.orderBy)
    .limit(limit + 1);
}

/** The columns toUser shows: a page (or a get) never carries a hash, even on its way to toUser. */
export const SHOWN_COLUMNS = {
  id: users.id,
  email: users.email,
  name: users.name,
  phone: users.phone,
  address: users.address,
  disabled: users.disabled,
  disabledUntil: users.disabledUntil,
  disabledReason: users.disabledReason,
  emailVerifiedAt: users.emailVerifiedAt,
  phoneVerifiedAt: users.phoneVerifiedAt,
  passwordBreached: users.passwordBreached,
  metadata: users.metadata,
  createdAt: users.createdAt,
  updatedAt: users.updatedAt,
};

/**
 * `emailDeliverable` of a page's rows, read in the page's outer statement only (of its 100 rows at
 * most, never of a walk's window): the columns are the subquery's, named `users`, or the table's.
 */
const deliverableOn = (site: string) => emailDeliverableSql(sql`${site}`);

/** A page of the site's accounts in reach, one row more than `limit` (whether a next page exists). */
export function listQuery(db: Db, site: string, filters: ListFilters, walk: ReturnType<typeof keyset>, limit: number) {
  return db
    .select({ ...SHOWN_COLUMNS, emailDeliverable: deliverableOn(site) })
    .from(users)
    .where(and(inReachOf(site), ...filterConditions(filters, site), walk.after))
    .orderBy(...walk.orderBy)
    .limit(limit + 1);
}

/** How many of the site's accounts in reach match. */
export function countQuery(db: Db, site: string, filters: ListFilters) {
  return db
    .select({ count: count() })
    .from(users)
    .where(and(inReachOf(site), ...filterConditions(filters, site)));
}

/**
 * What an export leaves out, as its `Export-Omits` header lists it (the spec and
 * docs/import-list-export.md say each in words): an import elsewhere has none of it. Above all the
 * second factors: an account with TOTP or passkeys arrives with its password alone (issue 41, F9).
 */
export const EXPORT_OMITS = ['second-factors', 'disabled', 'password-breached', 'user-ids', 'timestamps'] as const;

/** The site's accounts in reach with an enabled second factor (TOTP or passkey): what an export drops for them. */
export async function accountsWithSecondFactors(db: Db, site: string): Promise<number> {
  const [row] = await db
    .select({ count: countDistinct(users.id) })
    .from(users)
    .innerJoin(userFactors, and(eq(userFactors.userId, users.id), isNotNull(userFactors.enabledAt)))
    .where(inReachOf(site));
  return row?.count ?? 0;
}

/** Accounts exported per page at most: what the server holds of an export at a time. */
export const EXPORT_PAGE = 1000;
/**
 * An export's page is sized to about this many bytes of lines as well: 1,000 accounts of 63 KiB
 * metadata each were 63 MB held at once per export (issue 41, F2), and one read of them held the
 * database's connection (the embedded database's is every site's) and the event loop. The first
 * page is EXPORT_FIRST_PAGE accounts; each next one as many as the bytes take at the last page's weight.
 */
export const EXPORT_PAGE_BYTES = 256 * 1024;
export const EXPORT_FIRST_PAGE = 10;

/** One page of the site's accounts in reach, oldest first, after `position`, `size` at most. */
export function exportPage(db: Db, site: string, position: { c: number; i: string } | undefined, size = EXPORT_PAGE) {
  const walk = keyset(position === undefined ? undefined : { ...position, t: 0 }, 'asc');
  return db
    .select({
      email: users.email,
      name: users.name,
      phone: users.phone,
      address: users.address,
      emailVerifiedAt: users.emailVerifiedAt,
      phoneVerifiedAt: users.phoneVerifiedAt,
      metadata: users.metadata,
      passwordHash: users.passwordHash,
      createdAt: users.createdAt,
      id: users.id,
    })
    .from(users)
    .where(and(inReachOf(site), walk.after))
    .orderBy(...walk.orderBy)
    .limit(size);
}

type ExportRow = Awaited<ReturnType<typeof exportPage>>[number];

/**
 * A row as import takes it: the fields of create (unset ones left out), the stored hash (left out
 * for an account without a password) and the linked identities (left out when none).
 */
export function exportLine(row: ExportRow, identities: Identity[] = []): string {
  const { email, name, phone, address, metadata, passwordHash } = row;
  const emailVerified = row.emailVerifiedAt !== null;
  const phoneVerified = row.phoneVerifiedAt !== null;
  const linked = identities.map((i) => ({
    provider: i.provider,
    subject: i.subject,
    ...(i.email !== null && { email: i.email }),
    emailVerified: i.emailVerified,
  }));
  return `${JSON.stringify({
    email,
    name,
    ...(phone !== null && { phone }),
    ...(address !== null && { address }),
    emailVerified,
    phoneVerified,
    metadata,
    ...((passwordHash !== null || linked.length === 0) && { passwordHash }),
    ...(linked.length > 0 && { identities: linked }),
  })}\n`;
}

/**
 * Every page of an export as its lines (and how many accounts they are), one after the other,
 * each read only when the previous one is taken; about EXPORT_PAGE_BYTES each (see there).
 */
export async function* exportPages(db: Db, site: string): AsyncGenerator<{ lines: string; count: number }> {
  let position: { c: number; i: string } | undefined;
  let size = EXPORT_FIRST_PAGE;
  for (;;) {
    const rows = await exportPage(db, site, position, size);
    if (rows.length > 0) {
      const identities = await identitiesOf(
        db,
        rows.map((r) => r.id),
      );
      const lines = rows.map((r) => exportLine(r, identities.get(r.id))).join('');
      yield { lines, count: rows.length };
      const perRow = Math.max(1, lines.length / rows.length);
      const last = rows.at(-1)!;
      position = { c: last.createdAt.getTime(), i: last.id };
      if (rows.length < size) return;
      size = Math.max(1, Math.min(EXPORT_PAGE, Math.floor(EXPORT_PAGE_BYTES / perRow)));
    } else return;
  }
}
