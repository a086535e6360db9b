// An account's metadata: the site's own JSON object on the account (issue 28, point 1). Its
// bounds, the merge an update applies (RFC 7396, in SQL: see jsonb_merge_patch in migration 0016),
// list's containment filter, and the site's own JSON Schema for it.

import { setImmediate } from 'node:timers/promises';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { and, eq, gt, type SQL, sql } from 'drizzle-orm';
import { RE2JS, RE2JSException } from 're2js';
import type { Db } from '../db/client.ts';
import { metadataSchemas, users } from '../db/schema.ts';
import { ApiError, type FieldError } from '../http/errors.ts';
import { invalidRequest } from '../http/validation.ts';
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

/** Accounts whose metadata contains `wanted` (jsonb `@>`): the form users_metadata_idx serves. */
export const metadataContains = (wanted: Metadata): SQL => sql`${users.metadata} @> ${jsonbOf(wanted)}`;

/** The account's metadata with `patch` merged into it (RFC 7396), in the UPDATE's own statement. */
export const mergedMetadata = (patch: Metadata): SQL => sql`jsonb_merge_patch(${users.metadata}, ${jsonbOf(patch)})`;

// ── The site's metadata schema ─────────────────────────────────────────────────────────────────

/** A site's schema: 32 KiB, room for any real one, and what the admin socket's 64 KiB request carries escaped. */
export const SCHEMA_FILE_BYTES = 32 * 1024;

// A site's schema is the operator's; unknown keywords (`x-…`, `$comment`) are allowed, as
// most tools' schemas carry some. Nothing is fetched: a `$ref` outside the schema fails to compile.
//
// It runs on the event loop every site shares (issue 41, F1), so what it can cost is bounded:
// - `pattern`, `patternProperties` (and so `propertyNames`' pattern) go through RE2 (re2js, a
//   pure-JS port: no native build, no wasm memory to free), whose time is linear in the text.
//   ECMAScript's backtracking engine took 27 s over `^(a+)+$` and 31 characters. A pattern RE2
//   cannot run in linear time (a backreference, a lookahead or lookbehind) fails to compile:
//   refused at `metadata-schema set`.
// - `allErrors` is off: the first fault is reported, and Ajv's early exits stay (`maxItems` is
//   checked before `uniqueItems`, a failed `type` before the rest).
// - `uniqueItems` is refused unless its items have a scalar `type` (see costProblem): Ajv then
//   compares them through a map, in linear time, instead of pairwise deep equality (0.9–1.5 s
//   over a 64 KiB array of small objects).
/** Ajv's RegExp engine for site schemas: RE2's syntax (ECMAScript's, less what needs backtracking). */
const linearRegExp = Object.assign((pattern: string) => RE2JS.compile(RE2JS.translateRegExp(pattern)), {
  code: 're2js',
});
const siteAjv = new Ajv2020({ strict: false, allErrors: false, code: { regExp: linearRegExp } });
addFormats(siteAjv);

const SCALAR_TYPES = new Set(['string', 'number', 'integer', 'boolean', 'null']);
/** Keywords whose value maps names (of properties, of definitions) to schemas: their keys are not keywords. */
const SCHEMA_MAPS = new Set(['properties', 'patternProperties', '$defs', 'definitions', 'dependentSchemas']);

/**
 * What in a site's schema could not be checked in bounded time, at its JSON pointer, or undefined.
 * Every object in the schema is looked at (a `$ref` may point anywhere in it), the names in a map
 * of schemas excepted.
 */
function costProblem(schema: unknown): string | undefined {
  const walk = (node: unknown, at: string, namesOnly: boolean): string | undefined => {
    if (node === null || typeof node !== 'object') return undefined;
    if (Array.isArray(node)) {
      for (const [i, child] of node.entries()) {
        const found = walk(child, `${at}/${i}`, false);
        if (found !== undefined) return found;
      }
      return undefined;
    }
    const object = node as Record<string, unknown>;
    if (!namesOnly && object.uniqueItems === true) {
      const items = object.items;
      const type = items !== null && typeof items === 'object' ? (items as Record<string, unknown>).type : undefined;
      const types = Array.isArray(type) ? type : [type];
      if (!types.every((t) => typeof t === 'string' && SCALAR_TYPES.has(t))) {
        return (
          `uniqueItems at ${at || '/'} needs "items" with a scalar "type" ` +
          '("string", "number", "integer", "boolean" or "null", or a list of them): ' +
          'comparing objects or arrays pairwise takes time that grows with the square of the array'
        );
      }
    }
    for (const [key, child] of Object.entries(object)) {
      const found = walk(child, `${at}/${escapeKey(key)}`, !namesOnly && SCHEMA_MAPS.has(key));
      if (found !== undefined) return found;
    }
    return undefined;
  };
  return walk(schema, '', false);
}

/** Subschemas applied to the same place in the metadata as the schema that holds them. */
const IN_PLACE_LISTS = ['allOf', 'anyOf', 'oneOf'];
const IN_PLACE_ONES = ['not', 'if', 'then', 'else'];
/** Schema evaluations one place in the metadata may cost (in-place subschemas and `$ref`s, counted out). */
export const SCHEMA_WORK_MAX = 64;

/**
 * How many schema evaluations one place in the metadata may receive at most, whatever its depth: each in-place subschema (allOf, anyOf, oneOf, not, if/then/else,
 * dependentSchemas, `$ref`) counts, so a chain of `anyOf`s over `$ref`s (2^20 evaluations from
 * a schema of 1 KiB: 2.3 s over 52 bytes) is refused. A `$ref` that comes back to its schema
 * without going down into the metadata is Infinity (it would never end). `$ref`s are resolved
 * as JSON pointers within the schema; one Ajv resolves otherwise (`$id`, anchors) counts 1.
 */
function schemaWork(root: unknown): number {
  const memo = new Map<unknown, number[]>();
  const resolve = (ref: unknown): unknown => {
    if (typeof ref !== 'string' || !ref.startsWith('#')) return undefined;
    let node: unknown = root;
    for (const part of ref.slice(1).split('/').slice(1)) {
      const key = decodeURIComponent(part).replace(/~1/g, '/').replace(/~0/g, '~');
      node = node !== null && typeof node === 'object' ? (node as Record<string, unknown>)[key] : undefined;
    }
    return node;
  };
  const onPath = new Map<unknown, Set<number>>();
  const work = (node: unknown, d: number): number => {
    if (node === null || typeof node !== 'object' || Array.isArray(node)) return d === 0 ? 1 : 0;
    const mark = memo.get(node)?.[d];
    if (mark !== undefined) return mark;
    const key = node as Record<string, unknown>;
    if (onPath.get(node)?.has(d)) return Number.POSITIVE_INFINITY;
    const path = onPath.get(node) ?? new Set<number>();
    onPath.set(node, path.add(d));
    const inPlace: unknown[] = [];
    for (const k of IN_PLACE_LISTS) if (Array.isArray(key[k])) inPlace.push(...(key[k] as unknown[]));
    for (const k of IN_PLACE_ONES) if (k in key) inPlace.push(key[k]);
    for (const k of ['dependentSchemas', 'dependencies'])
      if (key[k] !== null && typeof key[k] === 'object') inPlace.push(...Object.values(key[k] as object));
    for (const k of ['$ref', '$dynamicRef', '$recursiveRef']) {
      if (k in key) {
        const target = resolve(key[k]);
        inPlace.push(target === undefined ? true : target);
      }
    }
    let total = d === 0 ? 1 : 0;
    for (const child of inPlace) total += work(child, d);
    if (d > 0) {
      const named = (k: string) =>
        key[k] !== null && typeof key[k] === 'object' ? Object.values(key[k] as object) : ([] as unknown[]);
      const best = (list: unknown[]) => list.reduce<number>((m, c) => Math.max(m, work(c, d - 1)), 0);
      const sum = (list: unknown[]) => list.reduce<number>((m, c) => m + work(c, d - 1), 0);
      const one = (k: string) => (k in key ? [key[k]] : []);
      const patterns = named('patternProperties');
      const onObject =
        best([...named('properties'), ...one('additionalProperties')]) +
        sum(patterns) +
        (d === 1 ? patterns.length : 0) +
        sum([...one('propertyNames'), ...one('unevaluatedProperties')]);
      const prefix = Array.isArray(key.prefixItems) ? key.prefixItems : [];
      const items = Array.isArray(key.items) ? key.items : one('items');
      const onArray =
        best([...prefix, ...items, ...one('additionalItems')]) + sum([...one('contains'), ...one('unevaluatedItems')]);
      total += Math.max(onObject, onArray);
    }
    path.delete(d);
    const row = memo.get(node) ?? [];
    row[d] = total;
    memo.set(node, row);
    return total;
  };
  let most = 0;
  for (let d = 0; d <= METADATA_MAX_DEPTH; d++) most = Math.max(most, work(root, d));
  return most;
}

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
  const costly = costProblem(schema);
  if (costly !== undefined) return `the schema cannot be checked in bounded time: ${costly}`;
  const work = schemaWork(schema);
  if (work > SCHEMA_WORK_MAX) {
    return (
      'the schema cannot be checked in bounded time: ' +
      (work === Number.POSITIVE_INFINITY
        ? 'a $ref leads back to its own schema without going down into the metadata'
        : `one place in the metadata would be checked against ${work} subschemas (allOf, anyOf, oneOf, not, ` +
          `if/then/else, dependentSchemas and $ref each count); at most ${SCHEMA_WORK_MAX} are allowed`)
    );
  }
  try {
    compile(schema);
    return undefined;
  } catch (error) {
    if (error instanceof RE2JSException) {
      return (
        `a pattern this service cannot run in linear time: ${error.message} ` +
        '(patterns use RE2 syntax: no backreferences, lookahead or lookbehind; repeat counts up to 1000)'
      );
    }
    return `not a JSON Schema (2020-12) this service can use: ${(error as Error).message}`;
  }
}

/** The site's metadata validator, or undefined when the site has no schema. */
export async function siteMetadataValidator(db: Db, site: string): Promise<ValidateFunction | undefined> {
  const [row] = await db
    .select({ schema: metadataSchemas.schema })
    .from(metadataSchemas)
    .where(eq(metadataSchemas.site, site));
  return row === undefined ? undefined : storedValidator(row.schema);
}

/** The validator of a site's schema as read by a caller's own statement (null: the site has none). */
export const siteSchemaValidator = (schema: unknown): ValidateFunction | undefined =>
  schema === null || schema === undefined ? undefined : storedValidator(schema);

/**
 * The validator of a schema as stored. One set before this service bounded what a schema may
 * cost (issue 41) may now be refused: it refuses every metadata, saying so, rather than running
 * without bound (or answering 500) — its operator sets it again (`metadata-schema set`).
 */
function storedValidator(schema: unknown): ValidateFunction {
  const cached = compiled.get(JSON.stringify(schema));
  if (cached !== undefined) return cached;
  const problem = schemaProblem(schema);
  if (problem === undefined) return compile(schema);
  const refuseAll = () => false;
  const error: ErrorObject = {
    keyword: 'x-unusable',
    instancePath: '',
    schemaPath: '#',
    params: {},
    message: `cannot be checked: the site's metadata schema must be set again by its operator (${problem})`,
  };
  const validate = Object.assign(refuseAll, { errors: [error] }) as unknown as ValidateFunction;
  if (compiled.size >= 256) compiled.delete(compiled.keys().next().value!);
  compiled.set(JSON.stringify(schema), validate);
  return validate;
}

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
  let turn = performance.now();
  for (;;) {
    const page = await db
      .select({ id: users.id, metadata: users.metadata })
      .from(users)
      .where(and(inReachOf(site), last === undefined ? undefined : gt(users.id, last)))
      .orderBy(users.id)
      .limit(1000);
    for (const row of page) {
      if (!validate(row.metadata)) refused += 1;
      // Other sites' requests are served between accounts (issue 41).
      if (performance.now() - turn > 5) {
        await setImmediate();
        turn = performance.now();
      }
    }
    accounts += page.length;
    if (page.length < 1000) return { accounts, refused };
    last = page.at(-1)!.id;
  }
}
