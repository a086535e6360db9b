// Checks the test tiers of vitest.config.ts (issue 34, point 5) as vitest itself resolves them:
// every test file in the repository is in exactly one tier, the word before `.test.ts` in its name,
// if any, names a tier (scripts/test-tiers.ts: `cli.sytem.test.ts` would otherwise be a unit test),
// no "unit" test opens a database, starts a process or drives a browser (the developer's loop
// needs nothing running), and no "contract" test starts a process of ours or a browser. Run by
// `./pnpmw test` before the tests; exits 1 naming each file at fault.
import { execFileSync } from 'node:child_process';
import { globSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { suffixOf, TIER_SUFFIXES } from './test-tiers.ts';

const root = fileURLToPath(new URL('..', import.meta.url));
const vitest = join(root, 'node_modules/vitest/vitest.mjs');

/** Imports that start a process of ours or a browser: system tests only. */
const SYSTEM_ONLY = [
  /^node:child_process$/,
  /(^|\/)testing\/processes(\.ts)?$/,
  /^playwright/,
  /(^|\/)browser\/chromium(\.ts)?$/,
];
/** Imports that need something running: a database, a process, a browser. */
const NOT_UNIT = [
  ...SYSTEM_ONLY,
  /(^|\/)db\/client(\.ts)?$/, // openPglite, openPostgres
  /^postgres$/,
  /^@electric-sql\/pglite/,
  /^ioredis$/,
  /(^|\/)testing\/postgres(\.ts)?$/,
];

const listed = JSON.parse(
  execFileSync(process.execPath, [vitest, 'list', '--filesOnly', '--json'], {
    cwd: root,
    encoding: 'utf8',
    maxBuffer: 16 * 1024 * 1024,
  }),
) as { file: string; projectName: string }[];

const tiersOf = new Map<string, string[]>();
for (const { file, projectName } of listed) {
  const path = relative(root, file);
  tiersOf.set(path, [...(tiersOf.get(path) ?? []), projectName]);
}

const onDisk = globSync('**/*.test.ts', {
  cwd: root,
  exclude: (path) => /(^|\/)(node_modules|\.[^/]+)$/.test(path),
}).sort();

const faults: string[] = [];
for (const path of onDisk) {
  const tiers = tiersOf.get(path) ?? [];
  if (tiers.length === 0) faults.push(`${path}: in no tier of vitest.config.ts (it never runs)`);
  if (tiers.length > 1) faults.push(`${path}: in ${tiers.join(' and ')} (it runs twice)`);
  const suffix = suffixOf(path);
  if (suffix !== undefined && !Object.hasOwn(TIER_SUFFIXES, suffix)) {
    faults.push(
      `${path}: .${suffix}.test.ts names no tier (${Object.keys(TIER_SUFFIXES).join(', ')}; none for unit or contract)`,
    );
  }
  const forbidden = tiers.includes('unit') ? NOT_UNIT : tiers.includes('contract') ? SYSTEM_ONLY : [];
  // Type-only imports need nothing at run time.
  for (const [, specifier] of readFileSync(join(root, path), 'utf8').matchAll(
    /^import (?!type )[^;]*?from '([^']+)'/gms,
  )) {
    if (forbidden.some((pattern) => pattern.test(specifier!))) {
      const base = path.replace(/\.test\.ts$/, '');
      const names =
        tiers[0] === 'unit'
          ? `${base}.integration.test.ts (a database) or ${base}.system.test.ts`
          : `${base}.system.test.ts`;
      faults.push(`${path}: a ${tiers[0]} test imports ${specifier}; name it ${names}`);
    }
  }
}

if (faults.length > 0) {
  console.error(`Test tiers (vitest.config.ts):\n  ${faults.join('\n  ')}`);
  process.exit(1);
}
const count = (tier: string) => listed.filter((f) => f.projectName === tier).length;
console.log(
  `Test tiers: ${onDisk.length} files, each in one tier (unit ${count('unit')}, integration ${count('integration')}, contract ${count('contract')}, system ${count('system') + count('system-alone') + count('system-last')})`,
);
