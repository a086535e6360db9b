// Every variable the server reads is written down where an operator looks: docs/configuration.md's
// configuration table and .env.example, both generated from env.ts's schema (docs.ts).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { CONFIG_PAGE, ENV_EXAMPLE, envExample, pageWithTable } from './docs.ts';
import { loadConfig, UNDOCUMENTED, variables } from './env.ts';

const read = (path: string | URL) => readFileSync(new URL(path, import.meta.url), 'utf8');

describe('the configuration, written down', () => {
  it('reads no variable that the schema does not declare', () => {
    const asked = new Set<string>();
    loadConfig(new Proxy({}, { get: (_, name) => void asked.add(String(name)) }));
    // INIT_CWD is pnpm's (where the user typed the command), not the operator's.
    const declared = new Set([...variables.map(([name]) => name), 'INIT_CWD']);
    expect([...asked].filter((name) => !declared.has(name))).toEqual([]);
  });

  it('has the configuration table (docs/configuration.md) and .env.example as generated from the schema (./pnpmw generate)', () => {
    expect(read(CONFIG_PAGE)).toBe(pageWithTable(read(CONFIG_PAGE)));
    expect(read(ENV_EXAMPLE)).toBe(envExample());
  });

  it('lists every variable but the deprecated aliases in both, .env.example with its default', () => {
    const named = variables.map(([name]) => name).filter((name) => !UNDOCUMENTED.has(name));
    const table = [...read(CONFIG_PAGE).matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1]);
    expect(table).toEqual(named);
    expect(read(ENV_EXAMPLE)).toMatch(/^# PORT=3000$/m);
    expect([...read(ENV_EXAMPLE).matchAll(/^# ([A-Z][A-Z0-9_]+)=/gm)].map((m) => m[1])).toEqual(named);
  });

  it('ships a LICENSE that matches package.json', () => {
    const license = (JSON.parse(read('../../../../package.json')) as { license: string }).license;
    expect(license).toBe('MIT');
    expect(read('../../../../LICENSE')).toMatch(/^MIT License/);
  });
});
