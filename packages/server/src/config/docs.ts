// The configuration table (docs/configuration.md) and .env.example, generated from env.ts's schema:
// `./pnpmw generate` writes them, `./pnpmw check:generated` fails when they are stale.
import { readFileSync, writeFileSync } from 'node:fs';
import { docs, UNDOCUMENTED, type VariableDoc, variables } from './env.ts';

const ROOT = new URL('../../../../', import.meta.url);
/** Where the configuration table lives: the docs page the README links to. */
export const CONFIG_PAGE = new URL('docs/configuration.md', ROOT);
export const ENV_EXAMPLE = new URL('.env.example', ROOT);
const START = '<!-- config:start (generated from packages/server/src/config/env.ts: ./pnpmw generate) -->';
const END = '<!-- config:end -->';

const documented = variables
  .filter(([name]) => !UNDOCUMENTED.has(name))
  .map(([name, schema]) => [name, docs.get(schema) as VariableDoc] as const);

export function configTable(): string {
  const rows = documented.map(
    ([name, doc]) =>
      `| \`${name}\` | ${doc.shown ?? (doc.default === undefined ? 'unset' : `\`${doc.default}\``)} | ${doc.meaning} |`,
  );
  return ['| variable | default | meaning |', '|---|---|---|', ...rows].join('\n');
}

export function envExample(): string {
  const header = [
    '# Every variable the server reads, with its default; uncomment to change one. What each means:',
    '# docs/configuration.md. The server reads its environment, not this file:',
    "# export them, or use your process manager's environment file.",
    '# Generated from packages/server/src/config/env.ts by ./pnpmw generate: edit that, not this.',
    '',
  ];
  const lines = documented.map(
    ([name, doc]) => `# ${name}=${doc.default ?? /^`([^`]+)`$/.exec(doc.shown ?? '')?.[1] ?? ''}`,
  );
  return `${[...header, ...lines].join('\n')}\n`;
}

/** The configuration page with its table between the markers replaced by the generated one. */
export function pageWithTable(readme: string): string {
  const start = readme.indexOf(START);
  const end = readme.indexOf(END);
  if (start < 0 || end < start) throw new Error(`docs/configuration.md must hold the markers ${START} and ${END}`);
  return `${readme.slice(0, start + START.length)}\n${configTable()}\n${readme.slice(end)}`;
}

if (import.meta.main) {
  const check = process.argv.includes('--check');
  const files = [
    [CONFIG_PAGE, pageWithTable],
    [ENV_EXAMPLE, envExample],
  ] as const;
  const stale = files.filter(([file, make]) => {
    const now = readFileSync(file, 'utf8');
    if (now === make(now)) return false;
    if (!check) writeFileSync(file, make(now));
    return true;
  });
  if (check && stale.length > 0) {
    process.stderr.write(`stale, run ./pnpmw generate: ${stale.map(([file]) => file.pathname).join(', ')}\n`);
    process.exitCode = 1;
  }
}
