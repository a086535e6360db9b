// A CLIENT span per database query, installed on the driver's client once at start when tracing
// is on (db/client.ts): every query of drizzle, and executePrepared's, goes through postgres.js's
// `unsafe` (in a transaction too), on PostgreSQL and on the embedded database alike.
// A span says the statement's operation and table (db.query.summary), never its text's values or
// its parameters. Queries outside a traced request (the sequencer's polls, the webhook worker's
// claims, migrations) make no span: they would be thousands of root traces an hour.
import { context, SpanKind, SpanStatusCode, type Tracer, trace } from '@opentelemetry/api';
import type { Sql } from 'postgres';
import { onEveryClient } from './every-client.ts';

interface Summary {
  operation: string | undefined;
  table: string | undefined;
  name: string;
}

const OPERATIONS = new Set(['select', 'insert', 'update', 'delete', 'begin', 'commit', 'rollback', 'set', 'lock']);
const summaries = new Map<string, Summary>();

/**
 * The statement's operation and table, from its text: the first operation at the outermost level
 * (after a `with … as (…)` prefix, the statement's own), and the table after its `from`, `into`
 * or `update`. Only keywords and identifiers are read; values are parameters ($1…), never read.
 */
export function summarize(text: string): Summary {
  let summary = summaries.get(text);
  if (summary !== undefined) return summary;
  let depth = 0;
  const words: string[] = [];
  for (const m of text.matchAll(/"[^"]*"|'(?:[^']|'')*'|[()]|[A-Za-z_][A-Za-z0-9_.]*/g)) {
    const token = m[0];
    if (token === '(') depth++;
    else if (token === ')') depth--;
    else if (depth === 0 && token[0] !== "'") words.push(token.startsWith('"') ? token : token.toLowerCase());
  }
  const at = words.findIndex((w) => OPERATIONS.has(w));
  const operation = at < 0 ? undefined : words[at]!;
  let table: string | undefined;
  if (operation === 'update') table = words[at + 1];
  else if (operation !== undefined) {
    const after = words.slice(at + 1);
    const i = after.findIndex((w) => w === (operation === 'insert' ? 'into' : 'from'));
    if (i >= 0) table = after[i + 1];
  }
  if (table !== undefined) table = table.replaceAll('"', '');
  if (table !== undefined && !/^[A-Za-z_][A-Za-z0-9_.]*$/.test(table)) table = undefined;
  const op = operation?.toUpperCase();
  summary = { operation: op, table, name: [op ?? 'query', table].filter(Boolean).join(' ') };
  // Statements are of fixed texts, a few hundred at most; a cap keeps an odd one from growing it.
  if (summaries.size < 2000) summaries.set(text, summary);
  return summary;
}

function startQuerySpan(tracer: Tracer, text: unknown) {
  const parent = context.active();
  if (trace.getSpan(parent) === undefined) return undefined;
  const { operation, table, name } = summarize(typeof text === 'string' ? text : '');
  const attributes: Record<string, string> = { 'db.system.name': 'postgresql', 'db.query.summary': name };
  if (operation !== undefined) attributes['db.operation.name'] = operation;
  if (table !== undefined) attributes['db.collection.name'] = table;
  return tracer.startSpan(name, { kind: SpanKind.CLIENT, attributes }, parent);
}

function settle(span: {
  end(): void;
  setStatus(s: { code: SpanStatusCode }): void;
  setAttribute(k: string, v: string): void;
}) {
  return [
    () => span.end(),
    (error: unknown) => {
      // The SQLSTATE, not the message: a message may quote a value (a duplicate key's).
      const code = (error as { code?: unknown; cause?: { code?: unknown } })?.code;
      span.setAttribute('error.type', typeof code === 'string' ? code : 'error');
      if (typeof code === 'string') span.setAttribute('db.response.status_code', code);
      span.setStatus({ code: SpanStatusCode.ERROR });
      span.end();
    },
  ] as const;
}

type Unsafe = (text: string, ...rest: unknown[]) => PromiseLike<unknown>;

/**
 * postgres.js: `unsafe` answers a lazy query, run at its first `then` (drizzle awaits it): the span
 * starts there, so that a query used as a fragment of another makes none.
 */
function traceUnsafe(tracer: Tracer, owner: { unsafe: Unsafe }): void {
  const unsafe = owner.unsafe;
  owner.unsafe = function tracedUnsafe(this: unknown, text: string, ...rest: unknown[]) {
    const parent = context.active();
    const query = unsafe.call(this, text, ...rest) as PromiseLike<unknown> & { then: PromiseLike<unknown>['then'] };
    const then = query.then;
    let started = false;
    // biome-ignore lint/suspicious/noThenProperty: postgres.js's query is a thenable, run at its first then: so is the span.
    query.then = function tracedThen(this: unknown, ...args: Parameters<typeof then>) {
      if (!started) {
        started = true;
        const span = context.with(parent, () => startQuerySpan(tracer, text));
        if (span !== undefined) then.call(query, ...settle(span));
      }
      return then.apply(query, args);
    } as typeof then;
    return query;
  };
}

/** Wraps a postgres.js client (and each transaction's) so that its queries make spans. */
export function tracePostgres(client: Sql, tracer: Tracer): void {
  onEveryClient(client, (c) => traceUnsafe(tracer, c as unknown as { unsafe: Unsafe }));
}
