// The client as an integrator gets it (issue 46, point 1): the tarball `./pnpmw release` makes
// (`release.ts --client`, `pnpm pack` of packages/client), published to a registry (Verdaccio,
// started here on a temporary folder), then `npm install @user-accounts/client` with plain npm in
// an empty project outside the repository. The project's TypeScript checks the README's client
// example, taken from the README itself, and a problem narrowed by its code; Node runs the example
// against a real server.
//
// The registry has no uplink: nothing is fetched from the internet, so a registry outage cannot
// fail this test. The client's dependencies (openapi-fetch and its helpers, jose) and the
// example's @types/node (with undici-types) are published to it from the workspace's installed
// copies, the versions the client was tested with; npm resolves all of them through the registry,
// as it would from npmjs.org.
import { type ChildProcess, execFile, spawn, spawnSync } from 'node:child_process';
import { once } from 'node:events';
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { serverTarget, type Target } from './targets.ts';

const ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const CLIENT = join(ROOT, 'packages/client');
const README = join(ROOT, 'README.md');
/** The newcomer's walk (issue 46, point 6): its one client block, run as a reader saves it. */
const WALK = join(ROOT, 'docs/getting-started.md');
const VERSION = (JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
/** The README's runnable client block opens with this line; it says what the reader needs. */
const MARKER = '// with ./pnpmw start running';
const README_BASE = 'http://127.0.0.1:3000';
const require = createRequire(import.meta.url);
const VERDACCIO = join(dirname(require.resolve('verdaccio/package.json')), 'bin', 'verdaccio');

/** Our environment less npm's and pnpm's settings (`npm_config_registry` and the like, set by pnpm). */
const cleanEnv = (extra: Record<string, string> = {}) => ({
  ...Object.fromEntries(Object.entries(process.env).filter(([key]) => !/^npm_/i.test(key))),
  ...extra,
});
const run = (command: string, args: string[], cwd: string, env = cleanEnv()) =>
  spawnSync(command, args, { cwd, env, encoding: 'utf8', timeout: 120_000 });
const missing = ['pnpm', 'npm'].filter((tool) => run(tool, ['--version'], ROOT).status !== 0);
const skip = missing.length > 0 ? `${missing.join(' and ')} not found on PATH (run through ./pnpmw)` : undefined;
if (skip) console.warn(`\n[contract-tests] installing the client from a registry: SKIPPED, ${skip}\n`);

/**
 * Node.js 20, the oldest the client says it runs on (issue 64: the walk said `node walk.ts`, which
 * Node 20 refuses): npm's node-<os>-<cpu> package (what the `node` package installs), fetched
 * from the npm registry once per machine into .toolchain/, as ./pnpmw fetches Node 24. Not a
 * dependency of the workspace: its `node` bin would shadow Node 24 in this package's scripts.
 * Where it cannot be had, the Node 20 runs are skipped, saying why.
 */
const NODE_20_VERSION = '20.20.2';
function node20(): string | undefined {
  const prefix = join(ROOT, '.toolchain', `node-${NODE_20_VERSION}`);
  const bin = join(prefix, 'bin', 'node');
  const works = () => spawnSync(bin, ['--version'], { encoding: 'utf8' }).stdout?.trim() === `v${NODE_20_VERSION}`;
  if (works()) return bin;
  mkdirSync(prefix, { recursive: true });
  const pkg = `node-${process.platform}-${process.arch}@${NODE_20_VERSION}`;
  const fetched = spawnSync(
    'npm',
    ['install', '--global', '--prefix', prefix, '--no-fund', '--no-audit', '--loglevel=error', pkg],
    { cwd: prefix, env: cleanEnv(), encoding: 'utf8', timeout: 300_000 },
  );
  if (works()) return bin;
  console.warn(`\n[contract-tests] the client on Node.js 20: SKIPPED, ${pkg} did not install: ${fetched.stderr}\n`);
  return undefined;
}
const NODE_20 = skip === undefined ? node20() : undefined;

function clientBlocks(markdown: string): string[] {
  return [...markdown.matchAll(/^```ts\n([\s\S]*?)^```$/gm)]
    .map((match) => match[1]!)
    .filter((block) => block.startsWith(MARKER));
}

/** A port free a moment ago (Verdaccio prints none it chose itself). */
async function freePort(): Promise<number> {
  const server = createServer();
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as { port: number };
  server.close();
  await once(server, 'close');
  return port;
}

/** The workspace's installed copy of a package, resolved as `from` resolves it. */
function installedFolder(name: string, from: string): string {
  const resolver = createRequire(join(from, 'package.json'));
  try {
    return dirname(resolver.resolve(`${name}/package.json`));
  } catch {
    // An exports map that hides package.json (jose): the folder holding its entry's dist/.
    return resolver.resolve(name).replace(/[/\\]dist[/\\].*$/, '');
  }
}

let work = '';
let target: Target | undefined;
let registry: ChildProcess | undefined;
let registryUrl = '';
/** npm's settings for this test alone: the registry, its token, a cache of its own. */
let npmrc = '';

beforeAll(async () => {
  if (skip) return;
  work = mkdtempSync(join(tmpdir(), 'ua-client-registry-'));
  const storage = join(work, 'registry');
  mkdirSync(storage);
  // No uplinks: only what is published here exists. Anyone may read; a user publishes.
  writeFileSync(
    join(storage, 'config.yaml'),
    [
      `storage: ${join(storage, 'storage')}`,
      'auth:',
      '  htpasswd:',
      `    file: ${join(storage, 'htpasswd')}`,
      'uplinks: {}',
      'packages:',
      "  '**':",
      '    access: $all',
      '    publish: $authenticated',
      'log: { type: stdout, format: pretty, level: warn }',
      '',
    ].join('\n'),
  );
  const port = await freePort();
  registryUrl = `http://127.0.0.1:${port}`;
  registry = spawn(
    process.execPath,
    [VERDACCIO, '--config', join(storage, 'config.yaml'), '--listen', `127.0.0.1:${port}`],
    {
      cwd: storage,
      env: cleanEnv(),
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  let log = '';
  registry.stdout?.on('data', (chunk: Buffer) => (log += chunk.toString()));
  registry.stderr?.on('data', (chunk: Buffer) => (log += chunk.toString()));
  const deadline = Date.now() + 60_000;
  for (;;) {
    if (registry.exitCode !== null) throw new Error(`verdaccio exited with ${registry.exitCode}: ${log}`);
    const up = await fetch(`${registryUrl}/-/ping`).then(
      (answer) => answer.ok,
      () => false,
    );
    if (up) break;
    if (Date.now() > deadline) throw new Error(`verdaccio did not answer within 60 s: ${log}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
  // A user (htpasswd in the temporary folder), as `npm adduser` makes one: its token publishes.
  const added = await fetch(`${registryUrl}/-/user/org.couchdb.user:publisher`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify({ name: 'publisher', password: 'a publisher passphrase' }),
  });
  expect(added.status, await added.clone().text()).toBe(201);
  const { token } = (await added.json()) as { token: string };
  npmrc = join(work, 'npmrc');
  writeFileSync(
    npmrc,
    [
      `registry=${registryUrl}/`,
      `//127.0.0.1:${port}/:_authToken=${token}`,
      `cache=${join(work, 'npm-cache')}`,
      'audit=false',
      'fund=false',
      'update-notifier=false',
      '',
    ].join('\n'),
  );
  target = await serverTarget({ DATA_DIR: join(work, 'data') }, async () => {});
}, 180_000);

afterAll(async () => {
  await target?.close();
  if (registry && registry.exitCode === null && registry.signalCode === null) {
    const exited = once(registry, 'exit');
    registry.kill('SIGTERM');
    const stopped = await Promise.race([
      exited.then(() => true),
      new Promise<boolean>((resolve) => setTimeout(() => resolve(false), 5_000)),
    ]);
    if (!stopped) {
      registry.kill('SIGKILL');
      await exited;
    }
  }
  if (work) rmSync(work, { recursive: true, force: true });
});

const npm = (args: string[], cwd: string) => run('npm', [...args, '--userconfig', npmrc], cwd);

describe.skipIf(skip !== undefined)('the client, published to a registry and installed with npm', () => {
  it('publishes the release tarball, installs it by name, and the README example type-checks and runs against the server', async () => {
    const blocks = clientBlocks(readFileSync(README, 'utf8'));
    expect(blocks, `one README block opening with "${MARKER}"`).toHaveLength(1);
    expect(blocks[0]).toContain(README_BASE);

    // The tarball as the release makes it, named by the release's version.
    const packed = run(
      process.execPath,
      [join(ROOT, 'packages/server/release.ts'), '--client', join(work, 'out')],
      ROOT,
      {
        ...process.env,
      } as Record<string, string>,
    );
    expect(packed.status, packed.stderr + packed.stdout).toBe(0);
    const tarball = join(work, 'out', `user-accounts-client-${VERSION}.tgz`);
    expect(existsSync(tarball), packed.stdout).toBe(true);

    // Its dependencies, and the example's @types/node, from the workspace's installed copies.
    const openapiFetch = installedFolder('openapi-fetch', CLIENT);
    const nodeTypes = installedFolder('@types/node', fileURLToPath(new URL('..', import.meta.url)));
    for (const folder of [
      openapiFetch,
      installedFolder('openapi-typescript-helpers', openapiFetch),
      installedFolder('jose', CLIENT),
      nodeTypes,
      installedFolder('undici-types', nodeTypes),
    ]) {
      const manifest = JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as { publishConfig?: object };
      // A publishConfig could name another registry: none of these has one.
      expect(manifest.publishConfig, folder).toBeUndefined();
      // Copied first: pnpm's store hard-links identical files (openapi-typescript-helpers' three
      // .d.ts), and npm would pack all but one of them as links, which install as empty files.
      const copy = join(work, 'copies', readName(folder));
      cpSync(folder, copy, { recursive: true, dereference: true });
      const published = npm(['publish', copy, '--ignore-scripts'], work);
      expect(published.status, `${folder}: ${published.stderr}`).toBe(0);
    }
    const published = npm(['publish', tarball, '--ignore-scripts'], work);
    expect(published.status, published.stderr).toBe(0);
    const viewed = npm(['view', '@user-accounts/client', 'version', 'license', 'types', '--json'], work);
    expect(viewed.status, viewed.stderr).toBe(0);
    expect(JSON.parse(viewed.stdout)).toEqual({ version: VERSION, license: 'MIT', types: './dist/index.d.ts' });

    // An empty project outside the repository: everything comes through the registry.
    const app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    const installed = npm(
      ['install', '--ignore-scripts', '@user-accounts/client', `@types/node@${readVersion(nodeTypes)}`],
      app,
    );
    expect(installed.status, installed.stderr).toBe(0);
    const pkg = join(app, 'node_modules/@user-accounts/client');
    const manifest = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8'));
    expect(manifest.version).toBe(VERSION);
    expect(manifest.exports).toEqual({ '.': { types: './dist/index.d.ts', default: './dist/index.js' } });
    expect(existsSync(join(pkg, 'LICENSE')), 'the licence ships').toBe(true);
    expect(readFileSync(join(pkg, 'README.md'), 'utf8')).toContain('npm install @user-accounts/client');
    const lock = JSON.parse(readFileSync(join(app, 'package-lock.json'), 'utf8')) as {
      packages: Record<string, { resolved?: string }>;
    };
    for (const [where, entry] of Object.entries(lock.packages))
      if (where !== '') expect(entry.resolved, where).toMatch(new RegExp(`^${registryUrl}/`));

    writeFileSync(join(app, 'example.ts'), blocks[0]!.replaceAll(README_BASE, target!.baseUrl));
    const walk = clientBlocks(readFileSync(WALK, 'utf8'));
    expect(walk, `one getting-started block opening with "${MARKER}"`).toHaveLength(1);
    expect(walk[0]).toContain(README_BASE);
    writeFileSync(join(app, 'walk.ts'), walk[0]!.replaceAll(README_BASE, target!.baseUrl));
    // A problem narrowed by its code to its own members, in the published types.
    writeFileSync(
      join(app, 'narrowing.ts'),
      `import { createClient } from '@user-accounts/client';
const api = createClient({ baseUrl: 'http://127.0.0.1:1', token: 'ua_x' });
export async function login(email: string, password: string): Promise<string | undefined> {
  const { error } = await api.POST('/api/1/user/verify', { body: { email, password } });
  if (error?.code === 'second_factor_required') {
    const ticket: string = error.ticket;
    const factors: ('totp' | 'passkey')[] = error.factors;
    return \`\${ticket} \${factors.join(',')}\`;
  }
  // @ts-expect-error: another code carries no ticket
  return error?.ticket;
}
`,
    );
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
          skipLibCheck: false,
          outDir: 'out',
        },
        files: ['example.ts', 'narrowing.ts', 'walk.ts'],
      }),
    );
    const checked = run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', '.'], app);
    expect(checked.status, checked.stdout).toBe(0);

    // Asynchronous: the server answering the example runs in this very process.
    const ran = await new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
      execFile(
        process.execPath,
        ['out/example.js'],
        { cwd: app, env: { ...process.env, USER_ACCOUNTS_TOKEN: target!.token }, timeout: 90_000 },
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
    const after = await fetch(`${target!.baseUrl}/api/1/user/get?_userId=${id}`, {
      headers: { authorization: `Bearer ${target!.token}` },
    });
    expect(after.status).toBe(404);

    // The newcomer's walk: sign-up, login with a session, session/verify, logout. As the page
    // says: compiled, and saved as walk.mjs, on Node.js 24 and on Node.js 20.
    writeFileSync(join(app, 'walk.mjs'), walk[0]!.replaceAll(README_BASE, target!.baseUrl));
    const nodes = [process.execPath, ...(NODE_20 === undefined ? [] : [NODE_20])];
    for (const node of nodes) {
      const version = run(node, ['--version'], app).stdout.trim();
      for (const file of ['out/walk.js', 'walk.mjs']) {
        const walked = await runNode(node, file, app);
        expect(walked.code, `${version} ${file}: ${walked.stderr}`).toBe(0);
        expect(walked.stdout.trim().split('\n'), `${version} ${file}`).toEqual(['true 1', 'invalid_session']);
      }
    }
    if (NODE_20 !== undefined) {
      expect(run(NODE_20, ['--version'], app).stdout).toMatch(/^v20\./);
      // The README's example on Node.js 20 as well.
      const old = await runNode(NODE_20, 'out/example.js', app);
      expect(old.code, old.stderr).toBe(0);
      expect(old.stdout.trim().split('\n')[0]).toBe('disabled');
    }
  }, 300_000);

  it('installs from the release tarball itself, `npm install ./user-accounts-client-<version>.tgz`, and the walk runs (issue 64)', async () => {
    const tarball = join(work, 'out', `user-accounts-client-${VERSION}.tgz`);
    expect(existsSync(tarball), 'the first test packed it').toBe(true);
    const app = join(work, 'app-from-tarball');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    cpSync(tarball, join(app, basename(tarball)));
    // As the README says it, from the project's folder; the client's own dependencies come from
    // the registry (this test's, which holds them).
    const installed = npm(['install', '--ignore-scripts', `./${basename(tarball)}`], app);
    expect(installed.status, installed.stderr).toBe(0);
    const manifest = JSON.parse(readFileSync(join(app, 'package.json'), 'utf8')) as {
      dependencies: Record<string, string>;
    };
    expect(manifest.dependencies['@user-accounts/client']).toBe(`file:${basename(tarball)}`);
    const walk = clientBlocks(readFileSync(WALK, 'utf8'))[0]!;
    writeFileSync(join(app, 'walk.mjs'), walk.replaceAll(README_BASE, target!.baseUrl));
    for (const node of [process.execPath, ...(NODE_20 === undefined ? [] : [NODE_20])]) {
      const walked = await runNode(node, 'walk.mjs', app);
      expect(walked.code, walked.stderr).toBe(0);
      expect(walked.stdout.trim().split('\n')).toEqual(['true 1', 'invalid_session']);
    }
  }, 120_000);
});

/** `node FILE` in `cwd`, asynchronously (the server answering it runs in this very process). */
function runNode(node: string, file: string, cwd: string) {
  return new Promise<{ code: number; stdout: string; stderr: string }>((resolve) =>
    execFile(
      node,
      [file],
      { cwd, env: { ...process.env, USER_ACCOUNTS_TOKEN: target!.token }, timeout: 90_000 },
      (error, stdout, stderr) =>
        resolve({ code: typeof error?.code === 'number' ? error.code : error ? -1 : 0, stdout, stderr }),
    ),
  );
}

function readName(folder: string): string {
  return (JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as { name: string }).name;
}

function readVersion(folder: string): string {
  return (JSON.parse(readFileSync(join(folder, 'package.json'), 'utf8')) as { version: string }).version;
}
