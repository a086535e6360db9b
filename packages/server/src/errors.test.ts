// The errors' table (errors.ts, issue 58 point 3) against the spec: every problem response the
// spec documents answers each of its codes with the status ERRORS gives that code, and its
// examples show the table's status and title. A status changed on one side only fails here.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { ApiError, ERRORS, type ErrorCode, rateLimited, tooManyAttempts } from './errors.ts';
import { SPEC_PATH } from './resources.ts';

// biome-ignore lint/suspicious/noExplicitAny: the parsed YAML document, walked by key
type Json = Record<string, any>;
const spec = parse(readFileSync(SPEC_PATH, 'utf8')) as Json;
const resolve = (node: Json): Json =>
  typeof node?.$ref === 'string'
    ? resolve(
        node.$ref
          .slice(2)
          .split('/')
          .reduce((n: Json, key: string) => n[key], spec),
      )
    : node;
const METHODS = ['get', 'put', 'post', 'delete', 'patch'];

/** Each problem response of each operation: its status, the codes its schema lists, its examples. */
const problemResponses = Object.entries(spec.paths as Json).flatMap(([, item]) =>
  METHODS.filter((method) => item[method]).flatMap((method) =>
    Object.entries(item[method].responses as Json)
      .map(([status, response]) => ({ status, media: resolve(response).content?.['application/problem+json'] }))
      .filter(({ media }) => media !== undefined)
      .map(({ status, media }) => ({
        where: `${item[method].operationId} ${status}`,
        status: Number(status),
        codes: ((media.schema.allOf?.[1]?.properties?.code?.enum ?? []) as ErrorCode[]).slice(),
        examples: Object.values((media.examples ?? {}) as Json).map((example) => resolve(example).value as Json),
      })),
  ),
);

describe('the errors table', () => {
  it('has every code of the spec, and no other', () => {
    expect(Object.keys(ERRORS).sort()).toEqual([...(spec.components.schemas.ErrorCode.enum as string[])].sort());
  });

  it('gives each code the status of every spec response that lists it', () => {
    expect(problemResponses.length).toBeGreaterThan(50);
    const wrong = problemResponses.flatMap(({ where, status, codes }) =>
      codes
        .filter((code) => ERRORS[code]?.status !== status)
        .map((code) => `${where}: ${code} is ${ERRORS[code]?.status}`),
    );
    expect(wrong).toEqual([]);
  });

  it("shows the table's status and title in every example of the spec", () => {
    const examples = problemResponses.flatMap(({ where, examples }) => examples.map((value) => ({ where, value })));
    expect(examples.length).toBeGreaterThan(50);
    const wrong = examples
      .filter(({ value }) => {
        const entry = ERRORS[value.code as ErrorCode];
        return entry?.status !== value.status || entry?.title !== value.title;
      })
      .map(({ where, value }) => `${where}: ${value.code} ${value.status} "${value.title}"`);
    expect(wrong).toEqual([]);
  });
});

describe('ApiError', () => {
  it("takes its status from the code's row", () => {
    expect(new ApiError('account_disabled', 'This account is disabled.').status).toBe(403);
    expect(new ApiError('events_expired', 'Gone.').status).toBe(410);
    expect(new ApiError('headers_too_large', 'Too large.').status).toBe(431);
  });

  it('puts Retry-After, and the RateLimit fields of the bound it names, on a 429', () => {
    expect(rateLimited('Slow down.', 7).headers).toEqual({ 'Retry-After': '7' });
    const lock = { name: 'failed_verify', limit: 5, windowSeconds: 900 };
    for (const error of [rateLimited('Slow down.', 60, lock), tooManyAttempts(60, lock)]) {
      expect(error.status).toBe(429);
      expect(error.headers).toEqual({
        'Retry-After': '60',
        'RateLimit-Policy': '"failed_verify";q=5;w=900',
        RateLimit: '"failed_verify";r=0;t=60',
      });
    }
    expect(tooManyAttempts(60, lock).message).toBe('Too many failed attempts; try again in 60 s.');
  });
});
