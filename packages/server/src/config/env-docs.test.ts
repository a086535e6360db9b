// Every variable the server reads is written down where an operator looks: the README's
// configuration table and .env.example (with its default). RATE_LIMIT_CREATE is a deprecated alias.
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';

const read = (path: string) => readFileSync(new URL(path, import.meta.url), 'utf8');
const variables = [
  ...new Set(
    read('./env.ts')
      .match(/'[A-Z][A-Z0-9_]{2,}'/g)!
      .map((v) => v.slice(1, -1)),
  ),
]
  .filter((name) => name !== 'RATE_LIMIT_CREATE')
  .sort();

describe('the configuration, written down', () => {
  it('lists every variable env.ts reads in the README table', () => {
    const table = [...read('../../../../README.md').matchAll(/^\| `([A-Z][A-Z0-9_]+)` \|/gm)].map((m) => m[1]);
    expect(variables.filter((name) => !table.includes(name))).toEqual([]);
  });

  it('lists every variable in .env.example, commented out with its default, and nothing else', () => {
    const example = [...read('../../../../.env.example').matchAll(/^#? ?([A-Z][A-Z0-9_]+)=/gm)]
      .map((m) => m[1]!)
      .sort();
    expect(example).toEqual(variables);
  });

  it('ships a LICENSE that matches package.json', () => {
    const license = (JSON.parse(read('../../../../package.json')) as { license: string }).license;
    expect(license).toBe('MIT');
    expect(read('../../../../LICENSE')).toMatch(/^MIT License/);
  });
});
