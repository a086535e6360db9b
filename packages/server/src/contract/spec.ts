import { readFileSync } from 'node:fs';
import { parse } from 'yaml';
import { SPEC_JSON_PATH, SPEC_PATH } from '../resources.ts';

export { SPEC_PATH };

export interface SpecOperation {
  operationId?: string;
  parameters?: unknown[];
  security?: Record<string, string[]>[];
  requestBody?: { content?: Record<string, { schema?: { $ref?: string } }> };
}

export interface OpenApiDocument {
  paths: Record<string, Record<string, SpecOperation>>;
  components: { schemas: Record<string, unknown>; parameters: Record<string, unknown> };
}

let cached: OpenApiDocument | undefined;

/** The contract, parsed once. Everything the server validates comes from here. */
export function loadSpec(): OpenApiDocument {
  cached ??= (
    SPEC_JSON_PATH === undefined
      ? parse(readFileSync(SPEC_PATH, 'utf8'))
      : JSON.parse(readFileSync(SPEC_JSON_PATH, 'utf8'))
  ) as OpenApiDocument;
  return cached;
}
