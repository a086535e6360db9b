// A write of an HTTP request: the unit of work (accounts/unit-of-work.ts) with the request's
// scope, its token's site and id, its request id and its deadline. The audit middleware of the
// operation (accounts/audit.ts) records every other outcome (refusals, failures, replays) and
// refuses an answer to a write that did not come through here.
import type { Context } from 'hono';
import type { WriteOperation } from '../accounts/audit.ts';
import { inWrite, type WriteDeps, type WriteDone, type WriteScope } from '../accounts/unit-of-work.ts';
import type { Db } from '../db/client.ts';
import type { AppEnv } from './context.ts';

/** How a write request went, as the audit middleware needs to know. */
export interface WriteRecord {
  operation: WriteOperation;
  /** The account the write is about, once the handler named it. */
  userId: string | undefined;
  /** True once runWrite committed the write and its audit row. */
  committed: boolean;
}

/** The request as a write sees it: its token's site and id, its id, its deadline. */
export function writeScopeOf(c: Context<AppEnv>): WriteScope {
  const token = c.get('token');
  return { site: token.site, actor: token.id, requestId: c.get('requestId'), deadline: c.get('deadline') };
}

/** What the server's writes use, from its deps. */
export function writeDepsOf(c: Context<AppEnv>): WriteDeps {
  const { database, outbox, tracer, sequencer } = c.get('deps');
  return { db: database.db, outbox, tracing: tracer !== undefined, sequencer };
}

/** The request's write, in one unit of work (see inWrite); tells the audit middleware how it went. */
export async function runWrite<T>(
  c: Context<AppEnv>,
  done: WriteDone | ((written: T) => WriteDone),
  work: (tx: Db) => Promise<T | undefined>,
): Promise<T | undefined> {
  const record = c.get('write');
  if (typeof done !== 'function') record.userId = done.userId;
  const written = await inWrite(writeScopeOf(c), writeDepsOf(c), record.operation, done, work);
  record.committed = written !== undefined;
  return written;
}
