// Test helper: a bare Hono app with what the middleware reads from the context, so that one
// middleware can be tested through real routing (`app.request`) without the whole service.
import { Hono } from 'hono';
import { compileValidators, type Validators } from '../contract/validation.ts';
import { ApiError } from '../errors.ts';
import { silentLogger } from '../testing/loggers.ts';
import type { AppDeps, AppEnv } from './context.ts';
import { type Problem, renderProblem } from './errors.ts';

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
