// Request validators compiled once from spec/openapi.yaml: there is no second copy of the rules.

import type { components } from '@user-accounts/client';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { type FieldError, invalidRequest } from '../errors.ts';
import { loadSpec } from './spec.ts';

// ajv-formats ships CommonJS with a default export that nodenext sees as a namespace.
const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

/** Rewrites the spec's `#/components/schemas/X` refs to the `$defs` of a schema Ajv can load. */
function retarget(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(retarget);
  if (node && typeof node === 'object') {
    return Object.fromEntries(
      Object.entries(node).map(([k, v]) => [
        k,
        k === '$ref' && typeof v === 'string' ? v.replace('#/components/schemas/', 'spec#/$defs/') : retarget(v),
      ]),
    );
  }
  return node;
}

/**
 * The text rules the spec names in `x-refused` and states in words: its patterns say only what
 * every regular expression engine reads alike (control characters, in `\x` escapes), so that
 * every client generator can use them; these need Unicode properties. Each is true when the text
 * breaks it.
 */
export const TEXT_RULES: Record<string, (text: string) => boolean> = {
  // Not one letter, digit, punctuation mark or symbol that shows: only spaces, zero-width
  // characters, joiners, blank fillers (U+2800, and U+3164 which is Default_Ignorable) and the like.
  'nothing-visible': (text) => !/(?![\p{Default_Ignorable_Code_Point}\u2800])[\p{L}\p{N}\p{P}\p{S}]/u.test(text),
  'line-separators': (text) => /[\u2028\u2029]/u.test(text),
  'bidi-formatting': (text) => /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/u.test(text),
};

let displayRules: readonly string[] | undefined;

/**
 * The first of `DisplayText`'s text rules (its `x-refused`, read from the spec) that `text`
 * breaks, or undefined: for text the spec holds to that rule in words where no schema can say
 * it (metadata keys, at every level). Printable ASCII breaks only `nothing-visible`, and only
 * when it is all spaces: the common key is judged without a regular expression of Unicode properties.
 */
export function brokenDisplayRule(text: string): string | undefined {
  displayRules ??= (loadSpec().components.schemas.DisplayText as { 'x-refused': string[] })['x-refused'];
  if (/^[\x20-\x7E]*$/.test(text)) return text.trim() === '' ? 'nothing-visible' : undefined;
  return displayRules.find((rule) => TEXT_RULES[rule]!(text));
}

/**
 * An Ajv holding the spec's schemas as `spec#/$defs/X`. `checkSchemas` checks them against JSON
 * Schema 2020-12's meta-schema as they are added: compiling that meta-schema is about 45 ms of
 * CPU, a tenth of a server's start, and the spec is the same at every start, so a server skips it
 * and validation.test.ts checks them once (strict mode still refuses unknown keywords either way).
 */
export function createSpecAjv(options: { checkSchemas?: boolean } = {}): Ajv2020 {
  const spec = loadSpec();
  // strictRequired off: "exactly one of" is a oneOf of `required` lists naming properties defined beside it.
  const ajv = new Ajv2020({
    strict: true,
    strictRequired: false,
    allErrors: true,
    allowUnionTypes: true,
    // The failed schema beside each error: an enum's values, a pattern's words (`x-pattern`).
    verbose: true,
    validateSchema: options.checkSchemas ?? false,
  });
  addFormats(ajv);
  // `x-pattern`: a pattern's words, told when a value does not match it (see `patternWords`).
  ajv.addVocabulary(['example', 'xml', 'externalDocs', 'discriminator', 'x-pattern']);
  ajv.addKeyword({
    keyword: 'x-refused',
    type: 'string',
    schemaType: 'array',
    metaSchema: { type: 'array', items: { enum: Object.keys(TEXT_RULES) } },
    validate: (rules: string[], text: string) => !rules.some((rule) => TEXT_RULES[rule]!(text)),
  });
  ajv.addSchema({ $id: 'spec', $defs: retarget(spec.components.schemas) });
  return ajv;
}

/** The schemas of the spec that are request bodies. */
export type BodySchema = Extract<keyof components['schemas'], `${string}Request`>;

export interface Validators {
  /** Each request body schema of the spec, by name. */
  body: Record<string, ValidateFunction>;
  /** Each operation's query, as a closed object of its own parameters, by path. */
  query: Record<string, ValidateFunction>;
  /** The query parameters of each path that are not strings: they are read from the query's text first. */
  queryTypes: Record<string, Record<string, 'integer' | 'boolean'>>;
  idempotencyKey: ValidateFunction;
  /**
   * import's body without its rows, and one row: each row is checked on its own and answered at
   * its index, so a bad row does not refuse the others (both derived from the spec's schemas).
   */
  importShape: ValidateFunction;
  importRow: ValidateFunction;
}

type SpecParameter = { name: string; in: string; required?: boolean; schema: unknown };

let compiled: Validators | undefined;

/**
 * The spec's validators, made at the first call and shared by every later one in the process
 * (the spec is read once too, see loadSpec). Each is compiled when it is first read, then kept:
 * compiling all of them at start was 200 ms of a server's 550 ms of CPU to listening (130–800 ms
 * wall), paid again by each of a test run's ~250 server and CLI processes, most of which use a
 * few operations; an operation's first request pays its own few milliseconds instead.
 * Validators keep nothing between calls but their `errors` of the last one, read at once.
 */
export function compileValidators(): Validators {
  compiled ??= compile(createSpecAjv());
  return compiled;
}

/**
 * A fresh set of the validators whose schemas are checked against JSON Schema's meta-schema as
 * each is compiled (createSpecAjv's `checkSchemas`): for the test that reads them all once.
 */
export function compileCheckedValidators(): Validators {
  return compile(createSpecAjv({ checkSchemas: true }));
}

/** An object whose members are made by `makers`, each at its first read and then kept as a plain value. */
function lazily<T>(makers: Record<string, () => T>): Record<string, T> {
  const record: Record<string, T> = {};
  for (const [name, make] of Object.entries(makers)) {
    Object.defineProperty(record, name, {
      enumerable: true,
      configurable: true,
      get() {
        const value = make();
        Object.defineProperty(record, name, { value, enumerable: true });
        return value;
      },
    });
  }
  return record;
}

function compile(ajv: Ajv2020): Validators {
  const spec = loadSpec();
  const parameter = (p: unknown) =>
    ('$ref' in (p as object)
      ? spec.components.parameters[(p as { $ref: string }).$ref.split('/').pop()!]
      : p) as SpecParameter;
  // Compiled at first read (lazily): most processes use a few operations.
  const body: Record<string, () => ValidateFunction> = {};
  const query: Record<string, () => ValidateFunction> = {};
  const queryTypes: Record<string, Record<string, 'integer' | 'boolean'>> = {};
  for (const [path, methods] of Object.entries(spec.paths)) {
    for (const operation of Object.values(methods)) {
      const ref = operation.requestBody?.content?.['application/json']?.schema?.$ref;
      if (ref !== undefined) {
        const name = ref.split('/').pop()!;
        body[name] = () => ajv.getSchema(`spec#/$defs/${name}`)!;
      }
      const params = (operation.parameters ?? []).map(parameter).filter((p) => p.in === 'query');
      // Every operation without a body has its query checked, closed even when it takes no parameter.
      if (params.length > 0 || ref === undefined) {
        const properties = Object.fromEntries(params.map((p) => [p.name, retarget(p.schema)]));
        // `required: true` parameters as the spec says: missing, a 400 at their pointer (the mock's gate too).
        const required = params.filter((p) => p.required === true).map((p) => p.name);
        const schema = { type: 'object', additionalProperties: false, properties, required };
        query[path] = () => ajv.compile(schema);
        queryTypes[path] = Object.fromEntries(
          params.flatMap((p) => {
            const type = (p.schema as { type?: string }).type;
            return type === 'integer' || type === 'boolean' ? [[p.name, type]] : [];
          }),
        );
      }
    }
  }
  const importRequest = retarget(spec.components.schemas.ImportUsersRequest) as {
    properties: { users: Record<string, unknown> };
  };
  const anyRows = { ...importRequest.properties.users, items: {} };
  return Object.assign(
    lazily({
      importShape: () => ajv.compile({ ...importRequest, properties: { ...importRequest.properties, users: anyRows } }),
      importRow: () => ajv.getSchema('spec#/$defs/ImportUser')!,
      idempotencyKey: () =>
        ajv.compile(retarget((spec.components.parameters.IdempotencyKey as { schema: unknown }).schema) as object),
    }),
    {
      body: lazily(body),
      query: lazily(query),
      queryTypes,
    },
  ) as unknown as Validators;
}

/** The code and words for each keyword; `types` are all the types the field's value could have had. */
const MESSAGES: Record<string, (e: ErrorObject, types: unknown[]) => [FieldError['code'], string]> = {
  required: () => ['required', 'is required'],
  additionalProperties: () => ['unknown_field', 'is not a known field'],
  type: (_, types) => ['invalid_type', `must be ${typeNames(types)}`],
  // A minLength of 1 fails on nothing but the empty string.
  minLength: (e) => [
    'too_short',
    e.params.limit === 1 ? 'must not be empty' : `must be at least ${characters(e.params.limit)}`,
  ],
  maxLength: (e) => ['too_long', `must be at most ${characters(e.params.limit)}`],
  format: (e) => ['invalid_format', FORMATS[e.params.format] ?? `must be a valid ${e.params.format}`],
  // A pattern is told as what it asks for: its words in `x-pattern` beside it, else the pattern itself.
  pattern: (e) => ['invalid_format', patternWords(e)],
  // The spec's worded text rules are told as the pattern they complete.
  'x-refused': (e) => {
    const broken = (e.schema as string[]).find((rule) => typeof e.data === 'string' && TEXT_RULES[rule]!(e.data));
    return ['invalid_format', REFUSED[broken ?? ''] ?? 'has an invalid format'];
  },
  minProperties: () => ['required', 'must contain at least one field to change'],
  // Values and bounds are told as what is allowed (issue 41): the enum's values, the bound.
  enum: (e) => ['not_allowed', `must be one of ${listed(e.params.allowedValues)}`],
  const: (e) => ['not_allowed', `must be ${JSON.stringify(e.params.allowedValue)}`],
  minimum: (e) => ['not_allowed', `must be at least ${e.params.limit}`],
  maximum: (e) => ['not_allowed', `must be at most ${e.params.limit}`],
  exclusiveMinimum: (e) => ['not_allowed', `must be more than ${e.params.limit}`],
  exclusiveMaximum: (e) => ['not_allowed', `must be less than ${e.params.limit}`],
  multipleOf: (e) => ['not_allowed', `must be a multiple of ${e.params.multipleOf}`],
  minItems: (e) => ['too_short', `must have at least ${items(e.params.limit)}`],
  maxItems: (e) => ['too_long', `must have at most ${items(e.params.limit)}`],
  uniqueItems: () => ['not_allowed', 'must not repeat an item'],
  maxProperties: (e) => ['too_long', `must have at most ${e.params.limit} field${e.params.limit === 1 ? '' : 's'}`],
  propertyNames: () => ['invalid_format', 'has a field name that is not allowed'],
};

const REFUSED: Record<string, string> = {
  'nothing-visible': 'must contain a visible character',
  'line-separators': 'must not contain U+2028 or U+2029',
  'bidi-formatting': 'must not contain bidirectional formatting characters',
};

/** The words for a failed pattern: the schema's `x-pattern` (the spec says it in words), else the pattern. */
function patternWords(e: ErrorObject): string {
  const words = (e.parentSchema as { 'x-pattern'?: unknown } | undefined)?.['x-pattern'];
  return typeof words === 'string' ? words : `must match the pattern ${e.params.pattern}`;
}

/** `["a", "b", "c"]` → `"a", "b" or "c"`. */
function listed(values: unknown[]): string {
  const shown = values.map((v) => JSON.stringify(v));
  return shown.length <= 1 ? (shown[0] ?? 'nothing') : `${shown.slice(0, -1).join(', ')} or ${shown.at(-1)}`;
}

const items = (n: number) => `${n} item${n === 1 ? '' : 's'}`;

const EMAIL = 'must be an email address such as name@example.com, with a dot in its domain';
const FORMATS: Record<string, string> = {
  email: EMAIL,
  'date-time': 'must be an RFC 3339 date and time with its offset, such as 2026-11-01T00:00:00Z',
  uuid: 'must be a UUID, such as 0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b',
  ipv4: 'must be an IPv4 address, such as 192.0.2.1',
  ipv6: 'must be an IPv6 address, such as 2001:db8::1',
};

const ARTICLES: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  integer: 'an integer',
  boolean: 'true or false',
  object: 'an object',
  array: 'an array',
  null: 'null',
};

/** `[["string"], "null"]` → "a string or null": Ajv gives a type as a name or a list of names. */
function typeNames(types: unknown[]): string {
  const names = [...new Set(types.flat().map(String))];
  return names.map((t) => ARTICLES[t] ?? t).join(' or ');
}

const characters = (n: number) => `${n} character${n === 1 ? '' : 's'}`;

/**
 * Which of a field's failures is worth telling, lowest first. A wrong type makes the other checks
 * moot; an empty value says more than any format; a value too long must be cut whatever else is
 * wrong; "x" is better told it is not an email address than that it is short.
 */
function rank(e: ErrorObject): number {
  switch (e.keyword) {
    case 'required':
    case 'additionalProperties':
    case 'type':
    case 'minProperties':
      return 0;
    case 'minLength':
      return e.params.limit === 1 ? 1 : 4;
    case 'maxLength':
      return 2;
    case 'format':
      return 3;
    // After a format: "x" is told it is no email address before what the email's pattern adds.
    case 'pattern':
    case 'x-refused':
    case 'enum':
    case 'const':
      return 3.5;
    default:
      return 5;
  }
}

function pointerOf(e: ErrorObject): string {
  if (e.keyword === 'required') return `${e.instancePath}/${e.params.missingProperty}`;
  if (e.keyword === 'additionalProperties') return `${e.instancePath}/${e.params.additionalProperty}`;
  return e.instancePath;
}

/**
 * Turns Ajv's errors into the problem's `errors`: one per field, the most useful (see `rank`), in
 * the order Ajv meets the fields (missing ones, unknown ones, then the schema's order).
 */
export function toFieldErrors(errors: ErrorObject[] | null | undefined): FieldError[] {
  // A body's own top-level `oneOf` is its "exactly one of", which the route tells in words before
  // the schema runs (verify, import): its branches only repeat the types of the fields for client
  // generators, and a field of the wrong type is told once, by the field's own schema.
  // Its top-level `allOf` holds rules between fields (redeem's password with reset_password),
  // which the route tells in words too, before the schema.
  const all = (errors ?? []).filter((e) => !e.schemaPath.startsWith('#/oneOf') && !e.schemaPath.startsWith('#/allOf'));
  // A `oneOf` of a value or null reports the failed value, the null branch and itself: only the
  // first is worth telling wherever it is told.
  const told = new Set(all.filter((e) => !isEcho(e)).map((e) => e.instancePath));
  // A Map keeps each field where it was first met, however often its choice changes.
  const best = new Map<string, ErrorObject>();
  const types = new Map<string, unknown[]>();
  for (const e of all) {
    const pointer = pointerOf(e);
    if (e.keyword === 'type') types.set(pointer, [...(types.get(pointer) ?? []), e.params.type]);
    if (isEcho(e) && told.has(e.instancePath)) continue;
    const current = best.get(pointer);
    if (current === undefined || rank(e) < rank(current)) best.set(pointer, e);
  }
  return [...best].map(([pointer, e]) => {
    // Each branch of a nullable field names its own type: together they say what is accepted.
    const [code, message] = MESSAGES[e.keyword]?.(e, types.get(pointer) ?? []) ?? [
      'invalid_format',
      `must satisfy the schema's ${e.keyword}`,
    ];
    return { pointer, code, message };
  });
}

function isEcho(e: ErrorObject): boolean {
  return e.keyword === 'oneOf' || (e.keyword === 'type' && e.params.type === 'null');
}

/**
 * The spec's words, for a body, a query or an import row: surrounding whitespace of `email` and
 * `name` is trimmed, `password` normalized to NFC; lone surrogates are refused (400).
 */
export function normalizeFields(fields: Record<string, unknown>): void {
  for (const key of ['email', 'name'] as const) {
    if (typeof fields[key] === 'string') fields[key] = fields[key].trim();
  }
  if (typeof fields.password === 'string') fields.password = fields.password.normalize('NFC');
  assertWellFormedStrings(fields);
}

/** Lone UTF-16 surrogates cannot be stored as UTF-8; refuse them instead of mangling them. */
export function assertWellFormedStrings(value: Record<string, unknown>, where = ''): void {
  const bad = Object.entries(value)
    .filter(([, v]) => typeof v === 'string' && !v.isWellFormed())
    .map(([k]) => ({
      pointer: `${where}/${k}`,
      code: 'invalid_format' as const,
      message: 'contains an unpaired UTF-16 surrogate',
    }));
  if (bad.length > 0) throw invalidRequest('The request contains malformed text.', bad);
}

/**
 * A query parameter's text as the type its schema says, by the spec's words: an integer in
 * decimal digits, a boolean as `true` or `false`. Anything else stays text, for the schema to
 * refuse as the wrong type.
 */
export function fromQueryText(text: string, type: 'integer' | 'boolean' | undefined): string | number | boolean {
  if (type === 'integer' && /^(?:0|[1-9][0-9]{0,14})$/.test(text)) return Number(text);
  if (type === 'boolean' && (text === 'true' || text === 'false')) return text === 'true';
  return text;
}
