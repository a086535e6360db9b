// Request validators compiled once from spec/openapi.yaml: there is no second copy of the rules.

import type { components } from '@user-accounts/client';
import { Ajv2020, type ErrorObject, type ValidateFunction } from 'ajv/dist/2020.js';
import addFormatsModule from 'ajv-formats';
import { ApiError, type FieldError } from './errors.ts';
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

export function createSpecAjv(): Ajv2020 {
  const spec = loadSpec();
  // strictRequired off: "exactly one of" is a oneOf of `required` lists naming properties defined beside it.
  const ajv = new Ajv2020({ strict: true, strictRequired: false, allErrors: true, allowUnionTypes: true });
  addFormats(ajv);
  ajv.addVocabulary(['example', 'xml', 'externalDocs', 'discriminator']);
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
  idempotencyKey: ValidateFunction;
}

type SpecParameter = { name: string; in: string; schema: unknown };

export function compileValidators(): Validators {
  const ajv = createSpecAjv();
  const spec = loadSpec();
  const parameter = (p: unknown) =>
    ('$ref' in (p as object)
      ? spec.components.parameters[(p as { $ref: string }).$ref.split('/').pop()!]
      : p) as SpecParameter;
  const body: Record<string, ValidateFunction> = {};
  const query: Record<string, ValidateFunction> = {};
  for (const [path, methods] of Object.entries(spec.paths)) {
    for (const operation of Object.values(methods)) {
      const ref = operation.requestBody?.content?.['application/json']?.schema?.$ref;
      if (ref !== undefined) {
        const name = ref.split('/').pop()!;
        body[name] = ajv.getSchema(`spec#/$defs/${name}`)!;
      }
      const params = (operation.parameters ?? []).map(parameter).filter((p) => p.in === 'query');
      if (params.length > 0) {
        const properties = Object.fromEntries(params.map((p) => [p.name, retarget(p.schema)]));
        query[path] = ajv.compile({ type: 'object', additionalProperties: false, properties });
      }
    }
  }
  return {
    body,
    query,
    idempotencyKey: ajv.compile(
      retarget((spec.components.parameters.IdempotencyKey as { schema: unknown }).schema) as object,
    ),
  };
}

const MESSAGES: Record<string, (e: ErrorObject) => [FieldError['code'], string]> = {
  required: () => ['required', 'is required'],
  additionalProperties: () => ['unknown_field', 'is not a known field'],
  type: (e) => ['invalid_type', `must be of type ${[e.params.type].flat().join(' or ')}`],
  minLength: (e) => ['too_short', `must be at least ${e.params.limit} characters`],
  maxLength: (e) => ['too_long', `must be at most ${e.params.limit} characters`],
  format: (e) => ['invalid_format', `must be a valid ${e.params.format}`],
  pattern: () => ['invalid_format', 'has an invalid format'],
  minProperties: () => ['required', 'must contain at least one field to change'],
};

function pointerOf(e: ErrorObject): string {
  if (e.keyword === 'required') return `${e.instancePath}/${e.params.missingProperty}`;
  if (e.keyword === 'additionalProperties') return `${e.instancePath}/${e.params.additionalProperty}`;
  return e.instancePath;
}

/** Turns Ajv's errors into the problem's `errors`, one per field and kind, without noise. */
export function toFieldErrors(errors: ErrorObject[] | null | undefined): FieldError[] {
  const all = errors ?? [];
  // A `oneOf` of a value or null reports the null branch too; keep only the useful part.
  const paths = new Set(all.filter((e) => e.keyword !== 'oneOf' && !isNullBranch(e)).map((e) => e.instancePath));
  const out: FieldError[] = [];
  const seen = new Set<string>();
  for (const e of all) {
    if (e.keyword === 'oneOf' && paths.has(e.instancePath)) continue;
    if (isNullBranch(e) && paths.has(e.instancePath)) continue;
    const [code, message] = MESSAGES[e.keyword]?.(e) ?? ['invalid_format', e.message ?? 'is invalid'];
    const pointer = pointerOf(e);
    const key = `${pointer} ${code}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ pointer, code, message });
  }
  return out;
}

function isNullBranch(e: ErrorObject): boolean {
  return e.keyword === 'type' && e.params.type === 'null';
}

export function invalidRequest(detail: string, errors: FieldError[]): ApiError {
  return new ApiError(400, 'invalid_request', detail, { errors });
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
