// The floors' check (scripts/check-layers.ts, run by `./pnpmw test` and `./pnpmw lint`): which
// imports it refuses, in every form an import can be written.
import { describe, expect, it } from 'vitest';
import { checkErrorStatuses, checkFile } from '../../../scripts/check-layers.ts';

const faultyLines = (file: string, text: string) =>
  checkFile(file, text).map((fault) => fault.split(': imports ')[0]!.split(':').pop());

describe('the layers check', () => {
  // A statement over several lines is named at its module's line (6): the line to change.
  it('refuses an import of http/ from outside it, whatever its form, naming the line', () => {
    const text = [
      "import { ApiError } from '../http/errors.ts';",
      "import type { AppEnv } from '../http/context.ts';",
      'import {',
      '  type IfMatch,',
      '  parseIfMatch,',
      "} from '../http/etag.ts';",
      "export { renderProblem } from '../http/errors.ts';",
      "export type { Problem } from '../http/errors.ts';",
      "export * from '../http/errors.ts';",
      "const app = await import('../http/app.ts');",
      "type Env = import('../http/context.ts').AppEnv;",
      "import '../http/serve.ts';",
      "import { renderProblem as r } from '@user-accounts/server/http/errors';",
    ].join('\n');
    expect(faultyLines('accounts/create.ts', text)).toEqual(['1', '2', '6', '7', '8', '9', '10', '11', '12', '13']);
  });

  it('refuses an import of ops/ from a domain folder, type imports and tests included', () => {
    for (const folder of ['accounts', 'factors', 'passwords', 'auth', 'limits', 'events/webhooks', 'db', 'sessions']) {
      const up = '../'.repeat(folder.split('/').length);
      expect(faultyLines(`${folder}/x.test.ts`, `import type { Tracing } from '${up}ops/tracing.ts';`)).toEqual(['1']);
    }
    expect(faultyLines('events/webhooks/worker.ts', "import { x } from '../../ops/metrics.ts';")).toEqual(['1']);
    // What the domain builds on, too: the spec's validators, the errors, the tracing core.
    expect(faultyLines('contract/validation.ts', "import { x } from '../ops/metrics.ts';")).toEqual(['1']);
    expect(faultyLines('errors.ts', "import { x } from './ops/metrics.ts';")).toEqual(['1']);
    expect(faultyLines('tracing.ts', "import { x } from './http/context.ts';")).toEqual(['1']);
    expect(checkFile('cli.ts', "import { runCommand } from './ops/commands.ts';")).toEqual([]);
  });

  it('lets http/ import anything, ops/ import the domain, and the composition root wire the floors', () => {
    expect(checkFile('http/routes/get-user.ts', "import { toUser } from '../../accounts/to-user.ts';")).toEqual([]);
    expect(checkFile('http/app.ts', "import { createMetrics } from '../ops/metrics.ts';")).toEqual([]);
    expect(checkFile('ops/commands.ts', "import { createUser } from '../accounts/create.ts';")).toEqual([]);
    expect(checkFile('assemble.ts', "import { createApp } from './http/app.ts';")).toEqual([]);
    expect(checkFile('main.ts', "import { serveApp } from './http/serve.ts';")).toEqual([]);
    expect(checkFile('accounts/create.ts', "import { ApiError } from '../errors.ts';")).toEqual([]);
  });

  it('reads imports, not words: comments and strings are not imports', () => {
    const text = [
      "// import { ApiError } from '../http/errors.ts';",
      "/* import('../ops/tracing.ts') */",
      'const hint = "import { x } from \'../http/errors.ts\'";',
    ].join('\n');
    expect(checkFile('accounts/create.ts', text)).toEqual([]);
  });

  // Issue 58, point 3: a code's status is written once, in the errors' table.
  it('refuses a new ApiError with a status written by hand outside errors.ts, in the server and the mock, naming the line', () => {
    const text = [
      "import { ApiError } from '../errors.ts';",
      "const a = () => new ApiError(403, 'account_disabled', 'This account is disabled.');",
      'const b = () =>',
      '  new ApiError(',
      '    429,',
      "    'rate_limited',",
      "    'Slow down.',",
      '  );',
      "const c = new errors.ApiError(404 as const, 'not_found', 'x');",
      "const d = new ApiError('account_disabled', 'This account is disabled.');",
      "// new ApiError(400, 'invalid_request', 'a comment is no fault')",
      "const e = \"new ApiError(400, 'invalid_request', 'nor a string')\";",
    ].join('\n');
    const lines = (file: string) => checkErrorStatuses(file, text).map((fault) => fault.split(': new ApiError(')[0]);
    expect(lines('packages/server/src/accounts/verify.ts')).toEqual([
      'packages/server/src/accounts/verify.ts:2',
      'packages/server/src/accounts/verify.ts:4',
      'packages/server/src/accounts/verify.ts:9',
    ]);
    expect(lines('packages/mock/src/gate.ts')).toHaveLength(3);
    expect(lines('packages/server/src/http/app.test.ts')).toHaveLength(3);
    // The table's own file builds its factories from it.
    expect(checkErrorStatuses('packages/server/src/errors.ts', text)).toEqual([]);
  });
});
