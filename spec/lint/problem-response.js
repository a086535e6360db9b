// A Spectral function (.spectral.yaml; Spectral loads a ruleset's functions as JavaScript files,
// hence not TypeScript): each operation's `error.code` is the union of the codes its problem
// responses can carry, and the spec says which. Every problem response narrows Problem's `code`
// with an enum (standard JSON Schema, so any generator, and the contract tests' response checks,
// read it too); openapi-typescript turns that into the per-operation unions. A problem response
// left as a plain Problem would give its operation all of ErrorCode again: `./pnpmw lint` fails,
// saying what to add. This and problem-shapes.js read the document as written (`resolved: false`), since the
// narrowing is a `$ref` to Problem beside an object, and follow its local `$ref`s themselves.

import { HOW, narrowedCodes, resolve } from './refs.js';

/**
 * One response of an operation (given `$.paths[*][<method>].responses[*]`), when it answers
 * application/problem+json. `check`: `narrowed` (the form above, a non-empty enum), `unique` (no
 * code twice), `known` (every code in ErrorCode), `examples` (one example per code, none for a
 * code not listed).
 */
export default function problemResponse(response, { check }, context) {
  const document = context.document.data;
  const media = resolve(document, response)?.content?.['application/problem+json'];
  if (media === undefined) return [];
  const [, path, method, , status] = context.path;
  const ref = typeof response.$ref === 'string' ? ` (${response.$ref})` : '';
  const where = `${document.paths[path][method].operationId} (${method.toUpperCase()} ${path}) ${status}${ref}`;
  const fault = (message) => [{ message: `${where}: ${message}` }];
  const codes = narrowedCodes(resolve(document, media.schema));
  if (check === 'narrowed') {
    if (codes === undefined) return fault(HOW);
    return codes.length === 0 ? fault('an empty enum of codes') : [];
  }
  if (codes === undefined) return []; // `narrowed` says so
  if (check === 'unique') {
    const twice = codes.filter((code, i) => codes.indexOf(code) !== i);
    return twice.length > 0 ? fault(`a code listed twice: ${[...new Set(twice)].join(', ')}`) : [];
  }
  if (check === 'known') {
    const all = resolve(document, document.components?.schemas?.ErrorCode)?.enum ?? [];
    const unknown = codes.filter((code) => !all.includes(code));
    return unknown.length > 0 ? fault(`codes not in ErrorCode: ${unknown.join(', ')}`) : [];
  }
  if (check === 'examples') {
    // The examples are what the docs show: one for each code, none for a code not listed.
    const examples = Object.values(media.examples ?? {}).map((example) => resolve(document, example)?.value?.code);
    if (examples.length === 0) return [];
    const missing = codes.filter((code) => !examples.includes(code));
    const extra = [...new Set(examples.filter((code) => !codes.includes(code)))];
    const faults = [];
    if (missing.length > 0) faults.push(`no example of ${missing.join(', ')}`);
    if (extra.length > 0) faults.push(`an example of ${extra.map(String).join(', ')}, not among its codes`);
    return faults.length > 0 ? fault(`its examples' codes: ${faults.join('; ')}`) : [];
  }
  throw new Error(`problemResponse: no check ${check}`);
}
