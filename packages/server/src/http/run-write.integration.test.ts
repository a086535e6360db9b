// runWrite and the audit step of a write operation (pipeline.ts), on a real embedded database: a success
// and its audit row commit together, a refusal is audited by the step, a write past its
// deadline leaves nothing, and a write answered without runWrite is refused as the bug it is.
import { and, eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TokenInfo } from '../auth/tokens.ts';
import type { Database } from '../db/client.ts';
import { auditLog, users } from '../db/schema.ts';
import { ApiError, serviceUnavailable } from '../errors.ts';
import { uuidv7 } from '../kernel/ids.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import type { Answer, OpContext } from './context.ts';
import { LATE_AUDIT_ROWS_PER_SITE } from './middleware/audit.ts';
import { runWrite } from './run-write.ts';
import { testPipeline } from './testing.ts';

let database: Database;
const token: TokenInfo = { id: 'env:writes-test', site: 'default', scopes: ['read', 'write'] };

beforeAll(async () => {
  database = await openMigratedPglite();
});
afterAll(() => database?.close());

const auditRows = (requestId: string) => database.db.select().from(auditLog).where(eq(auditLog.requestId, requestId));
const account = (id: string) => database.db.select().from(users).where(eq(users.id, id));

type Handle = (c: OpContext) => Answer | Promise<Answer>;

/** A write operation's pipeline (pipeline.ts: its deadline, its audit step), around the given handler. */
function writeApp(handle: Handle, ms = 5_000, as: TokenInfo = token) {
  const app = testPipeline([{ method: 'POST', path: '/write', writes: 'create', handle }], {
    deps: { database, requestTimeoutMs: ms },
    vars: { token: as },
  });
  return (requestId: string) => app.request('/write', { method: 'POST', headers: { 'X-Request-Id': requestId } });
}

const insertAccount = (id: string) => (tx: Database['db']) =>
  tx
    .insert(users)
    .values({ id, site: 'default', email: `${id}@example.com`, name: 'W', passwordHash: 'x', origin: 'api' })
    .returning({ id: users.id })
    .then((rows) => rows[0]);

describe('runWrite', () => {
  it('commits the write and its one audit row together', async () => {
    const id = uuidv7();
    const send = writeApp(async (c) => {
      await runWrite(c, { userId: id, status: 201, outcome: 'user created' }, insertAccount(id));
      return c.json({ ok: true }, 201);
    });
    expect((await send('w-ok')).status).toBe(201);
    expect(await account(id)).toHaveLength(1);
    expect(await auditRows('w-ok')).toEqual([
      expect.objectContaining({
        operation: 'create',
        userId: id,
        status: 201,
        outcome: 'user created',
        tokenId: token.id,
      }),
    ]);
  });

  it('leaves the refusal of a write that wrote nothing to the audit step, with its code', async () => {
    const id = uuidv7();
    const send = writeApp(async (c) => {
      const written = await runWrite(c, { userId: id, status: 200, outcome: 'user updated' }, async () => undefined);
      if (written === undefined) throw new ApiError('user_not_found', 'No account.');
      return c.json({}, 200);
    });
    expect((await send('w-none')).status).toBe(404);
    expect(await auditRows('w-none')).toEqual([
      expect.objectContaining({ userId: id, status: 404, outcome: 'user_not_found' }),
    ]);
  });

  it('rolls the write back when the deadline passed before its commit point: 503, nothing stored', async () => {
    const id = uuidv7();
    const send = writeApp(async (c) => {
      await runWrite(c, { userId: id, status: 201, outcome: 'user created' }, async (tx) => {
        const row = await insertAccount(id)(tx);
        await new Promise((resolve) => setTimeout(resolve, 150)); // the database is slow today
        return row;
      });
      return c.json({}, 201);
    }, 50);
    expect((await send('w-late')).status).toBe(503);
    await new Promise((resolve) => setTimeout(resolve, 300)); // the work finishes in the background
    expect(await account(id)).toHaveLength(0);
    const rows = await database.db
      .select()
      .from(auditLog)
      .where(and(eq(auditLog.requestId, 'w-late'), eq(auditLog.status, 201)));
    expect(rows).toHaveLength(0);
  });

  it('answers a 503 without waiting long for its audit row: the database that failed the write holds the row back (the row follows)', async () => {
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const send = writeApp(async (c) => {
      // The write reached its commit point, so no deadline answers for it; then the database
      // went away (here: is held by another transaction, as a stopped one holds a connection
      // attempt for up to its connect timeout).
      c.get('deadline').commit();
      void database.db.transaction(async (tx) => {
        await tx.execute(sql`select 1`);
        await held;
      });
      setTimeout(release, 1_000);
      throw serviceUnavailable('The database is unavailable; try again shortly.');
    });
    const started = Date.now();
    const answer = await send('w-down');
    const ms = Date.now() - started;
    expect(answer.status).toBe(503);
    expect(ms).toBeLessThan(800); // AUDIT_503_WAIT_MS, then the answer; it waited out the hold (1 s) before
    // The row is still written, once the database lets it.
    await expect
      .poll(() => auditRows('w-down'), { timeout: 5_000 })
      .toEqual([expect.objectContaining({ status: 503, outcome: 'service_unavailable' })]);
  });

  it('keeps at most LATE_AUDIT_ROWS_PER_SITE of a site’s 503 rows waiting: one more is logged as lost, and another site’s row still follows', async () => {
    const down = (c: OpContext): Answer => {
      c.get('deadline').commit();
      throw serviceUnavailable('The database is unavailable; try again shortly.');
    };
    const evil = writeApp(down, 5_000, { ...token, id: 'env:evil', site: 'evil' });
    const shop = writeApp(down, 5_000, { ...token, id: 'env:shop', site: 'shop' });
    // The database holds every row back (a transaction on the embedded database's one connection).
    let release = () => {};
    const held = new Promise<void>((resolve) => {
      release = resolve;
    });
    const holding = database.db.transaction(async (tx) => {
      await tx.execute(sql`select 1`);
      await held;
    });
    const evilIds = Array.from({ length: LATE_AUDIT_ROWS_PER_SITE + 5 }, (_, i) => `w-evil-${i}`);
    const answers = await Promise.all([...evilIds.map((id) => evil(id)), shop('w-shop')]);
    expect(answers.map((a) => a.status)).toEqual(Array(evilIds.length + 1).fill(503));
    release();
    await holding;
    // shop's row follows; of evil's, those that waited, and no more.
    await expect.poll(() => auditRows('w-shop'), { timeout: 5_000 }).toHaveLength(1);
    const evilRows = () =>
      database.db
        .select()
        .from(auditLog)
        .where(and(eq(auditLog.site, 'evil'), sql`${auditLog.requestId} like 'w-evil-%'`));
    await expect.poll(async () => (await evilRows()).length, { timeout: 5_000 }).toBe(LATE_AUDIT_ROWS_PER_SITE);
  });

  it('refuses a write operation that answers success without runWrite (no audit row, no deadline): a 500, the bug found', async () => {
    const send = writeApp((c) => c.json({ ok: true }, 201));
    const answer = await send('w-bypass');
    expect(answer.status).toBe(500);
    expect(await answer.json()).toMatchObject({ code: 'internal_error' });
    expect(await auditRows('w-bypass')).toEqual([]);
  });
});
