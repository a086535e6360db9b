// The audit trail (kernel/audit.ts) of every outcome of a write request but its success, and
// but the refusals an operation names as unaudited (a miss anyone can provoke at will).
import { describeError } from '../../errors.ts';
import { auditInsert } from '../../kernel/audit.ts';
import type { Answer, OpContext } from '../context.ts';
import { answerCode } from '../errors.ts';
import type { WriteRecord } from '../run-write.ts';

/**
 * The audit step of a write operation, once its answer is made. A success is recorded by runWrite,
 * in the write's own transaction; this records every other outcome (refusals, failures,
 * idempotent replays), best effort: when the database is down the row is lost, and logged. A
 * success that did not come through runWrite is a bug of ours, refused here (thrown) so that
 * tests find it. A refusal whose code is in `unaudited` writes no row (see Operation.unaudited).
 */
export async function auditOutcome(
  c: OpContext,
  record: WriteRecord,
  answer: Answer,
  unaudited: readonly string[] = [],
): Promise<void> {
  if (record.committed) return;
  const { operation } = record;
  const replayed = answer.headers.get('Idempotent-Replayed') === 'true';
  if (answer.status < 400 && !replayed) {
    throw new Error(`${operation} answered ${answer.status} without runWrite: no audit row, no deadline check`);
  }
  const outcome = replayed ? 'replayed' : (answerCode(c, answer) ?? String(answer.status));
  // A miss anyone can provoke with made-up input (see Operation.unaudited): no row, no write.
  if (!replayed && unaudited.includes(outcome)) return;
  const write = async () => {
    try {
      const token = c.get('token');
      const source = { site: token.site, tokenId: token.id, requestId: c.get('requestId'), provider: record.provider };
      await auditInsert(c.get('deps').database.db, source, [
        {
          operation,
          // A replayed create names its account only in the answer it replays.
          userId: record.userId ?? bodyUserId(c.get('body')) ?? (replayed ? answeredUserId(answer) : undefined),
          status: answer.status,
          outcome,
        },
      ]);
    } catch (failure) {
      c.get('log').warn({ err: describeError(failure) }, 'audit row not written');
    }
  };
  if (answer.status !== 503) return write();
  // A 503 means the database may be down or not keeping up: the row would wait on what just
  // failed the write (a reconnect's backoff, a connect timeout of 5 s), past the deadline when
  // the write had reached its commit point (which no deadline answers for). So the answer waits
  // for it a moment (long enough when the database answers, keeping the trail in order), then
  // goes out, and the row follows when the database lets it, or is logged as lost. At most
  // LATE_AUDIT_ROWS_PER_SITE of a site's wait in the background (LATE_AUDIT_ROWS in all): past
  // that, an outage's rows are not queued, and one site's never take another's place.
  const { site } = c.get('token');
  const waiting = lateAuditRows.get(site) ?? 0;
  if (waiting >= LATE_AUDIT_ROWS_PER_SITE || lateAuditRowsInAll >= LATE_AUDIT_ROWS) {
    c.get('log').warn({ reason: 'too many audit rows already waiting' }, 'audit row not written');
    return;
  }
  lateAuditRows.set(site, waiting + 1);
  lateAuditRowsInAll++;
  const writing = write().finally(() => {
    lateAuditRowsInAll--;
    const left = lateAuditRows.get(site)! - 1;
    if (left === 0) lateAuditRows.delete(site);
    else lateAuditRows.set(site, left);
  });
  let timer: NodeJS.Timeout | undefined;
  await Promise.race([writing, new Promise((resolve) => (timer = setTimeout(resolve, AUDIT_503_WAIT_MS)))]);
  clearTimeout(timer);
}

/** How long a 503's answer waits for its audit row before the row is left to follow. */
const AUDIT_503_WAIT_MS = 250;
/** Audit rows of 503s written after their answer, at most, in this process, and of one site. */
const LATE_AUDIT_ROWS = 100;
export const LATE_AUDIT_ROWS_PER_SITE = 25;
/** Per site, the rows of 503s still being written after their answer. */
const lateAuditRows = new Map<string, number>();
let lateAuditRowsInAll = 0;

/** The `_userId` of a success's answer (`{"result": {"_userId": …}}`), when it has one. */
function answeredUserId(answer: Answer): string | undefined {
  try {
    const id = (JSON.parse(answer.text() ?? '') as { result?: { _userId?: unknown } }).result?._userId;
    return typeof id === 'string' ? id : undefined;
  } catch {
    return undefined;
  }
}

/** The `_userId` the caller named, when the body got far enough to name one. */
function bodyUserId(body: unknown): string | undefined {
  if (body === null || typeof body !== 'object') return undefined;
  const id = (body as Record<string, unknown>)._userId;
  return typeof id === 'string' ? id : undefined;
}
