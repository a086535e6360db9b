// Each operation's `error.code` is the union of the codes its problem responses can carry, and
// the spec says which: every problem response narrows Problem's `code` with an enum (standard
// JSON Schema, so any generator, and the contract tests' response checks, read it too).
// openapi-typescript turns that into the per-operation unions; this test holds every operation
// of the spec, present and future, to it: a problem response left as a plain Problem would give
// its operation all of ErrorCode again, and fails here, saying what to add.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

// biome-ignore lint/suspicious/noExplicitAny: the parsed YAML document, walked by key
type Json = Record<string, any>;
const spec = parse(readFileSync(new URL('../../../spec/openapi.yaml', import.meta.url), 'utf8')) as Json;
const resolve = (node: Json): Json =>
  typeof node?.$ref === 'string'
    ? resolve(
        node.$ref
          .slice(2)
          .split('/')
          .reduce((n: Json, key: string) => n[key], spec),
      )
    : node;

const allCodes: string[] = spec.components.schemas.ErrorCode.enum;
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

/** Every response of every operation that answers a problem (application/problem+json). */
const problemResponses = Object.entries(spec.paths as Json).flatMap(([path, item]) =>
  METHODS.filter((method) => item[method]).flatMap((method) =>
    Object.entries(item[method].responses as Json)
      .map(([status, response]) => ({ status, response: resolve(response) }))
      .filter(({ response }) => response.content?.['application/problem+json'])
      .map(({ status, response }) => ({
        where: `${item[method].operationId} (${method.toUpperCase()} ${path}) ${status}`,
        media: response.content['application/problem+json'] as Json,
      })),
  ),
);

const HOW = `its schema must be
  allOf:
    - $ref: "#/components/schemas/Problem"
    - type: object
      required: [code]
      properties:
        code:
          type: string
          enum: [the codes this response can carry]`;

function narrowedCodes(schema: Json): string[] | undefined {
  const [problem, narrowing, ...rest] = (schema.allOf ?? []) as Json[];
  if (problem?.$ref !== '#/components/schemas/Problem' || rest.length > 0) return undefined;
  const code = narrowing?.properties?.code;
  if (narrowing?.type !== 'object' || !narrowing.required?.includes('code') || code?.type !== 'string')
    return undefined;
  return Array.isArray(code.enum) ? code.enum : undefined;
}

describe('per-operation error codes in the spec', () => {
  it('finds the problem responses', () => {
    expect(problemResponses.length).toBeGreaterThan(50);
  });

  it.each(problemResponses.map(({ where, media }) => [where, media] as const))(
    '%s names the codes it can carry',
    (where, media) => {
      const codes = narrowedCodes(media.schema);
      expect(codes, `${where}: ${HOW}`).toBeDefined();
      expect(codes!.length, `${where}: an empty enum`).toBeGreaterThan(0);
      expect(new Set(codes).size, `${where}: a code listed twice`).toBe(codes!.length);
      expect(
        codes!.filter((code) => !allCodes.includes(code)),
        `${where}: codes not in ErrorCode`,
      ).toEqual([]);
      // The examples are what the docs show: one for each code, none for a code not listed.
      const examples = Object.values((media.examples ?? {}) as Json).map((example) => resolve(example).value?.code);
      if (examples.length > 0) expect(new Set(examples), `${where}: its examples' codes`).toEqual(new Set(codes));
    },
  );
});

describe('one problem schema per code', () => {
  // Problem is a oneOf of shapes, each `code` narrowed by an enum: the client's types narrow a
  // problem to its own members by its code (second_factor_required → ticket, factors) only if
  // every code is in exactly one shape.
  const shapes = (spec.components.schemas.Problem.oneOf as Json[]).map((ref) => ({
    name: ref.$ref as string,
    codes: (resolve(ref).properties.code.enum ?? []) as string[],
  }));

  it('puts each code of ErrorCode in exactly one shape', () => {
    const all = shapes.flatMap(({ codes }) => codes);
    expect(new Set(all).size, 'a code in two shapes').toBe(all.length);
    expect([...all].sort()).toEqual([...allCodes].sort());
  });

  it('gives second_factor_required its ticket and factors, and no other shape either', () => {
    for (const { name, codes } of shapes) {
      const required = resolve({ $ref: name }).required as string[];
      const own = codes.includes('second_factor_required');
      expect(required.includes('ticket'), name).toBe(own);
      expect(required.includes('factors'), name).toBe(own);
    }
  });
});
