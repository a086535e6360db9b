// The client as the README installs it into someone's app: `pnpm pack` here, `npm install` of the
// tarball there, then the README's client example, taken from the README itself, type-checked
// by the app's TypeScript and run by Node against a real server. npm runs offline: openapi-fetch
// and jose (the tarball's dependencies, with theirs) and @types/node (for the example's process.env)
// are linked from the workspace, so a registry outage cannot fail this test.
import { execFile, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverTarget, type Target } from './targets.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CLIENT = join(ROOT, 'packages/client');
const README = join(ROOT, 'README.md');
/** The README's runnable client block opens with this line; it says what the reader needs. */
const MARKER = '// with ./pnpmw start running';
const README_BASE = 'http://127.0.0.1:3000';
const require = createRequire(import.meta.url);

const run = (command: string, args: string[], cwd: string) =>
  spawnSync(command, args, { cwd, encoding: 'utf8', timeout: 120_000 });
const missing = ['pnpm', 'npm'].filter((tool) => run(tool, ['--version'], ROOT).status !== 0);
const skip = missing.length > 0 ? `${missing.join(' and ')} not found on PATH (run through ./pnpmw)` : undefined;
if (skip) console.warn(`\n[contract-tests] installing the packed client: SKIPPED, ${skip}\n`);

function clientBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)]
    .map((match) => match[1]!)
    .filter((block) => block.startsWith(MARKER));
}

let work: string;
let target: Target;
beforeAll(async () => {
  if (skip) return;
  work = mkdtempSync(join(tmpdir(), 'ua-client-install-'));
  target = await serverTarget({ DATA_DIR: join(work, 'data') }, async () => {});
});
afterAll(async () => {
  await target?.close();
  if (work) rmSync(work, { recursive: true, force: true });
});

describe.skipIf(skip !== undefined)('the packed client, installed into an app', () => {
  it('installs from the tarball, and the README example type-checks and runs against the server', async () => {
    const blocks = clientBlocks(readFileSync(README, 'utf8'));
    expect(blocks, `one README block opening with "${MARKER}"`).toHaveLength(1);
    expect(blocks[0]).toContain(README_BASE);

    const packed = run('pnpm', ['pack', '--pack-destination', work], CLIENT);
    expect(packed.status, packed.stderr + packed.stdout).toBe(0);
    const tarball = readdirSync(work).find((name) => name.endsWith('.tgz'));
    expect(tarball).toMatch(/^user-accounts-client-\d+\.\d+\.\d+\.tgz$/);

    const app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    const clientRequire = createRequire(join(CLIENT, 'package.json'));
    const openapiFetch = dirname(clientRequire.resolve('openapi-fetch/package.json'));
    const helpers = dirname(createRequire(openapiFetch).resolve('openapi-typescript-helpers/package.json'));
    // jose (verifyAccessToken's): its exports map hides its package.json, its folder is the one above dist/.
    const jose = clientRequire.resolve('jose').replace(/[/\\]dist[/\\].*$/, '');
    const nodeTypes = dirname(require.resolve('@types/node/package.json'));
    const undiciTypes = dirname(createRequire(nodeTypes).resolve('undici-types/package.json'));
    const installed = run(
      'npm',
      [
        'install',
        '--offline',
        '--ignore-scripts',
        '--no-audit',
        '--no-fund',
        join(work, tarball!),
        openapiFetch,
        helpers,
        jose,
        nodeTypes,
        undiciTypes,
      ],
      app,
    );
    expect(installed.status, installed.stderr).toBe(0);

    writeFileSync(join(app, 'example.ts'), blocks[0]!.replaceAll(README_BASE, target.baseUrl));
    writeFileSync(
      join(app, 'tsconfig.json'),
      JSON.stringify({
        compilerOptions: {
          target: 'es2022',
          lib: ['es2022', 'dom'],
          module: 'nodenext',
          moduleResolution: 'nodenext',
          types: ['node'],
          strict: true,
          outDir: 'out',
        },
        files: ['example.ts'],
      }),
    );
    const checked = run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', '.'], app);
    expect(checked.status, checked.stdout).toBe(0);

    // Asynchronous: the server answering the example runs in this very process.
    const ran = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        ['out/example.js'],
        { cwd: app, env: { ...process.env, USER_ACCOUNTS_TOKEN: target.token }, timeout: 90_000 },
        (error, stdout, stderr) =>
          resolve({ code: typeof error?.code === 'number' ? error.code : error ? -1 : 0, stdout, stderr }),
      ),
    );
    expect(ran.code, ran.stderr).toBe(0);
    const lines = ran.stdout.trim().split('\n');
    const id = /^\S+ user\.created (\S+)$/m.exec(ran.stdout)?.[1];
    expect(id, ran.stdout).toMatch(/^[0-9a-f-]{36}$/);
    expect(lines).toEqual([
      'disabled',
      'ada@example.com true',
      expect.stringMatching(new RegExp(`^\\d+ user\\.created ${id}$`)),
      expect.stringMatching(new RegExp(`^\\d+ user\\.disabled ${id}$`)),
      'GET http://127.0.0.1:2/api/1/user/count: no answer from the server (fetch failed: ECONNREFUSED)',
    ]);
    // The example deleted its account: a second reader can paste it again.
    const after = await fetch(`${target.baseUrl}/api/1/user/get?_userId=${id}`, {
      headers: { authorization: `Bearer ${target.token}` },
    });
    expect(after.status).toBe(404);
  }, 240_000);
});
