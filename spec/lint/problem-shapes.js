// A Spectral function (.spectral.yaml; see problem-response.js): Problem's shapes and their codes.
import { resolve } from './refs.js';

/**
 * The shapes of Problem (given `$.components.schemas`): a oneOf of schemas, each `code` narrowed
 * by an enum. The client's types narrow a problem to its own members by its code
 * (second_factor_required → ticket, factors) only if every code is in exactly one shape.
 * `check`: `partition` (each code of ErrorCode in exactly one shape, and no other code),
 * `second-factor` (ticket and factors required in second_factor_required's shape, in no other).
 */
export default function problemShapes(schemas, { check }, context) {
  const document = context.document.data;
  const shapes = (schemas.Problem?.oneOf ?? []).map((ref) => {
    const schema = resolve(document, ref);
    return { name: ref.$ref ?? 'an inline shape', schema, codes: schema?.properties?.code?.enum ?? [] };
  });
  const at = [...context.path, 'Problem', 'oneOf'];
  if (check === 'partition') {
    const all = resolve(document, schemas.ErrorCode)?.enum ?? [];
    const listed = shapes.flatMap(({ codes }) => codes);
    const faults = [];
    const twice = [...new Set(listed.filter((code, i) => listed.indexOf(code) !== i))];
    if (twice.length > 0) faults.push(`in two shapes: ${twice.join(', ')}`);
    const none = all.filter((code) => !listed.includes(code));
    if (none.length > 0) faults.push(`in no shape: ${none.join(', ')}`);
    const unknown = [...new Set(listed.filter((code) => !all.includes(code)))];
    if (unknown.length > 0) faults.push(`not in ErrorCode: ${unknown.join(', ')}`);
    return faults.map((message) => ({ message: `Problem's shapes (oneOf): codes ${message}`, path: at }));
  }
  if (check === 'second-factor') {
    return shapes.flatMap(({ name, schema, codes }) => {
      const own = codes.includes('second_factor_required');
      const required = schema?.required ?? [];
      return ['ticket', 'factors']
        .filter((member) => required.includes(member) !== own)
        .map((member) => ({
          message: own
            ? `${name}: the shape of second_factor_required must require ${member}`
            : `${name}: only second_factor_required's shape requires ${member}`,
          path: at,
        }));
    });
  }
  throw new Error(`problemShapes: no check ${check}`);
}
