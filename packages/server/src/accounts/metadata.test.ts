import { Ajv2020 } from 'ajv/dist/2020.js';
import { describe, expect, it } from 'vitest';
import { METADATA_MAX_BYTES, metadataFault, parseMetadataFilter, schemaProblem } from './metadata.ts';
import { siteSchemaFaults } from './site-schema.ts';

const nested = (levels: number): Record<string, unknown> => (levels === 1 ? { x: 1 } : { d: nested(levels - 1) });

describe('metadataFault', () => {
  it('takes any object within the bounds', () => {
    expect(metadataFault({}, '/metadata')).toBeUndefined();
    expect(metadataFault({ a: [1, { b: null }], 'é/~': 'ü' }, '/metadata')).toBeUndefined();
    expect(metadataFault(nested(16), '/metadata')).toBeUndefined();
  });

  it('counts arrays as levels too', () => {
    let deep: unknown = 1;
    for (let i = 0; i < 16; i++) deep = [deep];
    expect(metadataFault({ a: deep }, '/m')).toMatchObject({ pointer: '/m', code: 'not_allowed' });
  });

  it('refuses what is not an object, too deep, or text jsonb cannot hold, pointing at it', () => {
    expect(metadataFault([], '/metadata')).toMatchObject({ code: 'invalid_type' });
    expect(metadataFault(null, '/metadata')).toMatchObject({ code: 'invalid_type' });
    expect(metadataFault(nested(17), '/metadata')).toMatchObject({ pointer: '/metadata', code: 'not_allowed' });
    expect(metadataFault({ 'a/b': { c: ['ok', 'x\u0000'] } }, '/users/2/metadata')).toEqual({
      pointer: '/users/2/metadata/a~1b/c/1',
      code: 'invalid_format',
      message: expect.any(String),
    });
    expect(metadataFault({ a: '\uD800' }, '/metadata')).toMatchObject({ pointer: '/metadata/a' });
  });

  it('bounds the compact JSON in UTF-8 bytes, not characters', () => {
    const room = METADATA_MAX_BYTES - JSON.stringify({ a: '' }).length;
    expect(metadataFault({ a: 'x'.repeat(room) }, '/metadata')).toBeUndefined();
    expect(metadataFault({ a: 'x'.repeat(room + 1) }, '/metadata')).toMatchObject({ code: 'too_long' });
    expect(metadataFault({ a: 'é'.repeat(room / 2 + 1) }, '/metadata')).toMatchObject({ code: 'too_long' });
  });
});

describe('parseMetadataFilter', () => {
  it('takes a JSON object and refuses anything else at /metadata', () => {
    expect(parseMetadataFilter('{"plan":"pro"}')).toEqual({ plan: 'pro' });
    for (const text of ['plan', '[1]', 'null', '"x"']) {
      expect(() => parseMetadataFilter(text), text).toThrow(expect.objectContaining({ status: 400 }));
    }
  });
});

describe('a site schema', () => {
  it('must compile as JSON Schema 2020-12, refer to nothing outside itself, and be an object', () => {
    expect(schemaProblem({ type: 'object', required: ['plan'] })).toBeUndefined();
    expect(schemaProblem({ type: 'object', 'x-note': 'kept' })).toBeUndefined();
    expect(schemaProblem({ $ref: 'https://example.com/schema.json' })).toMatch(/JSON Schema/);
    expect(schemaProblem({ type: 'objekt' })).toMatch(/JSON Schema/);
    expect(schemaProblem([])).toMatch(/object/);
  });

  it('names each fault with a pointer into the metadata', () => {
    const schema = {
      type: 'object',
      required: ['plan'],
      properties: { org: { type: 'object', properties: { 'a/b': { type: 'integer' } } } },
    };
    expect(schemaProblem(schema)).toBeUndefined();
    // Compiled once and kept; the validator is what writes use.
    const faults = siteSchemaFaults(compiledFor(schema), { org: { 'a/b': 'x' } }, '/metadata');
    expect(faults).toEqual([
      { pointer: '/metadata/plan', code: 'required', message: "must have required property 'plan'" },
      { pointer: '/metadata/org/a~1b', code: 'invalid_type', message: 'must be integer' },
    ]);
  });
});

function compiledFor(schema: object) {
  return new Ajv2020({ strict: false, allErrors: true }).compile(schema);
}
