// `cli import --site NAME FILE.ndjson [--dry-run]`: a file of any size, one account per line (the
// rows of POST /api/1/user/import), streamed through the same checks and writes in batches of
// 1,000, with a progress bar on a terminal and plain lines otherwise.
import { randomUUID } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { SingleBar } from 'cli-progress';
import { type ImportItem, type ImportTarget, importRows } from '../accounts/import.ts';
import { inWrite } from '../kernel/unit-of-work.ts';
import type { FirebaseScrypt } from '../passwords/foreign.ts';
import { escapeControls } from './terminal.ts';

const BATCH = 1000;
// How many refused rows are told one by one; the rest only counted by code.
const TOLD = 20;
/**
 * The longest line read, in bytes: an account with every field at the spec's limit (email 254,
 * name 200, address 1,000, passwordHash 512 and passwordSalt 128 characters, phone 32), each
 * character written as a \u escape, takes about 22 KB, and its metadata up to 64 KiB more as
 * compact JSON, six times that with every character escaped (issue 28: export writes metadata,
 * and a line of 64 KiB refused an export's own account). A longer line is refused without being
 * held: one line of 600 MB made a string too long for V8 and stopped the import.
 */
export const MAX_LINE_BYTES = 512 * 1024;

export interface ImportFileOptions {
  target: ImportTarget;
  file: string;
  dryRun: boolean;
  /** The Firebase project's hash parameters (--firebase-scrypt), for lines with a Firebase hash. */
  firebase?: FirebaseScrypt | undefined;
  /** Where progress goes (stderr), and whether it is a terminal to draw a bar on. */
  progress: NodeJS.WritableStream & { isTTY?: boolean };
}

export interface ImportFileResult {
  code: number;
  summary: string;
}

/** Lines in the file, for the bar's total and ETA: one quick pass that holds no more than a chunk. */
async function countLines(file: string): Promise<number> {
  let lines = 0;
  let last = 10;
  for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
    for (let i = chunk.indexOf(10); i !== -1; i = chunk.indexOf(10, i + 1)) lines++;
    last = chunk.at(-1) ?? last;
  }
  return last === 10 ? lines : lines + 1;
}

/** A line's text, or only its length when it is over `limit` (its bytes are not kept). */
type Line = { text: string } | { tooLong: number };

/**
 * The file's lines (split at LF; a CR before it is JSON's whitespace), each held only up to
 * `limit` bytes: memory stays bounded by the limit and a chunk whatever the file holds.
 */
export async function* readLines(file: string, limit: number): AsyncGenerator<Line> {
  let parts: Buffer[] = [];
  let length = 0;
  const end = (): Line => {
    const line = length > limit ? { tooLong: length } : { text: Buffer.concat(parts, length).toString('utf8') };
    parts = [];
    length = 0;
    return line;
  };
  const take = (piece: Buffer) => {
    if (length + piece.length <= limit) parts.push(piece);
    else parts = [];
    length += piece.length;
  };
  for await (const chunk of createReadStream(file) as AsyncIterable<Buffer>) {
    let start = 0;
    for (let lf = chunk.indexOf(10); lf !== -1; lf = chunk.indexOf(10, start)) {
      take(chunk.subarray(start, lf));
      yield end();
      start = lf + 1;
    }
    if (start < chunk.length) take(chunk.subarray(start));
  }
  if (length > 0) yield end();
}

interface Tally {
  done: number;
  created: number;
  byCode: Map<string, number>;
  told: string[];
}

function reporter(options: ImportFileOptions, total: number) {
  const started = performance.now();
  const { progress } = options;
  if (progress.isTTY) {
    const bar = new SingleBar({
      stream: progress,
      format: ' {bar} {percentage}% | {value}/{total} rows | {rate} rows/s | ETA {eta_formatted}',
      etaBuffer: 20,
      hideCursor: true,
    });
    bar.start(total, 0, { rate: 0 });
    return {
      update(done: number) {
        bar.update(done, { rate: Math.round(done / ((performance.now() - started) / 1000)) });
      },
      stop: () => bar.stop(),
      seconds: () => (performance.now() - started) / 1000,
    };
  }
  // Not a terminal (a log, CI): a plain line at most every 2 s, and at the end.
  let said = 0;
  return {
    update(done: number) {
      const now = performance.now();
      if (now - said < 2000 && done < total) return;
      said = now;
      const seconds = (now - started) / 1000;
      const rate = done / seconds;
      const eta = rate > 0 ? Math.ceil((total - done) / rate) : 0;
      progress.write(`import: ${done}/${total} rows, ${Math.round(rate)} rows/s, ETA ${eta} s\n`);
    },
    stop() {},
    seconds: () => (performance.now() - started) / 1000,
  };
}

function tallyItems(tally: Tally, items: ImportItem[], lines: number[]): void {
  for (const item of items) {
    if (!('error' in item)) {
      tally.created++;
      continue;
    }
    const { code, errors } = item.error;
    tally.byCode.set(code, (tally.byCode.get(code) ?? 0) + 1);
    if (tally.told.length < TOLD) {
      // The pointer's /users/N/ is the row in its batch; the operator knows lines.
      // The field is the row's own key, and the file anyone's: printed escaped (see terminal.ts).
      const field = escapeControls(errors[0]?.pointer.replace(/^\/users\/\d+\/?/, '') ?? '');
      const message = errors[0]?.message.replace(/\brow (\d+)$/, (_, row) => `line ${lines[Number(row)]}`);
      const what = escapeControls(message === undefined ? item.error.message : `${field} ${message}`.trim());
      tally.told.push(`  line ${lines[item.index]}: ${code}: ${what}`);
    }
  }
}

const lineOf = (told: string) => Number(/line (\d+)/.exec(told)?.[1] ?? 0);

export async function importFile(options: ImportFileOptions): Promise<ImportFileResult> {
  const { target, dryRun } = options;
  const total = await countLines(options.file);
  const report = reporter(options, total);
  const tally: Tally = { done: 0, created: 0, byCode: new Map(), told: [] };
  // Every batch of one run under one request id, so that its audit rows can be found together.
  const requestId = `cli-import-${randomUUID()}`;
  const scope = { site: target.site, actor: 'cli', requestId };

  let rows: unknown[] = [];
  let lines: number[] = [];
  // A dry run writes nothing, so a batch would not find the accounts an earlier batch would have
  // created: the emails they would have are kept (lower-cased, with their line), and a later line
  // with one is refused as the real import refuses it.
  const wouldCreate = new Map<string, number>();
  const emailOf = (row: unknown) =>
    typeof row === 'object' && row !== null && typeof (row as { email?: unknown }).email === 'string'
      ? (row as { email: string }).email.trim().toLowerCase()
      : undefined;
  const flush = async () => {
    if (dryRun && wouldCreate.size > 0) {
      const kept = rows.flatMap((row, i) => {
        const first = wouldCreate.get(emailOf(row) ?? '');
        if (first === undefined) return [i];
        refuseAt(lines[i]!, 'email_taken', `email is the email of line ${first}`);
        return [];
      });
      rows = kept.map((i) => rows[i]);
      lines = kept.map((i) => lines[i]!);
    }
    if (rows.length === 0) return;
    const result = await importRows(target, rows, {
      dryRun,
      firebase: options.firebase,
      // Through the unit of work, as every write: an audit row and an event per account created,
      // in the batch's transaction; a batch that created none leaves nothing.
      write: async (insert, _, factorsOf) =>
        (await inWrite(
          scope,
          { db: target.db },
          'import',
          (created) => ({
            userId: undefined,
            userIds: [...created.values()],
            status: 200,
            outcome: 'user created',
            factorsAdded: factorsOf(created),
          }),
          async (tx) => {
            const created = await insert(tx);
            return created.size > 0 ? created : undefined;
          },
        )) ?? new Map(),
    });
    tallyItems(tally, result.items, lines);
    if (dryRun) {
      for (const item of result.items) {
        const email = 'error' in item ? undefined : emailOf(rows[item.index]);
        if (email !== undefined) wouldCreate.set(email, lines[item.index]!);
      }
    }
    rows = [];
    lines = [];
  };

  let lineNumber = 0;
  // A line refused before it is a row: counted and told as it is read.
  function refuseAt(line: number, code: string, told: string) {
    tally.byCode.set(code, (tally.byCode.get(code) ?? 0) + 1);
    if (tally.told.length < TOLD) tally.told.push(`  line ${line}: ${code}: ${told}`);
  }
  const refuse = (code: string, told: string) => {
    refuseAt(lineNumber, code, told);
    tally.done++;
  };
  try {
    for await (const line of readLines(options.file, MAX_LINE_BYTES)) {
      lineNumber++;
      if ('tooLong' in line) {
        refuse('line_too_long', `${line.tooLong} bytes, over the limit of ${MAX_LINE_BYTES} bytes per line`);
        continue;
      }
      if (line.text.trim() === '') {
        tally.done++;
        continue;
      }
      let row: unknown;
      try {
        row = JSON.parse(line.text);
      } catch {
        refuse('invalid_json', 'not a JSON object');
        continue;
      }
      rows.push(row);
      lines.push(lineNumber);
      if (rows.length === BATCH) {
        tally.done += rows.length;
        await flush();
        report.update(tally.done);
      }
    }
    tally.done += rows.length;
    await flush();
    report.update(tally.done);
  } finally {
    report.stop();
  }

  const failed = [...tally.byCode.values()].reduce((a, b) => a + b, 0);
  const seconds = report.seconds();
  const rate = Math.round(tally.created / Math.max(seconds, 0.001));
  const verb = dryRun ? 'would be imported' : 'imported';
  const lines_ = [
    `${tally.created} of ${tally.created + failed} accounts ${verb} into site ${target.site} in ${seconds.toFixed(1)} s (${rate} accounts/s).`,
  ];
  if (failed > 0) {
    const codes = [...tally.byCode].sort((a, b) => b[1] - a[1]).map(([code, n]) => `${code} ${n}`);
    // In file order: a line that is no JSON is told as it is read, the others batch by batch.
    const told = [...tally.told].sort((a, b) => lineOf(a) - lineOf(b));
    lines_.push(`${failed} refused: ${codes.join(', ')}.`, ...told);
    if (failed > tally.told.length) lines_.push(`  (${failed - tally.told.length} more not shown)`);
  }
  return { code: failed > 0 ? 1 : 0, summary: `${lines_.join('\n')}\n` };
}
