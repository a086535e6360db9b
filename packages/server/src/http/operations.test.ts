// The table and the contract must list the same operations: a row missing from either, or a
// path, method, scope, body schema or idempotency that differs, fails here.
import { describe, expect, it } from 'vitest';
import { loadSpec } from '../contract/spec.ts';
import { operations } from './operations.ts';

const spec = loadSpec();

/** Every operation of the spec that takes the API token, as the table would describe it. */
function specOperations() {
  const out = [];
  for (const [path, methods] of Object.entries(spec.paths)) {
    for (const [method, op] of Object.entries(methods)) {
      const scopes = (op.security ?? []).flatMap((requirement) => requirement.apiToken ?? []);
      if (scopes.length === 0) continue; // health, docs, metrics: not API operations
      const params = (op.parameters ?? []) as { $ref?: string }[];
      const ref = op.requestBody?.content?.['application/json']?.schema?.$ref;
      out.push({
        name: op.operationId,
        method: method.toUpperCase(),
        path,
        scope: scopes.length === 1 ? scopes[0] : scopes,
        body: ref?.split('/').pop(),
        idempotent: params.some((p) => p.$ref === '#/components/parameters/IdempotencyKey'),
      });
    }
  }
  return out;
}

describe('operations.ts', () => {
  it('lists exactly the operations of spec/openapi.yaml that take the API token, with their scope', () => {
    const table = operations.map((op) => ({
      name: op.name,
      method: op.method,
      path: op.path,
      scope: op.scope,
      body: 'body' in op.request ? op.request.body : undefined,
      idempotent: op.idempotent === true,
    }));
    const byKey = (a: { method: string; path: string }, b: { method: string; path: string }) =>
      `${a.path} ${a.method}`.localeCompare(`${b.path} ${b.method}`);
    expect(table.sort(byKey)).toEqual(specOperations().sort(byKey));
  });

  it('has one row per path and method, and a query or a body for each', () => {
    const keys = operations.map((op) => `${op.method} ${op.path}`);
    expect(new Set(keys).size).toBe(keys.length);
    for (const op of operations) expect('query' in op.request || 'body' in op.request).toBe(true);
  });
});
