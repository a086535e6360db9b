import { describe, expect, it } from 'vitest';
import { compileCheckedValidators, compileValidators, createSpecAjv, type Validators } from './validation.ts';

/** Every validator of a set, each read (and so compiled) here. */
const everyValidator = (validators: Validators) => [
  ...Object.values(validators.body),
  ...Object.values(validators.query),
  validators.importShape,
  validators.importRow,
  validators.idempotencyKey,
];

// Each validator is compiled at its first read (a server's start no longer compiles them all): a
// schema Ajv's strict mode refuses would be a 500 at its operation's first request. Every one is
// read here, so that such a schema fails the suite instead.
describe('the spec’s validators', () => {
  it('all compile, each once, when first read', () => {
    const validators = compileValidators();
    const all = everyValidator(validators);
    expect(Object.keys(validators.body).length).toBeGreaterThan(20);
    expect(Object.keys(validators.query).length).toBeGreaterThan(15);
    for (const validate of all) expect(validate).toBeTypeOf('function');
    // Read again: the same function, not a second compilation.
    expect(Object.values(compileValidators().body)).toEqual(Object.values(validators.body));
    expect(compileValidators().importRow).toBe(validators.importRow);
    expect(validators.query['/api/1/user/get']!({ email: 'a@example.com' })).toBe(true);
    expect(validators.query['/api/1/user/get']!({ nope: '1' })).toBe(false);
  });
  // A server adds them without checking them against the meta-schema (createSpecAjv): here they are.
  it('all conform to JSON Schema 2020-12’s meta-schema', () => {
    // Every validator, the ones made from parameters and import's parts included, compiled with
    // the check: a schema the meta-schema refuses throws here.
    for (const validate of everyValidator(compileCheckedValidators())) expect(validate).toBeTypeOf('function');
    const ajv = createSpecAjv({ checkSchemas: true });
    // The check bites: a schema the meta-schema refuses is refused as it is added.
    expect(() => ajv.addSchema({ $id: 'broken', type: 'strng' })).toThrow(/schema is invalid/);
    expect(() => createSpecAjv().addSchema({ $id: 'broken', type: 'strng' })).not.toThrow();
  });
});
