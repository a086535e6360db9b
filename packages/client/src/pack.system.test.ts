// The package as an app gets it: `pnpm pack` (which builds it), then `npm install` of the tarball
// into a new project, which type-checks and runs a small consumer. npm runs offline, with
// openapi-fetch and its one dependency linked from the workspace (copying them would lose pnpm's
// hard-linked files), so npm must still find the tarball's declared dependency satisfied: a
// leftover `catalog:` or a version the workspace does not have fails here.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, describe, expect, it } from 'vitest';

const PACKAGE = fileURLToPath(new URL('..', import.meta.url));
const require = createRequire(import.meta.url);

const run = (command: string, args: string[], cwd: string) =>
  spawnSync(command, args, { cwd, encoding: 'utf8', timeout: 120_000 });
const available = (command: string) => run(command, ['--version'], PACKAGE).status === 0;
const missing = ['pnpm', 'npm'].filter((tool) => !available(tool));
if (missing.length > 0) console.warn(`pack.system.test.ts skipped: ${missing.join(' and ')} not found on PATH`);

const work = mkdtempSync(join(tmpdir(), 'client-pack-'));
afterAll(() => rmSync(work, { recursive: true, force: true }));

const filesUnder = (dir: string): string[] =>
  readdirSync(dir, { recursive: true, withFileTypes: true })
    .filter((entry) => entry.isFile())
    .map((entry) => relative(dir, join(entry.parentPath, entry.name)));

const consumer = `
import { type AccessTokenClaims, AccessTokenError, createClient, type Problem, type User, verifyAccessToken } from '@user-accounts/client';

const seen: string[] = [];
const api = createClient({
  baseUrl: 'http://127.0.0.1:1',
  token: 'ua_x',
  fetch: async (request) => {
    seen.push(\`\${request.method} \${new URL(request.url).pathname}\${new URL(request.url).search} \${request.headers.get('authorization')}\`);
    return Response.json({ result: { _userId: 'u1', email: 'a@example.com', name: 'Ada', phone: null, address: null,
      disabled: false, createdAt: '2026-01-01T00:00:00.000Z', updatedAt: '2026-01-01T00:00:00.000Z' } });
  },
});
const { data, error } = await api.GET('/api/1/user/get', { params: { query: { email: 'a@example.com' } } });
const user: User | undefined = data?.result;
const problem: Problem | undefined = error;
// @ts-expect-error: the packed types keep the client's checks (update cannot set disabled)
void api.POST('/api/1/user/update', { body: { _userId: 'u1', disabled: true } });
// @ts-expect-error: and exactly one of _userId and email on get
void api.GET('/api/1/user/get', { params: { query: {} } });
// verifyAccessToken refuses what is no JWT before fetching any key, with the reason typed.
const refused = await verifyAccessToken('not a token', { jwksUrl: 'http://127.0.0.1:1/.well-known/jwks.json', issuer: 'i', site: 's' })
  .then((claims: AccessTokenClaims) => claims.sub, (error: unknown) => (error instanceof AccessTokenError ? error.reason : String(error)));
console.log(JSON.stringify({ name: user?.name, problem: problem ?? null, seen: seen[0], refused }));
`;
const tsconfig = (moduleResolution: string, module: string) => ({
  compilerOptions: {
    target: 'es2022',
    lib: ['es2022', 'dom'],
    module,
    moduleResolution,
    strict: true,
    skipLibCheck: false,
    outDir: 'out',
  },
  files: ['consumer.ts'],
});

describe.skipIf(missing.length > 0)('the packed client (pnpm pack)', () => {
  it('installs into a new TypeScript app: built JS, types and source maps, no tests, usable as published', () => {
    const packed = run('pnpm', ['pack', '--pack-destination', work], PACKAGE);
    expect(packed.status, packed.stderr + packed.stdout).toBe(0);
    const tarball = readdirSync(work).find((name) => name.endsWith('.tgz'));
    expect(tarball).toBeDefined();

    const app = join(work, 'app');
    mkdirSync(app);
    writeFileSync(join(app, 'package.json'), JSON.stringify({ name: 'app', private: true, type: 'module' }));
    const openapiFetch = dirname(require.resolve('openapi-fetch/package.json'));
    const helpers = dirname(createRequire(openapiFetch).resolve('openapi-typescript-helpers/package.json'));
    // jose's exports map hides its package.json: its folder is the one above dist/.
    const jose = require.resolve('jose').replace(/[/\\]dist[/\\].*$/, '');
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
      ],
      app,
    );
    expect(installed.status, installed.stderr).toBe(0);

    const pkg = join(app, 'node_modules/@user-accounts/client');
    const files = filesUnder(pkg);
    expect(files).toEqual(
      expect.arrayContaining([
        'package.json',
        'README.md',
        'dist/index.js',
        'dist/index.js.map',
        'dist/index.d.ts',
        'dist/index.d.ts.map',
        'dist/generated/schema.d.ts',
        'src/index.ts',
        'src/generated/schema.ts',
      ]),
    );
    expect(files.filter((file) => /\.test\./.test(file))).toEqual([]);
    // Every map must point at a file that shipped, or debuggers and go-to-definition land nowhere.
    for (const map of files.filter((file) => file.endsWith('.map'))) {
      const { sources } = JSON.parse(readFileSync(join(pkg, map), 'utf8')) as { sources: string[] };
      for (const source of sources)
        expect(existsSync(resolve(pkg, dirname(map), source)), `${map} → ${source}`).toBe(true);
    }
    const manifest = JSON.parse(readFileSync(join(pkg, 'package.json'), 'utf8'));
    expect(manifest.exports).toEqual({ '.': { types: './dist/index.d.ts', default: './dist/index.js' } });
    expect(manifest.types).toBe('./dist/index.d.ts');
    expect(Object.keys(manifest.dependencies)).toEqual(['jose', 'openapi-fetch']);

    writeFileSync(join(app, 'consumer.ts'), consumer);
    const tsc = require.resolve('typescript/bin/tsc');
    for (const [name, config] of Object.entries({
      'tsconfig.json': tsconfig('nodenext', 'nodenext'),
      'tsconfig.bundler.json': tsconfig('bundler', 'esnext'),
    })) {
      writeFileSync(join(app, name), JSON.stringify(config));
      const checked = run(process.execPath, [tsc, '-p', name], app);
      expect(checked.status, `${name}: ${checked.stdout}`).toBe(0);
    }
    const ran = run(process.execPath, ['out/consumer.js'], app);
    expect(ran.status, ran.stderr).toBe(0);
    expect(JSON.parse(ran.stdout)).toEqual({
      name: 'Ada',
      problem: null,
      seen: 'GET /api/1/user/get?email=a%40example.com Bearer ua_x',
      refused: 'malformed',
    });
  }, 120_000);
});
