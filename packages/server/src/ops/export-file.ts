// `cli export --site NAME > FILE.ndjson`: the site's accounts as export gives them over HTTP,
// written as they are read, a page at a time, with a progress bar on a terminal.

import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { SingleBar } from 'cli-progress';
import { accountsWithSecondFactors, countQuery, exportPages } from '../accounts/listing.ts';
import type { Db } from '../db/client.ts';
import { inWrite } from '../kernel/unit-of-work.ts';
import { terminalSafe } from './terminal.ts';

export async function exportFile(options: {
  db: Db;
  site: string;
  output: NodeJS.WritableStream;
  progress: NodeJS.WritableStream & { isTTY?: boolean };
}): Promise<{ summary: string }> {
  const { db, site, output, progress } = options;
  const started = performance.now();
  const [{ count: total } = { count: 0 }] = await countQuery(db, site, {});
  // Not a change, but a disclosure of every hash: audited as a write, as over HTTP.
  const scope = { site, actor: 'cli', requestId: `cli-export-${randomUUID()}` };
  await inWrite(
    scope,
    { db },
    'export',
    { userId: undefined, status: 200, outcome: 'export started' },
    async () => true,
  );
  const bar = progress.isTTY
    ? new SingleBar({
        stream: progress,
        format: ' {bar} {percentage}% | {value}/{total} accounts | ETA {eta_formatted}',
      })
    : undefined;
  bar?.start(total, 0);
  let done = 0;
  let said = 0;
  try {
    for await (const page of exportPages(db, site)) {
      // Waits when the reader (a file, a pipe) is slower: one page in memory at a time. Escaped
      // as the CLI's other output (the same JSON values: see terminal.ts), as it may be a terminal.
      if (!output.write(terminalSafe(page.lines))) await once(output, 'drain');
      done += page.count;
      bar?.update(done);
      if (bar === undefined && performance.now() - said > 2000) {
        said = performance.now();
        progress.write(`export: ${done}/${total} accounts\n`);
      }
    }
  } finally {
    bar?.stop();
  }
  const seconds = (performance.now() - started) / 1000;
  const withFactors = await accountsWithSecondFactors(db, site);
  return {
    summary:
      `Exported ${done} accounts of site ${site} in ${seconds.toFixed(1)} s (${Math.round(done / Math.max(seconds, 0.001))} accounts/s).\n` +
      `${exportLeavesOut(withFactors)}\n`,
  };
}

/** What the file does not carry, said with the export (the summary on stderr: stdout is the file). */
export function exportLeavesOut(withSecondFactors: number): string {
  const factors =
    withSecondFactors === 0
      ? 'second factors (no account of the site has one)'
      : `second factors: ${withSecondFactors} account${withSecondFactors === 1 ? '' : 's'} with TOTP or passkeys will sign in with ${withSecondFactors === 1 ? 'its' : 'their'} password alone after an import, until ${withSecondFactors === 1 ? 'it enrols' : 'they enrol'} again`;
  return `Not in the file (an import elsewhere will not have it): ${factors}; recovery codes; disabled accounts' state; the breached-password flag; _userId, createdAt and updatedAt. See docs/import-list-export.md.`;
}
