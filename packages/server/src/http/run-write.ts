// A write of an HTTP request: the unit of work (kernel/unit-of-work.ts) with the request's
// scope, its token's site and id, its request id and its deadline. The audit step of the
// operation (middleware/audit.ts, a step of pipeline.ts) records every other outcome (refusals, failures, replays) and
// refuses an answer to a write that did not come through here.
import type { Db } from '../db/client.ts';
import type { HookDeps } from '../kernel/account-hooks.ts';
import type { WriteOperation } from '../kernel/audit.ts';
import { inWrite, type KeptAnswer, type WriteDeps, type WriteDone, type WriteScope } from '../kernel/unit-of-work.ts';
import type { Answer, OpContext } from './context.ts';

/** How a write request went, as the audit step needs to know. */
export interface WriteRecord {
  operation: WriteOperation;
  /** The account the write is about, once the handler named it. */
  userId: string | undefined;
  /** True once runWrite committed the write and its audit row. */
  committed: boolean;
  /** True when the answer for the request's Idempotency-Key was kept in the write's transaction. */
  answerKept?: boolean;
  /** The sign-in provider the request came through (provider/callback), named on its audit rows. */
  provider?: string | undefined;
}

/**
 * The request as a write sees it: its token's site and id, its id, its deadline, the key it
 * claimed, and the audit step's record, which the write keeps told.
 */
export function writeScopeOf(c: OpContext): WriteScope {
  const token = c.get('token');
  const idempotency = c.get('idempotency');
  const record = c.get('write') as WriteRecord | undefined;
  return {
    site: token.site,
    actor: token.id,
    requestId: c.get('requestId'),
    deadline: c.get('deadline'),
    idempotency:
      idempotency?.claimed === undefined ? undefined : { key: idempotency.key, maxBody: idempotency.claimed.maxBody },
    report: record === undefined ? undefined : (news) => Object.assign(record, news),
    provider: record?.provider,
  };
}

/** What the server's writes use, from its deps (the account hooks for those of accounts/). */
export function writeDepsOf(c: OpContext): WriteDeps & HookDeps {
  const { database, outbox, tracer, sequencer, transactions, factorKeys, accountHooks, signInGate } = c.get('deps');
  return {
    db: database.db,
    outbox,
    tracing: tracer !== undefined,
    sequencer,
    share: transactions,
    factorKeys,
    accountHooks,
    signInGate,
  };
}

/** The request's write, in one unit of work (see inWrite), which keeps the audit step told. */
export function runWrite<T>(
  c: OpContext,
  done: WriteDone | ((written: T) => WriteDone),
  work: (tx: Db) => Promise<T | undefined>,
): Promise<T | undefined> {
  return inWrite(writeScopeOf(c), writeDepsOf(c), c.get('write').operation, done, work);
}

/** A JSON answer, as kept for an Idempotency-Key and as sent (see answerWith): one body for both. */
export function jsonAnswer(json: unknown, headers: Record<string, string> = {}): KeptAnswer {
  return { body: JSON.stringify(json), headers: { 'content-type': 'application/json', ...headers } };
}

/** Sends the answer a write kept: what a retry with the key replays is what this caller got. */
export function answerWith(c: OpContext, status: number, answer: KeptAnswer): Answer {
  return c.body(answer.body, status, answer.headers);
}
