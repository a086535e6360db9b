// `./pnpmw release`: release/user-accounts-<version>-<os>-<arch>.tar.gz, what an operator deploys
// (docs/deploy.md): the bundle (dist/), exactly the packages it imports at run time with their
// own dependencies for this OS and CPU (node_modules/), the launcher (bin/user-accounts, which
// checks the Node version first), the systemd unit, the env file and HAProxy's configuration
// (deploy/), the operators' README (docs/deploy.md), CHANGELOG.md and LICENSE.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  realpathSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildServer, VERSION } from './build.ts';

const server = fileURLToPath(new URL('.', import.meta.url));
const repo = join(server, '..', '..');
/** The Node versions the release runs on: the root package.json's engines. */
const NODE_RANGE = (JSON.parse(readFileSync(join(repo, 'package.json'), 'utf8')) as { engines: { node: string } })
  .engines.node;

/** The folder Node would load `name` from, starting at `from` (node_modules up the tree). */
function installed(name: string, from: string): string | undefined {
  for (let dir = from; ; dir = dirname(dir)) {
    const candidate = join(dir, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return realpathSync(candidate);
    if (dirname(dir) === dir) return undefined;
  }
}

/**
 * Copies `name` and what it depends on into `modules`, flat. Optional dependencies missing here
 * are those for other platforms (pnpm installs only this one's native builds).
 */
function copyPackage(name: string, from: string, modules: string, copied: Map<string, string>, optional = false): void {
  const source = installed(name, from);
  if (source === undefined) {
    if (optional) return;
    throw new Error(`release: ${name} is not installed (needed from ${from}); run ./pnpmw install`);
  }
  const manifest = JSON.parse(readFileSync(join(source, 'package.json'), 'utf8')) as {
    version: string;
    dependencies?: Record<string, string>;
    optionalDependencies?: Record<string, string>;
  };
  const had = copied.get(name);
  if (had !== undefined) {
    if (had !== manifest.version) throw new Error(`release: ${name} is needed at ${had} and ${manifest.version}`);
    return;
  }
  copied.set(name, manifest.version);
  cpSync(source, join(modules, name), {
    recursive: true,
    dereference: true,
    filter: (f) => !f.slice(source.length).includes('/node_modules'),
  });
  for (const dep of Object.keys(manifest.dependencies ?? {})) copyPackage(dep, source, modules, copied);
  for (const dep of Object.keys(manifest.optionalDependencies ?? {})) copyPackage(dep, source, modules, copied, true);
}

/** The launcher: checks Node, then runs the server or the CLI. POSIX sh, as systemd and operators call it. */
function launcher(): string {
  const [, major, minor] = /^>=(\d+)\.(\d+)$/.exec(NODE_RANGE) ?? [];
  if (major === undefined || minor === undefined) throw new Error(`release: engines.node "${NODE_RANGE}" is not >=M.m`);
  return `#!/bin/sh
# user-accounts ${VERSION}. Needs Node.js ${NODE_RANGE}: NODE names it, else \`node\` on PATH.
#   user-accounts serve [--env-file FILE]        the server (configuration: the environment)
#   user-accounts cli [--env-file FILE] ARGS...  the operator CLI (cli --help)
#   user-accounts --version
# --env-file reads KEY=value lines (the systemd unit's EnvironmentFile) before the environment.
set -eu
here=$(cd "$(dirname "$0")/.." && pwd)
node=\${NODE:-node}
say() { printf 'user-accounts: %s\\n' "$*" >&2; }
if ! version=$("$node" -p process.versions.node 2>/dev/null); then
  say "needs Node.js ${NODE_RANGE} and found no \\"$node\\" (install Node.js ${major}, or set NODE=/path/to/node)"
  exit 1
fi
major=\${version%%.*}
rest=\${version#*.}
minor=\${rest%%.*}
if [ "$major" -lt ${major} ] || { [ "$major" -eq ${major} ] && [ "$minor" -lt ${minor} ]; }; then
  say "needs Node.js ${NODE_RANGE}; \\"$node\\" is $version (install Node.js ${major}, or set NODE=/path/to/node)"
  exit 1
fi
what=\${1:-}
[ $# -gt 0 ] && shift
env_file=
if [ "\${1:-}" = --env-file ] && [ $# -ge 2 ]; then env_file=$2; shift 2; fi
case "$what" in
  serve) script=main.js; flags=--max-semi-space-size=16 ;;
  cli) script=cli.js; flags= ;;
  --version|version) echo ${VERSION}; exit 0 ;;
  *) say "usage: user-accounts serve|cli [--env-file FILE] [ARGS...] | --version"; exit 2 ;;
esac
if [ -n "$env_file" ]; then
  [ -r "$env_file" ] || { say "cannot read $env_file"; exit 1; }
  exec "$node" $flags --env-file="$env_file" "$here/dist/$script" "$@"
fi
exec "$node" $flags "$here/dist/$script" "$@"
`;
}

/** Builds the archive into `outDir`; answers its path. */
export async function release(outDir = join(repo, 'release')): Promise<string> {
  const name = `user-accounts-${VERSION}-${process.platform}-${process.arch}`;
  const work = mkdtempSync(join(tmpdir(), 'ua-release-'));
  try {
    const stage = join(work, name);
    const packages = await buildServer(join(stage, 'dist'));
    const copied = new Map<string, string>();
    for (const name of packages) copyPackage(name, server, join(stage, 'node_modules'), copied);
    // The bundle is ES modules; Node reads the type from here. No dependencies: they are in node_modules.
    writeFileSync(
      join(stage, 'package.json'),
      `${JSON.stringify({ name: 'user-accounts', version: VERSION, private: true, type: 'module', engines: { node: NODE_RANGE } }, null, 2)}\n`,
    );
    mkdirSync(join(stage, 'bin'));
    writeFileSync(join(stage, 'bin', 'user-accounts'), launcher());
    chmodSync(join(stage, 'bin', 'user-accounts'), 0o755);
    mkdirSync(join(stage, 'deploy'));
    for (const file of ['user-accounts@.service', 'user-accounts.env', 'haproxy.cfg', 'haproxy-errors'])
      cpSync(join(repo, 'deploy', file), join(stage, 'deploy', file), { recursive: true });
    cpSync(join(repo, 'docs', 'deploy.md'), join(stage, 'README.md'));
    for (const file of ['CHANGELOG.md', 'LICENSE']) cpSync(join(repo, file), join(stage, file));
    mkdirSync(outDir, { recursive: true });
    const archive = join(outDir, `${name}.tar.gz`);
    // Owned by root in the archive, whoever built it: unpacked by root, nothing is the builder's.
    const tar = spawnSync('tar', ['-czf', archive, '--owner=0', '--group=0', '--sort=name', '-C', work, name], {
      encoding: 'utf8',
    });
    if (tar.status !== 0) throw new Error(`release: tar failed: ${tar.stderr}`);
    process.stdout.write(`${archive}\n  node_modules: ${[...copied].map(([n, v]) => `${n}@${v}`).join(', ')}\n`);
    return archive;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

if (import.meta.main) await release(process.argv[2]);
