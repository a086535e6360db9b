// Requests for every operation, generated from the spec's own schemas and parameters, valid and
// invalid, with hostile values mixed in. A request is data until it is sent: ids and emails of
// accounts that exist only at run time are symbols, resolved by the runner.

import type { Operation } from '@user-accounts/server/define-operation';
import { operations } from '@user-accounts/server/operations';
import fc from 'fast-check';

type Json = Record<string, any>;

/** Stands for the id (or the email, in another letter case) of an account that exists when sent. */
export interface Live {
  live: 'id' | 'email';
  index: number;
  upper: boolean;
}

export type Value = Live | string | number | boolean | null | Value[] | { [key: string]: Value };

export type Body =
  | { kind: 'json'; value: Value; duplicate?: { key: string; value: Value } }
  | { kind: 'text'; text: string }
  | { kind: 'none' };

export interface FuzzRequest {
  /** The operation whose path is called, or undefined for a path the spec does not have. */
  method: string;
  path: string;
  query: [string, Value][];
  headers: Record<string, string>;
  body: Body;
  /** Send no token, or a wrong one. */
  auth: 'token' | 'none' | 'wrong';
}

export const isLive = (v: unknown): v is Live => typeof v === 'object' && v !== null && 'live' in v;

/** Strings that have broken services before: encodings, injections, invisible and huge ones. */
export const HOSTILE_STRINGS: readonly string[] = [
  '',
  ' ',
  '\t\n',
  '\u0000',
  'a\u0000b',
  'caf\u00e9',
  'cafe\u0301', // the NFD twin of the one above
  '\u212b', // Angstrom sign: NFC turns it into another code point
  '👩🏽‍💻🏳️‍🌈',
  '\u202eevil\u202c', // right-to-left override
  '\u200f\u200e',
  '\u200b',
  '\ufeff',
  '\ud800', // lone surrogates
  'x\udfffy',
  '\u2028\u2029\u0085',
  "' OR '1'='1' --",
  "'; DROP TABLE users; --",
  '"); select pg_sleep(5); --',
  '$1',
  '%00%0d%0a',
  'x\r\nSet-Cookie: injected=1',
  '../../../../etc/passwd',
  '<script>alert(1)</script>',
  '{"$ne": null}',
  '__proto__',
  'null',
  'true',
  '0',
  '-1',
  '1e309',
  'a'.repeat(255),
  'a'.repeat(1001),
  '𝔘'.repeat(130), // astral: 260 UTF-16 units, 130 code points
  'é'.repeat(40_000), // past the body limit once encoded
];

const hostileString = fc.constantFrom(...HOSTILE_STRINGS);

/** `arbitrary` one time in `n`, else null. */
const sometimes = <T>(arbitrary: fc.Arbitrary<T>, n: number): fc.Arbitrary<T | null> =>
  fc.oneof({ weight: n - 1, arbitrary: fc.constant(null) }, { weight: 1, arbitrary });

/** A value of the wrong JSON type for almost any field. */
const wrongType: fc.Arbitrary<Value> = fc.oneof(
  fc.integer(),
  fc.double({ noNaN: true, noDefaultInfinity: true }),
  fc.boolean(),
  fc.constant(null),
  fc.constant<Value>([]),
  fc.constant<Value>({}),
  fc.array(fc.string({ maxLength: 5 }), { minLength: 1, maxLength: 3 }),
  fc.constant<Value>({ $gt: '' }),
);

function resolve(spec: Json, node: Json): Json {
  return typeof node.$ref === 'string'
    ? resolve(
        spec,
        node.$ref
          .slice(2)
          .split('/')
          .reduce((n: Json, k: string) => n[k], spec),
      )
    : node;
}

/** Strings near the schema's limits, drawn from its examples' characters, or any Unicode. */
function stringFor(schema: Json): fc.Arbitrary<string> {
  const examples = (schema.examples ?? []) as string[];
  const min = schema.minLength ?? 0;
  const max = Math.min(schema.maxLength ?? 300, 1_100);
  const alphabet = [...new Set(examples.join('').split(''))];
  const choices: fc.WeightedArbitrary<string>[] = [
    {
      weight: 3,
      arbitrary: fc.string({ unit: 'grapheme', minLength: Math.max(min, 1), maxLength: Math.min(max, 40) }),
    },
    { weight: 1, arbitrary: fc.string({ unit: 'binary', minLength: min, maxLength: Math.min(max + 2, 60) }) },
    // Right at the limits, and one past them.
    { weight: 1, arbitrary: fc.constantFrom(max, max + 1, Math.max(min - 1, 0), min).map((n) => 'x'.repeat(n)) },
  ];
  if (examples.length > 0) {
    choices.push({ weight: 3, arbitrary: fc.constantFrom(...examples) });
  }
  if (alphabet.length > 0) {
    choices.push({
      weight: 3,
      arbitrary: fc
        .array(fc.constantFrom(...alphabet), { minLength: min, maxLength: Math.min(max + 2, 40) })
        .map((a) => a.join('')),
    });
  }
  if (schema.format === 'email') {
    choices.push({ weight: 8, arbitrary: fc.emailAddress({ size: 'small' }) });
    choices.push({
      weight: 3,
      arbitrary: fc.tuple(fc.string({ unit: 'grapheme', maxLength: 6 }), fc.domain()).map(([l, d]) => `${l}@${d}`),
    });
  }
  if (schema.writeOnly === true) {
    // A password: mostly one no list of common passwords has.
    choices.push({ weight: 8, arbitrary: fc.string({ unit: 'grapheme-ascii', minLength: 12, maxLength: 40 }) });
  }
  // Surrounding whitespace, which the spec says is trimmed from some fields.
  const base = fc.oneof(...choices);
  return fc.oneof({ weight: 10, arbitrary: base }, { weight: 1, arbitrary: base.map((s) => ` ${s}\t`) });
}

/**
 * Values for a schema of the spec: mostly valid-looking ones built from its keywords and
 * examples, then hostile strings and values of the wrong type.
 */
export function valueFor(spec: Json, node: Json, live?: Live['live']): fc.Arbitrary<Value> {
  const schema = resolve(spec, node);
  // A oneOf beside properties only lists required fields ("exactly one of"): the object is the shape.
  const variants = (schema.properties === undefined ? (schema.oneOf ?? schema.anyOf) : undefined) as Json[] | undefined;
  let shaped: fc.Arbitrary<Value>;
  if (variants) {
    shaped = fc.oneof(...variants.map((v) => valueFor(spec, v, live)));
  } else {
    const types = [schema.type ?? 'string'].flat() as string[];
    shaped = fc.oneof(
      ...types.map((t): fc.Arbitrary<Value> => {
        if (t === 'null') return fc.constant(null);
        if (t === 'object') return objectFor(spec, schema);
        if (t === 'integer') return fc.integer();
        if (t === 'boolean') return fc.boolean();
        if (t === 'array') {
          // Up to a few rows: the limits of a long array are the example-based tests' to try.
          const rows = fc.array(valueFor(spec, schema.items as Json, live), {
            minLength: (schema.minItems as number | undefined) ?? 0,
            maxLength: 4,
          });
          return rows as fc.Arbitrary<Value>;
        }
        return stringFor(schema);
      }),
    );
  }
  const choices: fc.WeightedArbitrary<Value>[] = [
    { weight: 16, arbitrary: shaped },
    { weight: 1, arbitrary: hostileString },
    { weight: 1, arbitrary: wrongType },
  ];
  if (live !== undefined) {
    // Mostly accounts that exist, so that writes land.
    choices.push({
      weight: 16,
      arbitrary: fc.record({ live: fc.constant(live), index: fc.nat(), upper: fc.boolean() }),
    });
  }
  return fc.oneof(...choices);
}

/** The fields whose values may name an existing account. */
const LIVE_FIELDS: Record<string, Live['live']> = { _userId: 'id', email: 'email' };

/** Keys a strict schema must refuse, some of them dangerous to a naive merge. */
const EXTRA_KEYS = [
  '__proto__',
  'constructor',
  'prototype',
  'email',
  'Email',
  '_userid',
  'id',
  'isAdmin',
  'passwordHash',
  'origin',
  'site',
];

function objectFor(spec: Json, schema: Json, liveFields = false): fc.Arbitrary<{ [key: string]: Value }> {
  const properties = Object.entries((schema.properties ?? {}) as Json);
  const required = new Set((schema.required ?? []) as string[]);
  const fields = properties.map(([key, prop]) => {
    const value = valueFor(spec, prop as Json, liveFields ? LIVE_FIELDS[key] : undefined);
    // Required keys are nearly always there; optional ones half the time.
    const presence = required.has(key) ? fc.double({ min: 0, max: 1, noNaN: true }).map((x) => x < 0.95) : fc.boolean();
    return fc.tuple(fc.constant(key), presence, value);
  });
  const extra = sometimes(
    fc.tuple(fc.oneof(fc.constantFrom(...EXTRA_KEYS), fc.string({ maxLength: 8 })), wrongType),
    10,
  );
  return fc.tuple(fc.tuple(...fields), extra).map(([entries, extraEntry]) => {
    const out: { [key: string]: Value } = {};
    for (const [key, present, value] of entries) if (present) out[key] = value;
    // defineProperty, so that "__proto__" becomes an own key as JSON.parse would make it.
    if (extraEntry)
      Object.defineProperty(out, extraEntry[0], {
        value: extraEntry[1],
        enumerable: true,
        writable: true,
        configurable: true,
      });
    return out;
  });
}

/** Bodies no JSON object schema accepts, and bodies that are not JSON at all. */
const hostileText: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom(
    '',
    ' ',
    '{',
    '{"email":',
    'null',
    '[]',
    '"a string"',
    '42',
    '{"a":1}{"b":2}',
    "{'email': 'single@quotes.test'}",
    '{"email":"a@b.c",}',
    '\ufeff{}',
    '{"_userId":"\\ud800"}',
    '{"__proto__":{"isAdmin":true}}',
    '{"constructor":{"prototype":{"polluted":true}}}',
  ),
  // Deep nesting: arrays and objects hundreds to thousands of levels down.
  fc.integer({ min: 100, max: 20_000 }).map((depth) => `{"name":${'['.repeat(depth)}${']'.repeat(depth)}}`),
  fc.integer({ min: 100, max: 5_000 }).map((depth) => `${'{"a":'.repeat(depth)}1${'}'.repeat(depth)}`),
  fc.string({ unit: 'binary', maxLength: 200 }),
);

const contentTypes = fc.oneof(
  { weight: 12, arbitrary: fc.constant('application/json') },
  { weight: 2, arbitrary: fc.constant('application/json; charset=utf-8') },
  {
    weight: 3,
    arbitrary: fc.constantFrom(
      undefined,
      'text/plain',
      'application/x-www-form-urlencoded',
      'application/json; charset=latin1',
      'application/json; charset="utf-8"',
      'application/json; charset="latin1"',
      'application/problem+json',
      'multipart/form-data; boundary=x',
      'application/jsonx',
    ),
  },
);

const idempotencyKeys = sometimes(
  fc.oneof(
    { weight: 6, arbitrary: fc.uuid().map(String) },
    {
      weight: 2,
      arbitrary: fc.string({
        unit: fc.integer({ min: 0x21, max: 0x7e }).map((c) => String.fromCharCode(c)),
        minLength: 1,
        maxLength: 260,
      }),
    },
    { weight: 1, arbitrary: fc.constantFrom('', ' ', 'with space', 'caf\u00e9', 'k'.repeat(256)) },
  ),
  5,
);

const ifMatches = sometimes(
  fc.constantFrom('*', '"1"', '"2"', '"999999"', 'W/"1"', '"1", "2"', 'garbage', '""', '"99999999999"', ' * '),
  5,
);

const AUTH = fc.oneof(
  { weight: 40, arbitrary: fc.constant('token' as const) },
  { weight: 1, arbitrary: fc.constantFrom('none' as const, 'wrong' as const) },
);

function bodyOperation(
  spec: Json,
  method: string,
  path: string,
  schemaName: string,
  extraHeaders: fc.Arbitrary<Record<string, string>>,
) {
  const json = fc
    .tuple(
      objectFor(spec, spec.components.schemas[schemaName], true),
      sometimes(
        fc.tuple(fc.constantFrom('email', 'name', '_userId', 'password'), fc.oneof(stringFor({}), wrongType)),
        12,
      ),
    )
    .map(
      ([value, dup]): Body =>
        dup ? { kind: 'json', value, duplicate: { key: dup[0], value: dup[1] } } : { kind: 'json', value },
    );
  const body = fc.oneof(
    { weight: 9, arbitrary: json },
    { weight: 1, arbitrary: hostileText.map((text): Body => ({ kind: 'text', text })) },
  );
  return fc.record({
    method: fc.constant(method),
    path: fc.constant(path),
    query: fc.constant([] as [string, Value][]),
    headers: fc
      .tuple(contentTypes, extraHeaders)
      .map(([type, extra]) => (type === undefined ? extra : { 'Content-Type': type, ...extra })),
    body,
    auth: AUTH,
  });
}

const headersOf = (key: fc.Arbitrary<string | null>, ifMatch: fc.Arbitrary<string | null>) =>
  fc.tuple(key, ifMatch).map(([k, m]) => {
    const h: Record<string, string> = {};
    if (k !== null) h['Idempotency-Key'] = k;
    if (m !== null) h['If-Match'] = m;
    return h;
  });

const takes = (spec: Json, op: Operation, parameter: string) =>
  ((spec.paths[op.path][op.method.toLowerCase()].parameters ?? []) as Json[]).some(
    (p) => p.$ref === `#/components/parameters/${parameter}`,
  );

/** A query operation's requests: its own parameters from the spec, repeated, or with strangers. */
function queryOperation(spec: Json, op: Operation) {
  const params = ((spec.paths[op.path][op.method.toLowerCase()].parameters ?? []) as Json[])
    .map((p) => resolve(spec, p))
    .filter((p) => p.in === 'query');
  const stranger = fc.tuple(
    fc.oneof(
      fc.constantFrom('', '__proto__', 'constructor', 'access_token', 'Email', '_userid'),
      fc.string({ maxLength: 10 }),
    ),
    stringFor({}),
  );
  // An operation without parameters (export) is sent none, or strangers.
  const param =
    params.length === 0
      ? stranger.map((extra) => extra as [string, Value])
      : fc.oneof(
          ...params.map((p) => fc.tuple(fc.constant(p.name as string), valueFor(spec, p.schema, LIVE_FIELDS[p.name]))),
        );
  return fc.record({
    method: fc.constant(op.method),
    path: fc.constant(op.path),
    query: fc.oneof(
      { weight: 8, arbitrary: params.length === 0 ? fc.constant([]) : param.map((p) => [p]) },
      { weight: 2, arbitrary: fc.array(param, { maxLength: 3 }) },
      { weight: 1, arbitrary: fc.tuple(param, stranger).map(([p, extra]) => [p, extra as [string, Value]]) },
    ),
    headers: fc.constant({}),
    body: fc.constant<Body>({ kind: 'none' }),
    auth: AUTH,
  });
}

/** Any request a caller could send: each operation's (from the table), at the wrong method, or at a wrong path. */
export function requests(spec: Json): fc.Arbitrary<FuzzRequest> {
  const none = fc.constant(null);
  const ofOperation = (op: Operation) =>
    'query' in op.request
      ? queryOperation(spec, op)
      : bodyOperation(
          spec,
          op.method,
          op.path,
          op.request.body,
          headersOf(op.idempotent ? idempotencyKeys : none, takes(spec, op, 'IfMatch') ? ifMatches : none),
        );
  const wrongMethod = fc.record({
    method: fc.constantFrom('PUT', 'PATCH', 'POST', 'DELETE', 'GET'),
    path: fc.constantFrom(
      ...operations.map((op) => op.path),
      '/api/1/user',
      '/api/1/user/get/',
      '/api/2/user/get',
      '/API/1/USER/GET',
      '/api/1/user/%2e%2e/create',
      '/api/1/user/create%00',
    ),
    query: fc.constant([] as [string, Value][]),
    headers: fc.constant({ 'Content-Type': 'application/json' }),
    body: fc.constant<Body>({ kind: 'text', text: '{}' }),
    auth: AUTH,
  });
  return fc.oneof(...operations.map((op) => ({ weight: 6, arbitrary: ofOperation(op) as fc.Arbitrary<FuzzRequest> })), {
    weight: 1,
    arbitrary: wrongMethod,
  });
}
