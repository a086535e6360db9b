// Checks every response against the spec: its status is documented for the operation, its body
// matches the documented schema, its documented required headers are there. It reads the spec on
// its own rather than through the server's validation module: an oracle that shared the server's
// loader would share its bugs.
import { readFileSync } from 'node:fs';
import { Ajv2020, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { parse } from 'yaml';

const addFormats = addFormatsModule as unknown as (ajv: Ajv2020) => Ajv2020;

export const SPEC_FILE = new URL('../../../spec/openapi.yaml', import.meta.url);

type Json = Record<string, any>;

export interface SpecChecker {
  /** Violations of the spec by this response (empty when it conforms). */
  check(method: string, path: string, response: Response): Promise<string[]>;
  /** The spec itself, parsed, for tests that generate requests from it. */
  readonly spec: Json;
  /** A validator for a schema of the spec (its `$ref`s resolved against the spec). */
  validatorFor(schema: unknown): ValidateFunction;
  /** The node a `$ref` points at (followed to the end), or the node itself. */
  resolve(node: Json): Json;
}

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

/** Each rule of `x-refused`, as a text that breaks it. An unknown rule refuses everything. */
const REFUSED: Record<string, RegExp> = {
  // Nothing that shows: no letter, number, punctuation or symbol outside the default-ignorable
  // characters and the blank Braille pattern (U+2800).
  'nothing-visible': /^(?:(?![\p{L}\p{N}\p{P}\p{S}])[\s\S]|[\p{Default_Ignorable_Code_Point}\u2800])*$/u,
  'line-separators': /[\u2028\u2029]/u,
  'bidi-formatting': /[\u061C\u200E\u200F\u202A-\u202E\u2066-\u2069]/u,
};

export function createSpecChecker(): SpecChecker {
  const spec = parse(readFileSync(SPEC_FILE, 'utf8')) as Json;
  // strictRequired off: "exactly one of" is a oneOf of `required` lists naming properties defined beside it.
  const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true, allowUnionTypes: true });
  addFormats(ajv);
  ajv.addVocabulary(['example', 'xml', 'externalDocs', 'discriminator', 'x-pattern']);
  // The text rules the spec states in words and names in `x-refused` (see its `Name`), read here
  // from those words on their own.
  ajv.addKeyword({
    keyword: 'x-refused',
    type: 'string',
    schemaType: 'array',
    validate: (rules: string[], text: string) => !rules.some((rule) => REFUSED[rule]?.test(text) ?? true),
  });
  ajv.addSchema({ $id: 'spec', $defs: retarget(spec.components.schemas) });
  const resolve = (node: Json): Json =>
    typeof node.$ref === 'string'
      ? resolve(
          node.$ref
            .slice(2)
            .split('/')
            .reduce((n: Json, k: string) => n[k], spec),
        )
      : node;
  const validators = new Map<unknown, ValidateFunction>();
  const validatorFor = (schema: unknown) => {
    let v = validators.get(schema);
    if (!v) {
      v = ajv.compile(retarget(schema) as object);
      validators.set(schema, v);
    }
    return v;
  };

  return {
    spec,
    validatorFor,
    resolve,
    async check(method, path, response) {
      const operation = spec.paths[path]?.[method.toLowerCase()] as Json | undefined;
      const text = await response.clone().text();
      if (!operation) {
        // Unknown paths and methods are not operations; their errors must still be problems.
        return checkProblem(text, response, validatorFor(spec.components.schemas.Problem));
      }
      const documented = operation.responses[String(response.status)] as Json | undefined;
      if (!documented) return [`${method} ${path}: status ${response.status} is not documented`];
      const documentedResponse = resolve(documented);
      const problems: string[] = [];
      for (const [name, header] of Object.entries((documentedResponse.headers ?? {}) as Json)) {
        if (resolve(header).required && !response.headers.has(name)) {
          problems.push(`${method} ${path} ${response.status}: header ${name} is missing`);
        }
      }
      const contentType = response.headers.get('content-type')?.split(';')[0] ?? '';
      const media = documentedResponse.content?.[contentType] as Json | undefined;
      if (!media) {
        problems.push(`${method} ${path} ${response.status}: content type "${contentType}" is not documented`);
        return problems;
      }
      const validate = validatorFor(media.schema);
      let body: unknown = text; // a text/* body is checked as the string it is
      if (contentType === 'application/x-ndjson') {
        // Lines of JSON, each ending with a newline; the schema describes the text as a whole.
        const lines = text.split('\n');
        if (lines.pop() !== '')
          problems.push(`${method} ${path} ${response.status}: NDJSON does not end with a newline`);
        for (const line of lines) {
          try {
            JSON.parse(line);
          } catch {
            return [...problems, `${method} ${path} ${response.status}: an NDJSON line is not JSON`];
          }
        }
      } else if (!contentType.startsWith('text/')) {
        try {
          body = JSON.parse(text);
        } catch {
          return [...problems, `${method} ${path} ${response.status}: body is not JSON`];
        }
      }
      if (!validate(body)) {
        problems.push(
          `${method} ${path} ${response.status}: body breaks the schema: ${ajv.errorsText(validate.errors)}`,
        );
      }
      return problems;
    },
  };
}

function checkProblem(text: string, response: Response, validate: ValidateFunction): string[] {
  if (response.status < 400) return [];
  if (!response.headers.get('content-type')?.startsWith('application/problem+json')) {
    return [`status ${response.status} is not application/problem+json`];
  }
  try {
    return validate(JSON.parse(text)) ? [] : [`problem breaks the schema: ${JSON.stringify(validate.errors)}`];
  } catch {
    return ['problem body is not JSON'];
  }
}
