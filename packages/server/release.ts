// `./pnpmw release`: release/user-accounts-<version>-<os>-<arch>.tar.gz, what an operator deploys
// (docs/deploy.md): the bundle (dist/), exactly the packages it imports at run time with their
// own dependencies for this OS and CPU (node_modules/), the Node runtime that built and tested it
// (runtime/node, this very process's binary, with its licence), the launcher (bin/user-accounts,
// which runs that runtime, or NODE's after checking its version), the systemd unit, the env file
// and HAProxy's, PostgreSQL's and Patroni's configuration (deploy/), the operators' README (docs/deploy.md), the docs (docs/,
// their links rewritten to resolve inside the archive, or to the repository for a file it does not
// hold), CHANGELOG.md and LICENSE. Beside it, the client's npm tarball
// (release/user-accounts-client-<version>.tgz, `pnpm pack` of packages/client), what
// `npm publish` takes.
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  cpSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, posix } from 'node:path';
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

/**
 * The launcher: runs the server or the CLI on the shipped runtime (runtime/node), or on NODE's
 * when set, after checking its version. POSIX sh, as systemd and operators call it.
 */
function launcher(): string {
  const [, major, minor] = /^>=(\d+)\.(\d+)$/.exec(NODE_RANGE) ?? [];
  if (major === undefined || minor === undefined) throw new Error(`release: engines.node "${NODE_RANGE}" is not >=M.m`);
  return `#!/bin/sh
# user-accounts ${VERSION}. Runs on the Node.js it ships (runtime/node, ${process.version}, the one it
# was tested with); NODE=/path/to/node runs another one instead (Node.js ${NODE_RANGE}).
#   user-accounts serve [--env-file FILE]        the server (configuration: the environment)
#   user-accounts migrate [--env-file FILE]      the database's migrations (as \`cli migrate\`)
#   user-accounts cli [--env-file FILE] ARGS...  the operator CLI (cli --help)
#   user-accounts --version
# --env-file reads KEY=value lines (the systemd unit's EnvironmentFile) before the environment.
set -eu
# Shell built-ins only up to the exec (no dirname): it runs with nothing on PATH.
case "$0" in */*) bin=\${0%/*} ;; *) bin=. ;; esac
here=$(cd "$bin/.." && pwd)
say() { printf 'user-accounts: %s\\n' "$*" >&2; }
if [ -z "\${NODE:-}" ] && [ -x "$here/runtime/node" ]; then
  node=$here/runtime/node
else
  node=\${NODE:-node}
  if ! version=$("$node" -p process.versions.node 2>/dev/null); then
    say "needs Node.js ${NODE_RANGE} and found no \\"$node\\" (unset NODE to run the archive's own runtime/node, or set NODE=/path/to/node)"
    exit 1
  fi
  major=\${version%%.*}
  rest=\${version#*.}
  minor=\${rest%%.*}
  if [ "$major" -lt ${major} ] || { [ "$major" -eq ${major} ] && [ "$minor" -lt ${minor} ]; }; then
    say "needs Node.js ${NODE_RANGE}; \\"$node\\" is $version (unset NODE to run the archive's own runtime/node, or set NODE=/path/to/a/Node.js ${major})"
    exit 1
  fi
fi
what=\${1:-}
[ $# -gt 0 ] && shift
env_file=
if [ "\${1:-}" = --env-file ] && [ $# -ge 2 ]; then env_file=$2; shift 2; fi
case "$what" in
  serve) script=main.js; flags=--max-semi-space-size=16 ;;
  cli) script=cli.js; flags= ;;
  migrate) script=cli.js; flags=; set -- migrate "$@" ;;
  --version|version) echo ${VERSION}; exit 0 ;;
  *) say "usage: user-accounts serve|migrate|cli [--env-file FILE] [ARGS...] | --version"; exit 2 ;;
esac
if [ -n "$env_file" ]; then
  [ -r "$env_file" ] || { say "cannot read $env_file"; exit 1; }
  exec "$node" $flags --env-file="$env_file" "$here/dist/$script" "$@"
fi
exec "$node" $flags "$here/dist/$script" "$@"
`;
}

/** Where the repository's files are read on the web, for a link to one the archive does not hold. */
const REPOSITORY = `https://github.com/user-accounts/user-accounts/blob/v${VERSION}`;
const LINK = /(\]\()([^)\s]+)(\))/g;

/**
 * A Markdown file of the repository (`from`, a path in it) as the archive holds it at `to`: each
 * relative link rebased to where its target is in the archive, or to the repository on the web
 * when the archive does not hold it. A link to nothing fails the release.
 */
function rebaseLinks(markdown: string, from: string, to: string, inArchive: (path: string) => string | undefined) {
  return markdown.replace(LINK, (whole, open: string, target: string, close: string) => {
    if (/^[a-z][a-z0-9+.-]*:/i.test(target) || target.startsWith('#')) return whole;
    const [path = '', anchor] = target.split('#', 2);
    const repoPath = posix.normalize(posix.join(posix.dirname(from), path));
    if (repoPath.startsWith('..') || !existsSync(join(repo, repoPath)))
      throw new Error(`release: ${from} links to ${target}, which is not in the repository`);
    const shipped = inArchive(repoPath);
    const rebased =
      shipped === undefined
        ? `${REPOSITORY}/${repoPath}`
        : posix.relative(posix.dirname(to), shipped) || posix.basename(shipped);
    const slash = path.endsWith('/') && !rebased.endsWith('/') ? '/' : '';
    return `${open}${rebased}${slash}${anchor === undefined ? '' : `#${anchor}`}${close}`;
  });
}

/** The Node binary running this, with its licence when it lies beside it (Node's own archive layout). */
function copyRuntime(stage: string): void {
  mkdirSync(join(stage, 'runtime'));
  cpSync(realpathSync(process.execPath), join(stage, 'runtime', 'node'));
  chmodSync(join(stage, 'runtime', 'node'), 0o755);
  const home = dirname(dirname(realpathSync(process.execPath)));
  const licence = [join(home, 'LICENSE'), ...nodePackageLicences(home)].find((file) => existsSync(file));
  if (licence !== undefined) cpSync(licence, join(stage, 'runtime', 'LICENSE'));
}

/** npm's `node` package keeps the binary's own package (node-<os>-<arch>, with Node's LICENSE) below it. */
function nodePackageLicences(home: string): string[] {
  const modules = join(home, 'node_modules');
  if (!existsSync(modules)) return [];
  return readdirSync(modules)
    .filter((name) => name.startsWith(`node-${process.platform}-`))
    .map((name) => join(modules, name, 'LICENSE'));
}

/**
 * `pnpm pack` of packages/client into `outDir` (its prepack builds dist/); answers the tarball's
 * path. The version in it is the release's (the root package.json's), stamped into the packed
 * package.json: packages/client/package.json's own version is not read (issue 64: the two
 * differed, and the release refused), so the version is written in one place.
 */
function packClient(outDir: string): string {
  const client = join(repo, 'packages', 'client');
  const manifest = JSON.parse(readFileSync(join(client, 'package.json'), 'utf8')) as { name: string };
  const work = mkdtempSync(join(tmpdir(), 'ua-client-pack-'));
  try {
    // pnpm as this run found it (./pnpmw release), else on PATH.
    const execPath = process.env.npm_execpath;
    const [command, args] =
      execPath !== undefined && /pnpm/.test(execPath) && execPath.endsWith('.cjs')
        ? [process.execPath, [execPath]]
        : ['pnpm', []];
    const packed = spawnSync(command, [...args, 'pack', '--pack-destination', work], {
      cwd: client,
      encoding: 'utf8',
    });
    if (packed.status !== 0)
      throw new Error(
        `release: pnpm pack of the client failed: ${packed.error?.message ?? ''}${packed.stderr}${packed.stdout}`,
      );
    const [tarball, ...more] = readdirSync(work).filter((file) => file.endsWith('.tgz'));
    if (tarball === undefined || more.length > 0)
      throw new Error(`release: pnpm pack wrote no one tarball: ${packed.stdout}`);
    // Unpacked, its version set, packed again as npm packs (package/…, owned by root).
    const unpacked = join(work, 'unpacked');
    mkdirSync(unpacked);
    run('tar', ['-xzf', join(work, tarball), '-C', unpacked]);
    const packedManifest = join(unpacked, 'package', 'package.json');
    const fields = JSON.parse(readFileSync(packedManifest, 'utf8')) as Record<string, unknown>;
    writeFileSync(packedManifest, `${JSON.stringify({ ...fields, version: VERSION }, null, 2)}\n`);
    const out = join(outDir, `${manifest.name.replace(/^@/, '').replace('/', '-')}-${VERSION}.tgz`);
    run('tar', ['-czf', out, '--owner=0', '--group=0', '--sort=name', '-C', unpacked, 'package']);
    return out;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

function run(command: string, args: string[]): void {
  const done = spawnSync(command, args, { encoding: 'utf8' });
  if (done.status !== 0)
    throw new Error(`release: ${command} ${args.join(' ')} failed: ${done.error?.message ?? ''}${done.stderr}`);
}

/** A file moved, or copied then removed when `to` is on another file system (rename's EXDEV). */
function moveFile(from: string, to: string): void {
  try {
    renameSync(from, to);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code !== 'EXDEV') throw error;
    cpSync(from, `${to}.partial`);
    renameSync(`${to}.partial`, to);
    rmSync(from);
  }
}

/**
 * Builds the archive and the client's tarball into `outDir`; answers the archive's path. Both are
 * made in a folder of their own first and moved into `outDir` only once both are whole: a
 * release that fails leaves nothing behind (issue 64: it left the archive and exited 1).
 */
export async function release(outDir = join(repo, 'release')): Promise<string> {
  const name = `user-accounts-${VERSION}-${process.platform}-${process.arch}`;
  const work = mkdtempSync(join(tmpdir(), 'ua-release-'));
  try {
    const made = join(work, 'made');
    mkdirSync(made);
    // The client first: quick, and what failed once (after the archive was written).
    const clientMade = packClient(made);
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
    for (const file of [
      'user-accounts@.service',
      'user-accounts.env',
      'haproxy.cfg',
      'haproxy-errors',
      'patroni',
      'postgresql',
    ])
      cpSync(join(repo, 'deploy', file), join(stage, 'deploy', file), { recursive: true });
    copyRuntime(stage);
    for (const file of ['CHANGELOG.md', 'LICENSE']) cpSync(join(repo, file), join(stage, file));
    // The docs, and deploy.md again as the README; their links made to resolve here.
    const docs = readdirSync(join(repo, 'docs'));
    mkdirSync(join(stage, 'docs'));
    const inArchive = (path: string): string | undefined => {
      const here =
        ['docs/', 'deploy/'].some((folder) => path.startsWith(folder)) || ['CHANGELOG.md', 'LICENSE'].includes(path);
      return here && existsSync(join(stage, path)) ? path : undefined;
    };
    for (const file of docs) cpSync(join(repo, 'docs', file), join(stage, 'docs', file));
    for (const file of docs.filter((name) => name.endsWith('.md')))
      writeFileSync(
        join(stage, 'docs', file),
        rebaseLinks(readFileSync(join(repo, 'docs', file), 'utf8'), `docs/${file}`, `docs/${file}`, inArchive),
      );
    writeFileSync(
      join(stage, 'README.md'),
      rebaseLinks(readFileSync(join(repo, 'docs', 'deploy.md'), 'utf8'), 'docs/deploy.md', 'README.md', inArchive),
    );
    const archiveMade = join(made, `${name}.tar.gz`);
    // Owned by root in the archive, whoever built it: unpacked by root, nothing is the builder's.
    const tar = spawnSync('tar', ['-czf', archiveMade, '--owner=0', '--group=0', '--sort=name', '-C', work, name], {
      encoding: 'utf8',
    });
    if (tar.status !== 0) throw new Error(`release: tar failed: ${tar.stderr}`);
    // Both whole: moved into outDir (copied where it is another file system).
    mkdirSync(outDir, { recursive: true });
    const archive = join(outDir, `${name}.tar.gz`);
    const client = join(outDir, basename(clientMade));
    try {
      moveFile(archiveMade, archive);
      moveFile(clientMade, client);
    } catch (error) {
      for (const file of [archive, client, `${archive}.partial`, `${client}.partial`]) rmSync(file, { force: true });
      throw error;
    }
    process.stdout.write(
      `${archive}\n  node_modules: ${[...copied].map(([n, v]) => `${n}@${v}`).join(', ')}\n  runtime: Node.js ${process.version}\n${client}\n`,
    );
    return archive;
  } finally {
    rmSync(work, { recursive: true, force: true });
  }
}

// `node release.ts [OUT]`: both archives; `node release.ts --client OUT`: the client's tarball only
// (what client-install.system.test.ts publishes to its registry).
if (import.meta.main) {
  if (process.argv[2] === '--client') {
    const out = process.argv[3] ?? join(repo, 'release');
    mkdirSync(out, { recursive: true });
    const work = mkdtempSync(join(tmpdir(), 'ua-client-'));
    try {
      const made = packClient(work);
      moveFile(made, join(out, basename(made)));
      process.stdout.write(`${join(out, basename(made))}\n`);
    } finally {
      rmSync(work, { recursive: true, force: true });
    }
  } else await release(process.argv[2]);
}
