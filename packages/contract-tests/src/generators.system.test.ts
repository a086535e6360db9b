// The spec as other people's client generators read it (issue 27): @hey-api/openapi-ts (fetch
// client, types, zod) and orval (fetch client, zod) generate from spec/openapi.yaml into a temporary
// folder; TypeScript 5.9 type-checks what they wrote with a round trip of our own that uses it;
// their zod modules are imported; and each client creates, gets, verifies and deletes an account on
// a real server. What the generators make of the spec is what a user of them gets.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SPEC_FILE } from './spec-check.ts';
import { embeddedServer, type Target } from './targets.ts';

const run = promisify(execFile);
const PACKAGE_DIR = fileURLToPath(new URL('..', import.meta.url));

/** What the test uses of each generator, typed here so that this file compiles without them. */
interface Generators {
  hey: { createClient(config: Record<string, unknown>): Promise<unknown> };
  orval: { generate(config: Record<string, unknown>): Promise<unknown> };
  /** TypeScript's compiler (5.9, this package's). */
  tsc: string;
}

/** The generators, or why they cannot run here (then the suite says so and skips). */
async function loadGenerators(): Promise<Generators | string> {
  const load = (name: string) => import(name);
  try {
    return {
      hey: await load('@hey-api/openapi-ts'),
      orval: await load('orval'),
      tsc: fileURLToPath(import.meta.resolve('typescript/bin/tsc')),
    };
  } catch (error) {
    return `a generator is not installed (${(error as Error).message.split('\n')[0]})`;
  }
}

const generators = await loadGenerators();
if (typeof generators === 'string') console.warn(`generators.system.test.ts skipped: ${generators}`);

/**
 * Our use of the generated code: type-checked with it, then run. The `@ts-expect-error` lines say
 * that "exactly one of email or _userId" is a type each generator enforces: a body with neither is
 * refused by the compiler, not only by the server.
 */
const ROUND_TRIPS = `
import { client } from './hey/client.gen.js';
import * as hey from './hey/sdk.gen.js';
import type { VerifyUserRequest as HeyVerifyUserRequest } from './hey/types.gen.js';
import * as heyZod from './hey/zod.gen.js';
import * as orval from './orval/client.js';
import * as orvalZod from './orval/zod.js';

const PASSWORD = 'a long and unusual passphrase';
// Names in other scripts than English's, which a generator's pattern must not refuse.
const NAME = 'José Grace Hopper 林';
const ADDRESS = '203.0.113.7';

// @ts-expect-error neither email nor _userId
export const heyNeither: HeyVerifyUserRequest = { password: PASSWORD };
// @ts-expect-error neither email nor _userId
export const orvalNeither: orval.VerifyUserRequest = { password: PASSWORD };

export async function withHeyApi(baseUrl: string, token: string, email: string): Promise<string[]> {
  client.setConfig({ baseUrl, auth: () => token });
  const steps: string[] = [];
  const body = heyZod.zCreateUserBody.parse({ email, password: PASSWORD, name: NAME });
  const created = await hey.createUser({ body });
  steps.push(\`create \${created.response?.status}\`);
  const id = heyZod.zCreateUserResponse.parse(created.data).result._userId;
  const got = await hey.getUser({ query: { _userId: id } });
  steps.push(\`get \${got.response?.status} \${heyZod.zGetUserResponse.parse(got.data).result.name}\`);
  const verified = await hey.verifyUser({
    body: heyZod.zVerifyUserBody.parse({ email, password: PASSWORD }),
    headers: heyZod.zVerifyUserHeaders.parse({ 'X-End-User-IP': ADDRESS }),
  });
  steps.push(\`verify \${verified.response?.status} \${verified.data?.result.status}\`);
  const deleted = await hey.deleteUser({ body: { _userId: id } });
  steps.push(\`delete \${deleted.response?.status} \${deleted.data?.result.status}\`);
  return steps;
}

export async function withOrval(token: string, email: string): Promise<string[]> {
  const options = { headers: { Authorization: \`Bearer \${token}\` } };
  const steps: string[] = [];
  const body = orvalZod.CreateUserBody.parse({ email, password: PASSWORD, name: NAME });
  const created = await orval.createUser(body, options);
  steps.push(\`create \${created.status}\`);
  const id = orvalZod.CreateUserResponse.parse(created.data).result._userId;
  const got = await orval.getUser({ _userId: id }, options);
  steps.push(\`get \${got.status} \${orvalZod.GetUserResponse.parse(got.data).result.name}\`);
  orvalZod.VerifyUserHeader.parse({ 'X-End-User-IP': ADDRESS });
  const verified = await orval.verifyUser(orvalZod.VerifyUserBody.parse({ _userId: id, password: PASSWORD }), {
    headers: { ...options.headers, 'X-End-User-IP': ADDRESS },
  });
  steps.push(\`verify \${verified.status} \${orvalZod.VerifyUserResponse.parse(verified.data).result.status}\`);
  const deleted = await orval.deleteUser({ _userId: id }, options);
  steps.push(\`delete \${deleted.status} \${orvalZod.DeleteUserResponse.parse(deleted.data).result.status}\`);
  return steps;
}
`;

const TSCONFIG = {
  compilerOptions: {
    target: 'es2023',
    lib: ['es2023', 'dom', 'dom.iterable'],
    module: 'esnext',
    moduleResolution: 'bundler',
    strict: true,
    noEmit: true,
    skipLibCheck: true,
    types: [],
  },
  include: ['**/*.ts'],
  exclude: ['node_modules'],
};

describe.skipIf(typeof generators === 'string')('client generators, from the spec', () => {
  let dir: string;
  let target: Target;
  /** Our round trips, compiled by the test runner with the generated code they import. */
  const roundTrips = (): Promise<{
    withHeyApi(baseUrl: string, token: string, email: string): Promise<string[]>;
    withOrval(token: string, email: string): Promise<string[]>;
  }> => import(pathToFileURL(join(dir, 'round-trips.ts')).href);

  beforeAll(async () => {
    if (typeof generators === 'string') return;
    target = await embeddedServer();
    dir = mkdtempSync(join(tmpdir(), 'generators-'));
    // The generated code's own imports (zod, hey-api's client) resolve from this package.
    symlinkSync(join(PACKAGE_DIR, 'node_modules'), join(dir, 'node_modules'), 'dir');
    const input = fileURLToPath(SPEC_FILE);
    await generators.hey.createClient({
      input,
      output: join(dir, 'hey'),
      plugins: ['@hey-api/client-fetch', '@hey-api/typescript', '@hey-api/sdk', 'zod'],
      logs: { level: 'silent' },
    });
    for (const client of ['fetch', 'zod'] as const) {
      await generators.orval.generate({
        input: { target: input },
        output: {
          target: join(dir, 'orval', client === 'fetch' ? 'client.ts' : 'zod.ts'),
          client,
          mode: 'single',
          // orval's fetch client calls the spec's paths on this base.
          baseUrl: target.baseUrl,
        },
      });
    }
    writeFileSync(join(dir, 'round-trips.ts'), ROUND_TRIPS);
    writeFileSync(join(dir, 'tsconfig.json'), JSON.stringify(TSCONFIG));
  }, 180_000);

  afterAll(async () => {
    await target?.close();
    if (dir !== undefined) rmSync(dir, { recursive: true, force: true });
  });

  it('writes code that TypeScript 5.9 accepts, "exactly one of" bodies typed as such', async () => {
    if (typeof generators === 'string') return;
    const checked = await run(process.execPath, [generators.tsc, '-p', dir], { timeout: 60_000 }).then(
      () => '',
      (error: { stdout?: string; message: string }) => error.stdout || error.message,
    );
    expect(checked).toBe('');
  }, 180_000);

  it('writes zod modules that import, and accept the names and addresses the server accepts', async () => {
    const heyZod = await import(pathToFileURL(join(dir, 'hey', 'zod.gen.ts')).href);
    const orvalZod = await import(pathToFileURL(join(dir, 'orval', 'zod.ts')).href);
    for (const name of ['Grace Hopper', 'José', 'Ada Lovelace', 'محمد', '李小龙']) {
      expect(heyZod.zName.safeParse(name).success, `hey-api: ${name}`).toBe(true);
      expect(orvalZod.CreateUserBody.safeParse({ email: 'a@example.com', password: 'x'.repeat(8), name }).success).toBe(
        true,
      );
    }
    for (const address of ['203.0.113.7', '2001:db8::1']) {
      expect(heyZod.zEndUserIp.safeParse(address).success, `hey-api: ${address}`).toBe(true);
      expect(orvalZod.VerifyUserHeader.safeParse({ 'X-End-User-IP': address }).success, `orval: ${address}`).toBe(true);
    }
  });

  it("round-trips an account with hey-api's client", async () => {
    const email = `hey.${Date.now()}@example.com`;
    expect(await (await roundTrips()).withHeyApi(target.baseUrl, target.token, email)).toEqual([
      'create 201',
      'get 200 José Grace Hopper 林',
      'verify 200 password verified',
      'delete 200 user removed',
    ]);
  });

  it("round-trips an account with orval's fetch client", async () => {
    const email = `orval.${Date.now()}@example.com`;
    expect(await (await roundTrips()).withOrval(target.token, email)).toEqual([
      'create 201',
      'get 200 José Grace Hopper 林',
      'verify 200 password verified',
      'delete 200 user removed',
    ]);
  });
});
