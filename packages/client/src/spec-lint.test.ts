// The spec lint's own rules (.spectral.yaml's problem-*, functions in spec/lint/) can fail: each
// is given a copy of the spec with the one defect it is there to refuse, and names the operation
// or the shape at fault. `./pnpmw lint` runs them on the spec itself. They hold what
// error-codes.test.ts held (one unit test per problem response, 564 in all) before it became a
// lint (issue 58, point 5). The functions are called as Spectral calls them, on the spec as
// written, so that this takes milliseconds rather than a Spectral run.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';

// biome-ignore lint/suspicious/noExplicitAny: the parsed YAML document, walked by key
type Json = Record<string, any>;
type Fault = { message: string; path?: (string | number)[] };
type Check = (target: Json, options: { check: string }, context: Json) => Fault[];

const ROOT = new URL('../../../', import.meta.url);
const lint = async (name: string) =>
  ((await import(new URL(`spec/lint/${name}.js`, ROOT).href)) as { default: Check }).default;
const problemResponse = await lint('problem-response');
const problemShapes = await lint('problem-shapes');
const spec = parse(readFileSync(new URL('spec/openapi.yaml', ROOT), 'utf8')) as Json;
const ruleset = parse(readFileSync(new URL('.spectral.yaml', ROOT), 'utf8')) as Json;

const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];
const RESPONSE_CHECKS = ['narrowed', 'unique', 'known', 'examples'];
const SHAPE_CHECKS = ['partition', 'second-factor'];

/** Each check's faults on the document, as the rules' `given` reach it: every operation's responses, then the schemas. */
function faults(document: Json): Record<string, string[]> {
  const found: Record<string, string[]> = {};
  for (const check of RESPONSE_CHECKS) {
    found[check] = Object.entries(document.paths as Json)
      .flatMap(([path, item]) =>
        METHODS.filter((method) => item[method]).flatMap((method) =>
          Object.entries(item[method].responses as Json).flatMap(([status, response]) =>
            problemResponse(
              response,
              { check },
              { document: { data: document }, path: ['paths', path, method, 'responses', status] },
            ),
          ),
        ),
      )
      .map((f) => f.message);
  }
  for (const check of SHAPE_CHECKS) {
    found[check] = problemShapes(
      document.components.schemas,
      { check },
      {
        document: { data: document },
        path: ['components', 'schemas'],
      },
    ).map((f) => f.message);
  }
  return found;
}

const problemMedia = (document: Json, name: string) =>
  document.components.responses[name].content['application/problem+json'];
const codeOf = (document: Json, name: string) => problemMedia(document, name).schema.allOf[1].properties.code;

describe('the spec lint of problem codes', () => {
  it('names each rule in .spectral.yaml, an error with its function and check', () => {
    const wired = Object.values(ruleset.rules as Json)
      .filter((rule) => typeof rule === 'object' && String(rule.then?.function).startsWith('problem-'))
      .map((rule) => `${rule.severity} ${rule.resolved} ${rule.then.function} ${rule.then.functionOptions.check}`);
    expect(wired.sort()).toEqual(
      [
        ...RESPONSE_CHECKS.map((check) => `error false problem-response ${check}`),
        ...SHAPE_CHECKS.map((check) => `error false problem-shapes ${check}`),
      ].sort(),
    );
    expect(ruleset.functionsDir).toBe('spec/lint');
  });

  it('finds nothing in the spec', () => {
    expect(faults(spec)).toEqual(Object.fromEntries([...RESPONSE_CHECKS, ...SHAPE_CHECKS].map((c) => [c, []])));
  });

  it.each<[string, string, (document: Json) => void, RegExp]>([
    [
      'a problem response left as a plain Problem',
      'narrowed',
      (d) => {
        problemMedia(d, 'IdentityBadRequest').schema = { $ref: '#/components/schemas/Problem' };
      },
      /^\w+Identity \(POST \/api\/1\/user\/identity\/\w+\) 400 \(#\/components\/responses\/IdentityBadRequest\): its schema must be/,
    ],
    [
      'an empty enum of codes',
      'narrowed',
      (d) => {
        codeOf(d, 'IdentityBadRequest').enum = [];
      },
      /IdentityBadRequest\): an empty enum of codes$/,
    ],
    [
      'a code listed twice',
      'unique',
      (d) => {
        codeOf(d, 'IdentityBadRequest').enum.push('invalid_json');
      },
      /a code listed twice: invalid_json$/,
    ],
    [
      'a code not in ErrorCode',
      'known',
      (d) => {
        codeOf(d, 'IdentityBadRequest').enum.push('no_such_code');
      },
      /codes not in ErrorCode: no_such_code$/,
    ],
    [
      'an example of a code the response does not list',
      'examples',
      (d) => {
        codeOf(d, 'IdentityBadRequest').enum = ['invalid_request'];
      },
      /its examples' codes: an example of invalid_json, not among its codes$/,
    ],
    [
      'a code without its example',
      'examples',
      (d) => {
        delete problemMedia(d, 'IdentityBadRequest').examples.invalid_json;
      },
      /its examples' codes: no example of invalid_json$/,
    ],
    [
      'a code in two shapes of Problem',
      'partition',
      (d) => {
        d.components.schemas.SecondFactorRequiredProblem.properties.code.enum.push('invalid_request');
      },
      /^Problem's shapes \(oneOf\): codes in two shapes: invalid_request$/,
    ],
    [
      'a code of ErrorCode in no shape',
      'partition',
      (d) => {
        const codes: string[] = d.components.schemas.StandardProblem.properties.code.enum;
        codes.splice(codes.indexOf('invalid_json'), 1);
      },
      /^Problem's shapes \(oneOf\): codes in no shape: invalid_json$/,
    ],
    [
      "second_factor_required's shape without its ticket",
      'second-factor',
      (d) => {
        const required: string[] = d.components.schemas.SecondFactorRequiredProblem.required;
        required.splice(required.indexOf('ticket'), 1);
      },
      /SecondFactorRequiredProblem: the shape of second_factor_required must require ticket$/,
    ],
    [
      'another shape that requires factors',
      'second-factor',
      (d) => {
        d.components.schemas.StandardProblem.required.push('factors');
      },
      /StandardProblem: only second_factor_required's shape requires factors$/,
    ],
  ])('refuses %s (%s)', (_, check, defect, message) => {
    const broken = structuredClone(spec);
    defect(broken);
    const found = faults(broken)[check]!;
    expect(found.length).toBeGreaterThan(0);
    for (const fault of found) expect(fault).toMatch(message);
  });
});
