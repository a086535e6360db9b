// An account's metadata: the site's own JSON object on the account (issue 28, point 1). Its
// bounds, the merge an update applies (RFC 7396, in SQL: see jsonb_merge_patch in migration 0016),
// list's containment filter, and the site's own JSON Schema for it.

import { and, eq, gt, type SQL, sql } from 'drizzle-orm';
import { brokenDisplayRule } from '../contract/validation.ts';
import type { Db } from '../db/client.ts';
import { metadataSchemas, users } from '../db/schema.ts';
import { ApiError, type FieldError, invalidRequest } from '../errors.ts';
import { inReachOf } from '../kernel/in-reach.ts';
import { checkSiteSchema } from './schema-checks.ts';
import { escapeKey, METADATA_MAX_DEPTH, schemaProblem } from './site-schema.ts';

export type Metadata = Record<string, unknown>;

/** The size of compact JSON in UTF-8: 8× Clerk's 8 KB, and far under a body's 64 KiB limit on import's 2 MiB. */
export const METADATA_MAX_BYTES = 64 * 1024;
export { METADATA_MAX_DEPTH };

const isObject = (value: unknown): value is Metadata =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** Why a key breaking one of DisplayText's rules is refused (contract/validation.ts's TEXT_RULES). */
const KEY_REFUSED: Record<string, string> = {
  'nothing-visible': 'has a key that shows nothing (only spaces or invisible characters)',
  'line-separators': 'has a key with U+2028 or U+2029',
  'bidi-formatting': 'has a key with bidirectional formatting characters',
};

/**
 * What is wrong with a metadata value, at `pointer` (the field's, `/metadata` or
 * `/users/3/metadata`): not an object, nested too deep, a string or key that PostgreSQL's jsonb
 * cannot hold (U+0000, an unpaired surrogate), a key that breaks DisplayText's rules (it is shown
 * as a field name), or too large. The first fault found, or undefined.
 */
export function metadataFault(value: unknown, pointer: string): FieldError | undefined {
  if (!isObject(value)) return { pointer, code: 'invalid_type', message: 'must be an object' };
  const badText = (text: string) => text.includes('\u0000') || !text.isWellFormed();
  // The walk allocates nothing per node (a pointer is written only for a fault): a 64 KiB
  // document holds some 20,000 nodes, and every site's requests share the garbage collector.
  const path: string[] = [];
  const here = () => `${pointer}${path.map((key) => `/${escapeKey(key)}`).join('')}`;
  const walk = (node: unknown, depth: number): FieldError | undefined => {
    if (typeof node === 'string') {
      return badText(node)
        ? { pointer: here(), code: 'invalid_format', message: 'must not contain U+0000 or an unpaired surrogate' }
        : undefined;
    }
    if (node === null || typeof node !== 'object') return undefined;
    if (depth > METADATA_MAX_DEPTH) {
      return {
        pointer,
        code: 'not_allowed',
        message: `must not be nested more than ${METADATA_MAX_DEPTH} levels deep`,
      };
    }
    if (Array.isArray(node)) {
      for (let i = 0; i < node.length; i++) {
        const child = node[i];
        if (child === null || (typeof child !== 'object' && typeof child !== 'string')) continue;
        path.push(String(i));
        const fault = walk(child, depth + 1);
        path.pop();
        if (fault !== undefined) return fault;
      }
      return undefined;
    }
    for (const key in node) {
      if (!Object.hasOwn(node, key)) continue;
      if (badText(key)) {
        return { pointer: here(), code: 'invalid_format', message: 'has a key with U+0000 or an unpaired surrogate' };
      }
      // Keys are shown as field names: DisplayText's rules of what shows ("" is left alone).
      const broken = key === '' ? undefined : brokenDisplayRule(key);
      if (broken !== undefined) return { pointer: here(), code: 'invalid_format', message: KEY_REFUSED[broken]! };
      path.push(key);
      const fault = walk((node as Metadata)[key], depth + 1);
      path.pop();
      if (fault !== undefined) return fault;
    }
    return undefined;
  };
  return walk(value, 1) ?? sizeFault(value, pointer);
}

/** Too large as compact JSON in UTF-8 (what a merge may leave too). */
export function sizeFault(value: Metadata, pointer: string): FieldError | undefined {
  return Buffer.byteLength(JSON.stringify(value)) > METADATA_MAX_BYTES
    ? { pointer, code: 'too_long', message: `must be at most ${METADATA_MAX_BYTES} bytes as compact JSON` }
    : undefined;
}

/** 400 unless `value` is metadata within its bounds. */
export function checkMetadata(value: unknown, pointer = '/metadata'): asserts value is Metadata {
  const fault = metadataFault(value, pointer);
  if (fault !== undefined) throw invalidRequest('The metadata is not valid.', [fault]);
}

/** list's and count's `metadata=`: a JSON object within metadata's bounds, else 400 at /metadata. */
export function parseMetadataFilter(text: string): Metadata {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw invalidRequest('The query is not valid.', [
      { pointer: '/metadata', code: 'invalid_format', message: 'must be a JSON object' },
    ]);
  }
  checkMetadata(value);
  return value;
}

// JSON goes to PostgreSQL as text, cast there: a parameter typed jsonb is encoded by the driver
// (postgres.js JSON-encodes it again, making a string of the object).
const jsonbOf = (value: Metadata): SQL => sql`${JSON.stringify(value)}::text::jsonb`;

/** Accounts whose metadata contains `wanted` (jsonb `@>`), for rows already read (list's walk). */
export const metadataContains = (wanted: Metadata): SQL => sql`${users.metadata} @> ${jsonbOf(wanted)}`;

/**
 * The same of `site`'s accounts, in the form users_metadata_site_idx serves: the metadata under
 * the site's name, `{"<site>": metadata}`, so that the index's entries (paths hashed with their
 * value) are each one site's, and so are the planner's statistics of the expression (issue 41,
 * F7: a value 300,000 of another site's rows held made a count of it 3-6 times slower). The
 * expression must stay as it is in db/schema.ts for PostgreSQL to use the index.
 */
export const siteMetadataContains = (site: string, wanted: Metadata): SQL =>
  sql`jsonb_set('{}'::jsonb, array[${users.site}], ${users.metadata}) @> ${jsonbOf({ [site]: wanted })}`;

/**
 * The account's metadata (or another row's metadata column: an organization's) with `patch`
 * merged into it (RFC 7396), in the UPDATE's own statement.
 */
export const mergedMetadata = (patch: Metadata, column: SQL | typeof users.metadata = users.metadata): SQL =>
  sql`jsonb_merge_patch(${column}, ${jsonbOf(patch)})`;

// ── The site's metadata schema ─────────────────────────────────────────────────────────────────

export { SCHEMA_FILE_BYTES, schemaProblem } from './site-schema.ts';

/** The site's schema as stored, or undefined when it has none. */
export async function siteSchemaOf(db: Db, site: string): Promise<unknown> {
  const [row] = await db
    .select({ schema: metadataSchemas.schema })
    .from(metadataSchemas)
    .where(eq(metadataSchemas.site, site));
  return row?.schema ?? undefined;
}

export const invalidMetadata = (errors: FieldError[]) =>
  new ApiError('invalid_metadata', "The account's metadata does not match the site's metadata schema.", {
    errors,
  });

/** 400 invalid_metadata unless the site's schema (none: null or undefined) accepts `metadata`. */
export async function assertSiteSchema(
  site: string,
  schema: unknown,
  metadata: Metadata,
  signal?: AbortSignal,
): Promise<void> {
  if (schema === null || schema === undefined) return;
  const faults = await checkSiteSchema(site, schema, metadata, '/metadata', signal);
  if (faults.length > 0) throw invalidMetadata(faults);
}

/**
 * Sets (or, with `undefined`, clears) a site's metadata schema. Existing accounts are not
 * changed: the answer says how many of the site's accounts the schema refuses, each held to it
 * at its next write of metadata.
 */
export async function setMetadataSchema(
  db: Db,
  site: string,
  schema: unknown,
): Promise<{ accounts: number; refused: number }> {
  if (schema === undefined) {
    await db.delete(metadataSchemas).where(eq(metadataSchemas.site, site));
    return { accounts: 0, refused: 0 };
  }
  const problem = schemaProblem(schema);
  if (problem !== undefined) throw new Error(problem);
  await db
    .insert(metadataSchemas)
    .values({ site, schema })
    .onConflictDoUpdate({ target: metadataSchemas.site, set: { schema, updatedAt: sql`now()` } });
  let accounts = 0;
  let refused = 0;
  let last: string | undefined;
  for (;;) {
    const page = await db
      .select({ id: users.id, metadata: users.metadata })
      .from(users)
      .where(and(inReachOf(site), last === undefined ? undefined : gt(users.id, last)))
      .orderBy(users.id)
      .limit(1000);
    // Each check in the schema worker, in turn with other sites' (schema-checks.ts).
    for (const row of page) {
      if ((await checkSiteSchema(site, schema, row.metadata as Metadata, '')).length > 0) refused += 1;
    }
    accounts += page.length;
    if (page.length < 1000) return { accounts, refused };
    last = page.at(-1)!.id;
  }
}
