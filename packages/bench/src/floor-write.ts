// The write floor (issue 63, point 1): a bare node:http server doing, per request, the transaction
// ours does for `update` (POST /api/1/user/update {_userId, name}) and for `delete` (DELETE
// /api/1/user/delete {_userId}): ours' statements (write-statements.ts: the texts ours sends,
// as the wire counter reads them from ours, checked by the bench before anything is timed), run
// as ours runs them (the same pool settings, prepared where ours prepares), in the same order and
// in one transaction, and ours' answer. Nothing else: no token, budgets, validation, idempotency,
// deadline, access log, sequencer or webhook worker. What ours spends beyond this is the price of those.
import { randomUUID } from 'node:crypto';
import postgres from 'postgres';
import { jsonBody, send, serveFloor } from './floor-serve.ts';
import { DELETE_STATEMENTS, type Statement, UPDATE_STATEMENTS } from './write-statements.ts';

const sql = postgres(process.env.DATABASE_URL!, {
  max: 10,
  max_pipeline: 1,
  onnotice: () => {},
  connection: { application_name: 'write-floor', statement_timeout: 10_000, lock_timeout: 1_000 },
} as Parameters<typeof postgres>[1]);

/** The site and the token id of the bench's API token (ours reads them from the token). */
const SITE = 'default';
const TOKEN_ID = 'env:bench';
const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;

type Tx = postgres.TransactionSql | postgres.Sql;
const run = (on: Tx, s: Statement, params: unknown[]) =>
  on.unsafe(s.text, params as never[], { prepare: s.prepared }) as unknown as Promise<any[]>;

/** The statements' parameters, by name, for one request. */
interface Bound {
  userId: string;
  name?: string;
  requestId: string;
}

function paramsOf(s: Statement, b: Bound): unknown[] {
  return s.params.map((p) => {
    switch (p) {
      case 'userId':
        return b.userId;
      case 'name':
        return b.name;
      case 'site':
        return SITE;
      case 'tokenId':
        return TOKEN_ID;
      case 'requestId':
        return b.requestId;
      default:
        return p.value;
    }
  });
}

/**
 * One write, as ours runs it: the statements before the transaction, then the rest in it; a
 * statement marked `found` answers no row: nothing to write (ours: 404), rolled back.
 */
async function write(statements: readonly Statement[], b: Bound): Promise<any[] | undefined> {
  const outside = statements.filter((s) => s.outside);
  const inside = statements.filter((s) => !s.outside);
  for (const s of outside) await run(sql, s, paramsOf(s, b));
  const NONE = Symbol('none');
  try {
    return await sql.begin(async (tx) => {
      let first: any[] | undefined;
      for (const s of inside) {
        const rows = await run(tx, s, paramsOf(s, b));
        first ??= s.found ? rows : undefined;
        if (s.found && rows.length === 0) throw NONE;
      }
      return first ?? [];
    });
  } catch (error) {
    if (error === NONE) return undefined;
    throw error;
  }
}

serveFloor(async (req, res, path) => {
  if (path === '/api/1/user/update' && req.method === 'POST') {
    const body = await jsonBody(req);
    if (typeof body?._userId !== 'string' || typeof body.name !== 'string')
      return send(res, 400, { code: 'invalid_request' });
    if (!UUID.test(body._userId)) return send(res, 404, { code: 'user_not_found' });
    const rows = await write(UPDATE_STATEMENTS, { userId: body._userId, name: body.name, requestId: randomUUID() });
    if (rows === undefined) return send(res, 404, { code: 'user_not_found' });
    return send(res, 200, { result: { status: 'user updated' } }, `"${rows[0].version}"`);
  }
  if (path === '/api/1/user/delete' && req.method === 'DELETE') {
    const body = await jsonBody(req);
    if (typeof body?._userId !== 'string') return send(res, 400, { code: 'invalid_request' });
    if (!UUID.test(body._userId)) return send(res, 404, { code: 'user_not_found' });
    const rows = await write(DELETE_STATEMENTS, { userId: body._userId, requestId: randomUUID() });
    if (rows === undefined) return send(res, 404, { code: 'user_not_found' });
    return send(res, 200, { result: { status: 'user removed' } });
  }
  return false;
});
