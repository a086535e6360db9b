// `pnpm build` gives a server that runs with plain node: bundled, with the contract and the
// migrations beside it. (What it saves in memory and start time is measured by pnpm bench.)
import { spawnSync } from 'node:child_process';
import { readFileSync, rmSync, writeFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { processes } from './testing/processes.ts';

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));
// Inside the package, so that the two external dependencies resolve from its node_modules.
const OUT = `${PACKAGE}dist-test-${process.pid}`;
const procs = processes();

/**
 * The built CLI, waited for without holding this process's event loop (spawnSync did): a
 * connection the server closed meanwhile (idle past its keep-alive) was then taken up again by
 * the next fetch before its close was read, which failed "other side closed" on a busy machine.
 */
const builtCli = (args: string[], dataDir: string) =>
  procs.cli(args, { DATA_DIR: dataDir }, undefined, `${OUT}/cli.js`);

beforeAll(() => {
  const built = spawnSync(process.execPath, [`${PACKAGE}build.ts`, OUT], { encoding: 'utf8' });
  expect(built.status, built.stderr).toBe(0);
}, 180_000);
afterAll(() => {
  procs.cleanup();
  rmSync(OUT, { recursive: true, force: true });
});

describe('the built server (pnpm build)', () => {
  it('starts with plain node on a new embedded database, serves the API, and its CLI reaches it', async () => {
    const dataDir = procs.dataDir();
    const server = procs.server({ DATA_DIR: dataDir }, `${OUT}/main.js`);
    await server.ready;
    const token = readFileSync(`${dataDir}/dev-token`, 'utf8').trim();
    const headers = { Authorization: token, 'Content-Type': 'application/json' };
    const created = await fetch(`${server.baseUrl}/api/1/user/create`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ email: 'built@example.com', password: 'a built passphrase 42', name: 'Built' }),
    });
    expect(created.status).toBe(201);
    const got = await fetch(`${server.baseUrl}/api/1/user/get?email=built@example.com`, { headers });
    expect(((await got.json()) as { result: { name: string } }).result.name).toBe('Built');
    // Validation comes from the copied contract: an unknown field is refused by name.
    const refused = await fetch(`${server.baseUrl}/api/1/user/create`, {
      method: 'POST',
      headers,
      body: '{"nickname":"x"}',
    });
    expect(refused.status).toBe(400);

    const cli = await builtCli(['token', 'list', '--json'], dataDir);
    expect(cli.code, cli.stderr).toBe(0);
    expect(JSON.parse(cli.stdout)).toEqual([expect.objectContaining({ label: 'dev-token', site: 'default' })]);

    // A site's metadata schema is checked in the schema worker, a file of its own beside main.js.
    const schemaFile = `${dataDir}/schema.json`;
    writeFileSync(schemaFile, JSON.stringify({ properties: { plan: { type: 'string', pattern: '^(free|pro)$' } } }));
    const set = await builtCli(['metadata-schema', 'set', '--site', 'default', schemaFile], dataDir);
    expect(set.code, set.stderr).toBe(0);
    const withPlan = (plan: string) =>
      fetch(`${server.baseUrl}/api/1/user/create`, {
        method: 'POST',
        headers,
        body: JSON.stringify({
          email: `${plan}@example.com`,
          password: 'a built passphrase 42',
          name: 'P',
          metadata: { plan },
        }),
      });
    expect((await withPlan('pro')).status).toBe(201);
    const gold = await withPlan('gold');
    expect(gold.status).toBe(400);
    expect(((await gold.json()) as { errors: { pointer: string }[] }).errors[0]?.pointer).toBe('/metadata/plan');
  }, 180_000);
});
