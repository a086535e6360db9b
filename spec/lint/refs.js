// What the spec lint's functions (problem-response.js, problem-shapes.js) share: a local `$ref`
// followed, and the one form of a problem response's schema.

export const HOW = `its schema must be
  allOf:
    - $ref: "#/components/schemas/Problem"
    - type: object
      required: [code]
      properties:
        code:
          type: string
          enum: [the codes this response can carry]`;

/** The node a local `$ref` (`#/components/...`) names, followed to the end; any other node as it is. */
export function resolve(document, node) {
  const seen = new Set();
  let at = node;
  while (typeof at?.$ref === 'string' && at.$ref.startsWith('#/') && !seen.has(at.$ref)) {
    seen.add(at.$ref);
    at = at.$ref
      .slice(2)
      .split('/')
      .map((key) => key.replaceAll('~1', '/').replaceAll('~0', '~'))
      .reduce((parent, key) => parent?.[key], document);
  }
  return at;
}

/** The codes a problem schema narrows `code` to, or undefined when it is not of the one form (HOW). */
export function narrowedCodes(schema) {
  const [problem, narrowing, ...rest] = schema?.allOf ?? [];
  if (problem?.$ref !== '#/components/schemas/Problem' || rest.length > 0) return undefined;
  const code = narrowing?.properties?.code;
  if (narrowing?.type !== 'object' || !narrowing.required?.includes('code') || code?.type !== 'string') {
    return undefined;
  }
  return Array.isArray(code.enum) ? code.enum : undefined;
}
