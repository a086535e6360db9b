// A site's own JSON Schema for its accounts' metadata (issue 28), and what bounds its cost
// (issue 41, F1): compiled and checked here, with nothing of the database or HTTP, so that the
// checks can run in a worker thread (site-schema-worker.ts, schema-checks.ts).
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { RE2JS, RE2JSException } from 're2js';

// ajv-formats ships CommonJS with a default export that nodenext sees as a namespace.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** Levels of objects and arrays: room for any real document, and a bound on every recursive walk. */
export const METADATA_MAX_DEPTH = 16;

/** RFC 6901: `~` and `/` in a key are escaped in a pointer. */
export const escapeKey = (key: string) => key.replace(/~/g, '~0').replace(/\//g, '~1');

/** A fault at a pointer into the metadata (an HTTP FieldError's shape). */
export interface SchemaFault {
  pointer: string;
  code: 'required' | 'unknown_field' | 'invalid_type' | 'too_long' | 'too_short' | 'invalid_format' | 'not_allowed';
  message: string;
}

/** A site's schema: 32 KiB, room for any real one, and what the admin socket's 64 KiB request carries escaped. */
export const SCHEMA_FILE_BYTES = 32 * 1024;

// A site's schema is the operator's; unknown keywords (`x-…`, `$comment`) are allowed, as
// most tools' schemas carry some. Nothing is fetched: a `$ref` outside the schema fails to compile.
//
// It is checked on what every site shares (issue 41, F1), so what it can cost is bounded (and the
// check runs in a worker under a deadline besides: schema-checks.ts):
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

const fieldCode = (e: ErrorObject): SchemaFault['code'] =>
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
export function siteSchemaFaults(
  validate: ValidateFunction,
  metadata: Record<string, unknown>,
  pointer: string,
): SchemaFault[] {
  if (validate(metadata)) return [];
  const faults = new Map<string, SchemaFault>();
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
