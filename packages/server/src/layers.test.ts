// The floors' check (scripts/check-layers.ts, run by `./pnpmw test` and `./pnpmw lint`): which
// imports it refuses, in every form an import can be written, and the folders' order and cycles.
import { describe, expect, it } from 'vitest';
import { checkErrorStatuses, checkFile, checkFloors, FLOORS } from '../../../scripts/check-layers.ts';

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

describe('the floors and the folder cycles', () => {
  const check = (files: Record<string, string>) => checkFloors(new Map(Object.entries(files)));

  it('refuses a cycle between peers of one floor, type imports and tests included, printing it with its imports', () => {
    expect(FLOORS.find((floor) => floor.includes('sessions'))).toContain('orgs');
    const faults = check({
      'sessions/manage.ts': "import { removeMembershipsOf } from '../orgs/members.ts';",
      'orgs/members.test.ts': "import type { Amr } from '../sessions/rules.ts';",
      'orgs/members.ts': '',
      'sessions/rules.ts': '',
    });
    expect(faults).toEqual([
      'folders import each other in a cycle: orgs/ → sessions/ → orgs/\n' +
        '    packages/server/src/orgs/members.test.ts:1: imports ../sessions/rules.ts\n' +
        '    packages/server/src/sessions/manage.ts:1: imports ../orgs/members.ts',
    ]);
  });

  it('prints a longer cycle whole, each step with the line that makes it', () => {
    const faults = check({
      'events/a.ts': "import { x } from '../auth/b.ts';",
      'auth/b.ts': "\nimport { y } from '../passwords/c.ts';",
      'passwords/c.ts': "export { z } from '../events/a.ts';",
    });
    expect(faults).toEqual([
      'folders import each other in a cycle: auth/ → passwords/ → events/ → auth/\n' +
        '    packages/server/src/auth/b.ts:2: imports ../passwords/c.ts\n' +
        '    packages/server/src/passwords/c.ts:1: imports ../events/a.ts\n' +
        '    packages/server/src/events/a.ts:1: imports ../auth/b.ts',
    ]);
  });

  it('refuses an import of a floor above, naming the line, and the cycle it closes', () => {
    const faults = check({
      'accounts/delete.ts':
        "import type { Db } from '../db/client.ts';\nimport { endSessionsOf } from '../sessions/manage.ts';",
      'sessions/issue.ts': "import { verifyPassword } from '../accounts/verify.ts';",
    });
    expect(faults).toEqual([
      'packages/server/src/accounts/delete.ts:2: imports ../sessions/manage.ts — sessions/ is on a floor above accounts/ (FLOORS, scripts/check-layers.ts)',
      'folders import each other in a cycle: accounts/ → sessions/ → accounts/\n' +
        '    packages/server/src/accounts/delete.ts:2: imports ../sessions/manage.ts\n' +
        '    packages/server/src/sessions/issue.ts:1: imports ../accounts/verify.ts',
    ]);
  });

  it('refuses a folder on no floor', () => {
    expect(check({ 'people/user-data.ts': "import { toUser } from '../accounts/to-user.ts';" })).toEqual([
      "packages/server/src/people/ is on no floor: give it its place in FLOORS (scripts/check-layers.ts) and its row in docs/development.md's map",
    ]);
  });

  it('lets the root import every floor, and tests the harness and the root; a floor never imports the root', () => {
    expect(
      check({
        'assemble.ts':
          "import { createApp } from './http/app.ts';\nimport { sessionHooks } from './sessions/hooks.ts';",
        'http/app.ts': "import { errors } from '../errors.ts';",
        'testing/loggers.ts': "import { loggerOptions } from '../assemble.ts';",
        'db/client.test.ts': "import { postgresUnavailable } from '../testing/postgres.ts';",
        'accounts/create.test.ts': "import { accountHooks } from '../assemble.ts';",
        'http/testing.ts': "import { silentLogger } from '../testing/loggers.ts';",
        'testing/templates.ts': "import type { Database } from '../db/client.ts';",
      }),
    ).toEqual([]);
    expect(check({ 'accounts/delete.ts': "import { accountHooks } from '../assemble.ts';" })).toEqual([
      'packages/server/src/accounts/delete.ts:1: imports ../assemble.ts — (the composition root) is on a floor above accounts/ (FLOORS, scripts/check-layers.ts)',
    ]);
  });
});
