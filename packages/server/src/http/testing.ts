// Test helper: a bare Hono app with what the middleware reads from the context, so that one
// middleware can be tested through real routing (`app.request`) without the whole service.
import { Hono } from 'hono';
import type { TokenVerifier } from '../auth/tokens.ts';
import { compileValidators, type Validators } from '../contract/validation.ts';
import { ApiError } from '../errors.ts';
import type { RateLimiter } from '../limits/rate-limit.ts';
import { silentLogger } from '../testing/loggers.ts';
import type { Answer, AppDeps, AppEnv, OpContext } from './context.ts';
import type { Operation } from './define-operation.ts';
import { type Problem, renderProblem } from './errors.ts';
import { type CorsFields, compileTable } from './pipeline.ts';

// Compiling the spec takes a while; every app of a test file can share the result.
let validators: Validators | undefined;

export interface TestAppOptions {
  /** Only what the middleware under test touches; the rest stays missing on purpose. */
  deps?: Partial<AppDeps>;
  /** Context variables set before the middleware runs, as earlier middleware would (e.g. `token`). */
  vars?: Partial<AppEnv['Variables']>;
}

/**
 * `deps`, `validators`, a `requestId` and its `log` on every request, and the service's rendering
 * of an ApiError. Any other error is rethrown so that `app.request` rejects with it: a test then
 * fails on the real error instead of on an anonymous 500.
 */
export function testApp(options: TestAppOptions = {}): Hono<AppEnv> {
  const deps = { logger: silentLogger(), ...options.deps } as unknown as AppDeps;
  validators ??= compileValidators();
  const app = new Hono<AppEnv>();
  app.use(async function provideTestContext(c, next) {
    c.set('deps', deps);
    c.set('validators', validators!);
    c.set('requestId', 'test-request-id');
    c.set('log', deps.logger.child({ requestId: 'test-request-id' }));
    for (const [name, value] of Object.entries(options.vars ?? {})) {
      c.set(name as keyof AppEnv['Variables'], value as never);
    }
    await next();
  });
  app.onError(function onError(error, c) {
    if (error instanceof ApiError) return renderProblem(c, error);
    throw error;
  });
  return app;
}

/** The problem+json body of an error answer; fails the test when the answer is not one. */
export async function problemOf(response: Response): Promise<Problem> {
  const type = response.headers.get('content-type');
  if (type !== 'application/problem+json') {
    throw new Error(`expected application/problem+json, got ${type} (${response.status}): ${await response.text()}`);
  }
  return (await response.json()) as Problem;
}

/** A row of a test pipeline: an operation's fields, those a test leaves out filled in. */
export type TestRow = Partial<Omit<Operation<unknown>, 'handle'>> & {
  handle(c: OpContext, input: unknown): Answer | Promise<Answer>;
};

const noLimits: RateLimiter = {
  consume: async () => [],
  consumeBudget: async () => [],
  close: async () => {},
};

/**
 * Rows served by the service's own pipeline (pipeline.ts), with only what the steps under test
 * touch: `vars.token` is what any token sent authenticates as (each request sends one unless it
 * sets Authorization itself), the limiter counts nothing unless given, and every request carries
 * `X-Request-Id: test-request-id` unless it sets one. `request(path, init)` as app.request.
 */
export function testPipeline(rows: TestRow[], options: TestAppOptions & { cors?: CorsFields } = {}) {
  const token = options.vars?.token;
  const tokens = {
    verify: async () => token,
    verifyKnown: () => token,
  } as unknown as TokenVerifier;
  const deps = { logger: silentLogger(), limiter: noLimits, tokens, ...options.deps } as unknown as AppDeps;
  validators ??= compileValidators();
  const table = rows.map(
    (row, i) =>
      ({
        name: `test${i}`,
        method: 'POST',
        path: `/test/${i}`,
        scope: token?.scopes[0] ?? 'read',
        request: { query: true },
        parse: () => undefined,
        ...row,
        handle: async (c: OpContext, input: unknown) => row.handle(c, input),
      }) as Operation<unknown>,
  );
  const { fetch } = compileTable(table, {
    deps,
    validators,
    timeoutFor: () => deps.requestTimeoutMs ?? 10_000,
    ...(options.cors === undefined ? {} : { cors: options.cors }),
  });
  return {
    request(path: string, init: RequestInit = {}): Promise<Response> {
      const headers = new Headers(init.headers);
      if (!headers.has('authorization')) headers.set('authorization', 'Bearer test-token');
      if (!headers.has('x-request-id')) headers.set('x-request-id', 'test-request-id');
      const request = new Request(new URL(path, 'http://localhost'), { ...init, headers });
      const answered = fetch(request);
      if (answered === undefined) throw new Error(`no test row has ${request.method} ${path}`);
      return answered;
    },
  };
}
