// The README's shell examples, taken from the README itself and run as a reader pastes them, on a
// fresh server: a placeholder that only looks right (an id like "0193…") fails here, not for them.
import { execFile, spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mockTarget, serverTarget, type Target } from './targets.ts';

const README = fileURLToPath(new URL('../../../README.md', import.meta.url));
const DOCS = fileURLToPath(new URL('../../../docs/', import.meta.url));
/** The README and the pages of docs/ it links to: an example moved there is still run. */
const PAGES = [
  README,
  ...readdirSync(DOCS)
    .filter((f) => f.endsWith('.md'))
    .sort()
    .map((f) => join(DOCS, f)),
];
/** A block opts in with this first line, which also tells the reader what it needs. */
const MARKER = '# with ./pnpmw start running';
/** Where `./pnpmw start` listens; the test's server listens elsewhere. */
const README_BASE = 'http://127.0.0.1:3000';
/** A block run against the mock instead (issue 64, point 3), and where `./pnpmw mock` listens. */
const MOCK_MARKER = '# with ./pnpmw mock running';
const MOCK_BASE = 'http://127.0.0.1:4010';

function runnableBlocks(markdown: string, marker = MARKER): string[] {
  return [...markdown.matchAll(/^```(?:sh|bash)\n([\s\S]*?)^```$/gm)]
    .map((match) => match[1]!)
    .filter((block) => block.startsWith(marker));
}

/** The statuses the block's `# 201 …` comment lines promise, in order (`# 422 ×9`: nine of them). */
function promisedStatuses(block: string): number[] {
  return [...block.matchAll(/^# (\d{3})(?: ×(\d+))?\b/gm)].flatMap((match) =>
    Array<number>(Number(match[2] ?? 1)).fill(Number(match[1])),
  );
}

const missing = ['bash', 'curl'].filter((tool) => spawnSync(tool, ['--version']).error !== undefined);
const skip = missing.length > 0 ? `${missing.join(' and ')} not found` : undefined;
if (skip) console.warn(`\n[contract-tests] README shell examples: SKIPPED, ${skip}\n`);

// Every curl also reports its status on stderr, so the test can hold each to the README's comment
// while stdout stays as pasted (the examples pipe it into node).
const PRELUDE = `set -euo pipefail
curl() { command curl --write-out '%{stderr}HTTP_STATUS %{http_code}\\n' "$@"; }
`;

let home: string;
let target: Target;
let mock: Target;
beforeAll(async () => {
  if (skip) return;
  mock = await mockTarget().start();
  home = mkdtempSync(join(tmpdir(), 'ua-readme-'));
  // No API_TOKENS: the server mints the dev token into data/dev-token, where the README reads it.
  target = await serverTarget({ DATA_DIR: join(home, 'data') }, async () => {}, { env: { API_TOKENS: '' } });
});
afterAll(async () => {
  await mock?.close();
  await target?.close();
  if (home) rmSync(home, { recursive: true, force: true });
});

function run(script: string): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    // Asynchronous: the server answering these requests runs in this very process.
    execFile(
      'bash',
      ['-c', PRELUDE + script],
      {
        cwd: home,
        // The node running the tests, for the README's `node -p`, whatever the PATH has.
        env: { ...process.env, PATH: `${dirname(process.execPath)}${delimiter}${process.env.PATH ?? ''}` },
        timeout: 60_000,
      },
      (error, stdout, stderr) =>
        resolve({ code: typeof error?.code === 'number' ? error.code : error ? -1 : 0, stdout, stderr }),
    );
  });
}

describe.skipIf(skip !== undefined)('the shell examples of the README and docs/, as pasted', () => {
  const blocks = PAGES.flatMap((page) => runnableBlocks(readFileSync(page, 'utf8')));

  it('has some', () => {
    expect(blocks.length).toBeGreaterThan(0);
  });

  const mockBlocks = PAGES.flatMap((page) => runnableBlocks(readFileSync(page, 'utf8'), MOCK_MARKER));
  it('has some for the mock', () => {
    expect(mockBlocks.length).toBeGreaterThan(0);
  });

  it.each([
    ...blocks.map((block, i) => [`${i + 1}`, block] as const),
    ...mockBlocks.map((block, i) => [`${i + 1} (the mock)`, block] as const),
  ])(
    'block %s runs, twice, with the statuses it shows',
    async (_, block) => {
      const onMock = block.startsWith(MOCK_MARKER);
      const base = onMock ? MOCK_BASE : README_BASE;
      expect(block).toContain(base);
      const script = block.replaceAll(base, (onMock ? mock : target).baseUrl);
      // Twice: pasting the block again must work too (it cleans up after itself).
      for (const round of [1, 2]) {
        const { code, stdout, stderr } = await run(script);
        expect(code, `round ${round}\n${stdout}\n${stderr}`).toBe(0);
        const statuses = [...stderr.matchAll(/^HTTP_STATUS (\d{3})$/gm)].map((match) => Number(match[1]));
        expect(statuses, `round ${round}\n${stdout}\n${stderr}`).toEqual(promisedStatuses(block));
      }
    },
    120_000,
  );
});
