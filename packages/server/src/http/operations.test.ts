// The table and the contract must list the same operations: a row missing from either, or a
// path, method, scope, body schema or idempotency that differs, fails here. And every operation
// that writes documents the 409 `conflict` the error handler answers when its write still
// collides with concurrent writes after the unit of work's retries (app.ts, errors.ts).
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

// biome-ignore lint/suspicious/noExplicitAny: the spec's JSON, walked by $ref
type Json = Record<string, any>;

/** The node a `$ref` points at (followed to the end), or the node itself. */
const resolve = (node: Json): Json =>
  typeof node.$ref === 'string'
    ? resolve(
        node.$ref
          .slice(2)
          .split('/')
          .reduce((n: Json, k: string) => n[k], spec),
      )
    : node;

/**
 * Writes that are no audited `writes:` row but still run a transaction that can deadlock:
 * a replay queues its delivery under the site's advisory lock (events/webhooks/deliveries.ts).
 */
const ALSO_WRITES = ['replayWebhookDelivery'];

/** What an operation's 409 documents of `conflict`: its code, an example of it, its Retry-After. */
function conflictOf(name: string) {
  const found = Object.values(spec.paths)
    .flatMap((methods) => Object.values(methods))
    .find((op) => op.operationId === name) as Json | undefined;
  const documented = found?.responses?.['409'] as Json | undefined;
  if (documented === undefined) return { documented: false };
  const response = resolve(documented);
  const media = response.content?.['application/problem+json'] ?? {};
  const codes = ((resolve(media.schema ?? {}).allOf ?? []) as Json[]).flatMap(
    (part) => (resolve(part).properties?.code?.enum ?? []) as string[],
  );
  const examples = Object.values((media.examples ?? {}) as Json).map((e) => resolve(e).value?.code);
  return {
    documented: true,
    code: codes.includes('conflict'),
    example: examples.includes('conflict'),
    retryAfter: response.headers?.['Retry-After'] !== undefined,
  };
}

describe('operations.ts', () => {
  it('lists exactly the operations of spec/openapi.yaml that take the API token, with their scope', () => {
    const table = operations.map((op) => ({
      name: op.name,
      method: op.method,
      path: op.path,
      // A second security requirement is the scope that admits some bodies (alsoScope).
      scope: op.alsoScope === undefined ? op.scope : [op.scope, op.alsoScope.scope],
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

  // Review (issue 45, small fixes point 3): org/create took an Idempotency-Key without its 409
  // idempotency_key_in_use (a second request while the first runs) or the replayed 409's header.
  it('documents, on every operation taking an Idempotency-Key, its 409 idempotency_key_in_use and 422 idempotency_key_reused, and Idempotent-Replayed on the success and a 409 it may replay', () => {
    const idempotent = operations.filter((op) => op.idempotent === true);
    expect(idempotent.length).toBeGreaterThan(1);
    const documented = (name: string) => {
      const found = Object.values(spec.paths)
        .flatMap((methods) => Object.values(methods))
        .find((op) => op.operationId === name) as Json;
      const codesOf = (status: string) => {
        const response = resolve(found.responses?.[status] ?? {});
        const schema = resolve(response.content?.['application/problem+json']?.schema ?? {});
        return ((schema.allOf ?? []) as Json[]).flatMap(
          (part) => (resolve(part).properties?.code?.enum ?? []) as string[],
        );
      };
      const replayed = (status: string) =>
        resolve(found.responses?.[status] ?? {}).headers?.['Idempotent-Replayed'] !== undefined;
      const success = Object.keys(found.responses).find((status) => status.startsWith('2'))!;
      return {
        inUse: codesOf('409').includes('idempotency_key_in_use'),
        reused: codesOf('422').includes('idempotency_key_reused'),
        successReplayed: replayed(success),
        // A 409 other than these two is kept with the key and replayed (middleware/idempotency.ts).
        conflictReplayed:
          replayed('409') || codesOf('409').every((code) => code === 'idempotency_key_in_use' || code === 'conflict'),
      };
    };
    const expected = { inUse: true, reused: true, successReplayed: true, conflictReplayed: true };
    expect(Object.fromEntries(idempotent.map((op) => [op.name, documented(op.name)]))).toEqual(
      Object.fromEntries(idempotent.map((op) => [op.name, expected])),
    );
  });

  it('documents 409 conflict (code, example, Retry-After) on every operation that writes', () => {
    const writers = operations.filter((op) => op.writes !== undefined || ALSO_WRITES.includes(op.name));
    expect(writers.length).toBeGreaterThan(ALSO_WRITES.length);
    const expected = { documented: true, code: true, example: true, retryAfter: true };
    const found = Object.fromEntries(writers.map((op) => [op.name, conflictOf(op.name)]));
    expect(found).toEqual(Object.fromEntries(writers.map((op) => [op.name, expected])));
  });
});
