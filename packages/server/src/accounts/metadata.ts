// An account's metadata: the site's own JSON object on the account (issue 28, point 1). Its
// bounds, the merge an update applies (RFC 7396, in SQL: see jsonb_merge_patch in migration 0016),
// list's containment filter, and the site's own JSON Schema for it.
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { and, eq, gt, type SQL, sql } from 'drizzle-orm';
import { invalidRequest } from '../contract/validation.ts';
import type { Db } from '../db/client.ts';
import { metadataSchemas, users } from '../db/schema.ts';
import { ApiError, type FieldError } from '../errors.ts';
import { inReachOf } from './in-reach.ts';

// ajv-formats ships CommonJS with a default export that nodenext sees as a namespace.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

export type Metadata = Record<string, unknown>;

/** The size of compact JSON in UTF-8: 8× Clerk's 8 KB, and far under a body's 64 KiB limit on import's 2 MiB. */
export const METADATA_MAX_BYTES = 64 * 1024;
/** Levels of objects and arrays: room for any real document, and a bound on every recursive walk. */
export const METADATA_MAX_DEPTH = 16;

const isObject = (value: unknown): value is Metadata =>
  value !== null && typeof value === 'object' && !Array.isArray(value);

/** RFC 6901: `~` and `/` in a key are escaped in a pointer. */
const escapeKey = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/**
 * What is wrong with a metadata value, at `pointer` (the field's, `/metadata` or
 * `/users/3/metadata`): not an object, nested too deep, a string or key that PostgreSQL's jsonb
 * cannot hold (U+0000, an unpaired surrogate), or too large. The first fault found, or undefined.
 */
export function metadataFault(value: unknown, pointer: string): FieldError | undefined {
  if (!isObject(value)) return { pointer, code: 'invalid_type', message: 'must be an object' };
  const badText = (text: string) => text.includes('\u0000') || !text.isWellFormed();
  const walk = (node: unknown, at: string, depth: number): FieldError | undefined => {
    if (typeof node === 'string') {
      return badText(node)
        ? { pointer: at, code: 'invalid_format', message: 'must not contain U+0000 or an unpaired surrogate' }
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
    const entries: [string, unknown][] = Array.isArray(node)
      ? node.map((v, i) => [String(i), v])
      : Object.entries(node);
    for (const [key, child] of entries) {
      if (!Array.isArray(node) && badText(key)) {
        return { pointer: at, code: 'invalid_format', message: 'has a key with U+0000 or an unpaired surrogate' };
      }
      const fault = walk(child, `${at}/${escapeKey(key)}`, depth + 1);
      if (fault !== undefined) return fault;
    }
    return undefined;
  };
  return walk(value, pointer, 1) ?? sizeFault(value, pointer);
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

/** The account's metadata with `patch` merged into it (RFC 7396), in the UPDATE's own statement. */
export const mergedMetadata = (patch: Metadata): SQL => sql`jsonb_merge_patch(${users.metadata}, ${jsonbOf(patch)})`;

// ── The site's metadata schema ─────────────────────────────────────────────────────────────────

/** A site's schema: 32 KiB, room for any real one, and what the admin socket's 64 KiB request carries escaped. */
export const SCHEMA_FILE_BYTES = 32 * 1024;

// A site's schema is the operator's; unknown keywords (`x-…`, `$comment`) are allowed, as
// most tools' schemas carry some. Nothing is fetched: a `$ref` outside the schema fails to compile.
const siteAjv = new Ajv2020({ strict: false, allErrors: true });
addFormats(siteAjv);

/** Compiled schemas by their text: each is compiled once per process, and the few sites' fit. */
const compiled = new Map<string, ValidateFunction>();

function compile(schema: unknown): ValidateFunction {
  const key = JSON.stringify(schema);
  let validate = compiled.get(key);
  if (validate === undefined) {
    validate = siteAjv.compile(schema as object);
    if (compiled.size >= 256) compiled.delete(compiled.keys().next().value!);
    compiled.set(key, validate);
  }
  return validate;
}

/** Why a site's schema cannot be used, or undefined: it must compile as JSON Schema 2020-12. */
export function schemaProblem(schema: unknown): string | undefined {
  if (schema === null || typeof schema !== 'object' || Array.isArray(schema)) return 'the schema must be a JSON object';
  if (Buffer.byteLength(JSON.stringify(schema)) > SCHEMA_FILE_BYTES)
    return `the schema is over ${SCHEMA_FILE_BYTES} bytes`;
  try {
    compile(schema);
    return undefined;
  } catch (error) {
    return `not a JSON Schema (2020-12) this service can use: ${(error as Error).message}`;
  }
}

/** The site's metadata validator, or undefined when the site has no schema. */
export async function siteMetadataValidator(db: Db, site: string): Promise<ValidateFunction | undefined> {
  const [row] = await db
    .select({ schema: metadataSchemas.schema })
    .from(metadataSchemas)
    .where(eq(metadataSchemas.site, site));
  return row === undefined ? undefined : compile(row.schema);
}

/** The validator of a site's schema as read by a caller's own statement (null: the site has none). */
export const siteSchemaValidator = (schema: unknown): ValidateFunction | undefined =>
  schema === null || schema === undefined ? undefined : compile(schema);

const fieldCode = (e: ErrorObject): FieldError['code'] =>
  e.keyword === 'required'
    ? 'required'
    : e.keyword === 'additionalProperties'
      ? 'unknown_field'
      : e.keyword === 'type'
        ? 'invalid_type'
        : e.keyword === 'maxLength' || e.keyword === 'maxItems' || e.keyword === 'maxProperties'
          ? 'too_long'
          : e.keyword === 'minLength' || e.keyword === 'minItems' || e.keyword === 'minProperties'
            ? 'too_short'
            : 'invalid_format';

/** The site schema's faults in `metadata`, pointers under `pointer` (one per place, at most 20). */
export function siteSchemaFaults(validate: ValidateFunction, metadata: Metadata, pointer: string): FieldError[] {
  if (validate(metadata)) return [];
  const faults = new Map<string, FieldError>();
  for (const e of validate.errors ?? []) {
    const at =
      e.keyword === 'required'
        ? `${e.instancePath}/${escapeKey(String(e.params.missingProperty))}`
        : e.keyword === 'additionalProperties'
          ? `${e.instancePath}/${escapeKey(String(e.params.additionalProperty))}`
          : e.instancePath;
    const full = `${pointer}${at}`;
    const cut = full.length > 64 ? `${full.slice(0, 63)}…` : full;
    if (!faults.has(cut)) faults.set(cut, { pointer: cut, code: fieldCode(e), message: e.message ?? 'is not valid' });
  }
  return [...faults.values()].slice(0, 20);
}

export const invalidMetadata = (errors: FieldError[]) =>
  new ApiError(400, 'invalid_metadata', "The account's metadata does not match the site's metadata schema.", {
    errors,
  });

/** 400 invalid_metadata unless the site's schema (if any) accepts `metadata`. */
export function assertSiteSchema(validate: ValidateFunction | undefined, metadata: Metadata): void {
  if (validate === undefined) return;
  const faults = siteSchemaFaults(validate, metadata, '/metadata');
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
  const validate = compile(schema);
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
    for (const row of page) if (!validate(row.metadata)) refused += 1;
    accounts += page.length;
    if (page.length < 1000) return { accounts, refused };
    last = page.at(-1)!.id;
  }
}
