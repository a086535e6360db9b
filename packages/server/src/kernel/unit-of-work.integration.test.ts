// The unit of work's retries: a write the database rolled back for a collision with concurrent
// writes (deadlock 40P01, serialization failure 40001) runs again, a bounded number of times and
// only within the caller's deadline. On the embedded database by an injected collision (it runs
// one transaction at a time and never deadlocks); on PostgreSQL by a real deadlock, two writes
// locking two accounts in opposite order, each held at a known point until the other has its first.
import { randomUUID } from 'node:crypto';
import { eq, sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, type Db, openPostgres, rows } from '../db/client.ts';
import { auditLog } from '../db/schema.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { inWrite, isWriteCollision, WRITE_ATTEMPTS, type WriteScope } from './unit-of-work.ts';

/** An error as drizzle throws a driver's: the SQLSTATE at `cause.code`. */
const collision = (code: string) =>
  Object.assign(new Error('Failed query: select …'), {
    cause: Object.assign(new Error('deadlock detected'), { code }),
  });

async function accountsOn(db: Db, site: string, n: number): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const [row] = await rows<{ id: string }>(
      db,
      sql`insert into users (site, email, name, origin) values (${site}, ${`${site}-${i}@example.com`}, 'Ada', 'api') returning id::text as id`,
    );
    ids.push(row!.id);
  }
  return ids;
}

describe('inWrite on the embedded database: an injected collision', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openMigratedPglite();
  }, 60_000);
  afterAll(() => database?.close());

  const scope = (requestId: string, signal?: AbortSignal): WriteScope => ({
    site: 'uow',
    actor: 'job',
    requestId,
    ...(signal === undefined ? {} : { deadline: { commit() {}, signal } }),
  });

  it.each(['40P01', '40001'])('runs a write rolled back for %s again: done once, audited once', async (code) => {
    const [id] = await accountsOn(database.db, `uow-${randomUUID().slice(0, 8)}`, 1);
    const requestId = `uow-${code}-${randomUUID()}`;
    let runs = 0;
    const written = await inWrite(
      scope(requestId),
      { db: database.db, outbox: false },
      'disable',
      { userId: id, status: 200, outcome: 'user disabled' },
      async (tx) => {
        runs++;
        await tx.execute(sql`select 1`);
        if (runs === 1) throw collision(code);
        return id;
      },
    );
    expect(written).toBe(id);
    expect(runs).toBe(2);
    const audit = await database.db.select().from(auditLog).where(eq(auditLog.requestId, requestId));
    expect(audit).toHaveLength(1);
  });

  it(`gives up after ${WRITE_ATTEMPTS} runs, throwing the collision, with nothing written`, async () => {
    const requestId = `uow-spent-${randomUUID()}`;
    let runs = 0;
    const attempt = inWrite(
      scope(requestId),
      { db: database.db, outbox: false },
      'disable',
      { userId: undefined, status: 200, outcome: 'user disabled' },
      async () => {
        runs++;
        throw collision('40P01');
      },
    );
    await expect(attempt).rejects.toMatchObject({ cause: { code: '40P01' } });
    expect(runs).toBe(WRITE_ATTEMPTS);
    expect(await database.db.select().from(auditLog).where(eq(auditLog.requestId, requestId))).toEqual([]);
  });

  it('does not run again once the deadline has passed (or the caller is gone)', async () => {
    let runs = 0;
    const attempt = inWrite(
      scope(`uow-late-${randomUUID()}`, AbortSignal.abort()),
      { db: database.db, outbox: false },
      'disable',
      { userId: undefined, status: 200, outcome: 'user disabled' },
      async () => {
        runs++;
        throw collision('40001');
      },
    );
    await expect(attempt).rejects.toMatchObject({ cause: { code: '40001' } });
    expect(runs).toBe(1);
  });

  it('never runs again for another error (a unique violation is the caller’s to answer)', async () => {
    let runs = 0;
    const attempt = inWrite(
      scope(`uow-other-${randomUUID()}`),
      { db: database.db, outbox: false },
      'disable',
      { userId: undefined, status: 200, outcome: 'user disabled' },
      async () => {
        runs++;
        throw collision('23505');
      },
    );
    await expect(attempt).rejects.toMatchObject({ cause: { code: '23505' } });
    expect(runs).toBe(1);
  });
});

const PG_URL = process.env.TEST_DATABASE_URL;
if (!PG_URL)
  console.warn('\n[unit-of-work.test] a real deadlock on PostgreSQL: SKIPPED, TEST_DATABASE_URL is not set\n');
describe.skipIf(!PG_URL)('inWrite on PostgreSQL: a real deadlock', () => {
  it('two writes locking two accounts in opposite order both commit: the one PostgreSQL rolls back runs again', async () => {
    const pg = await openPostgres(PG_URL!, { max: 4 });
    try {
      await pg.migrate();
      const site = `uow-pg-${randomUUID().slice(0, 8)}`;
      const [a, b] = (await accountsOn(pg.db, site, 2)) as [string, string];
      // Each write, on its first run, takes its first account's lock, says so, and waits until the
      // other has its own first: then each asks for the other's, and PostgreSQL finds the cycle.
      const first = [Promise.withResolvers<void>(), Promise.withResolvers<void>()] as const;
      const runs = [0, 0];
      const write = (me: 0 | 1, mine: string, theirs: string) =>
        inWrite(
          { site, actor: 'job', requestId: `uow-pg-${me}-${randomUUID()}` },
          { db: pg.db, outbox: false },
          'disable',
          { userId: mine, status: 200, outcome: 'user disabled' },
          async (tx) => {
            runs[me]!++;
            await tx.execute(sql`select id from users where id = ${mine} for update`);
            if (runs[me] === 1) {
              first[me].resolve();
              await first[1 - me]!.promise;
            }
            await tx.execute(sql`select id from users where id = ${theirs} for update`);
            await tx.execute(sql`update users set name = ${`by ${me}`} where id in (${mine}, ${theirs})`);
            return me;
          },
        );
      const settled = await Promise.allSettled([write(0, a, b), write(1, b, a)]);
      expect(settled.map((s) => s.status)).toEqual(['fulfilled', 'fulfilled']);
      // One of them was the deadlock's victim and ran twice (which one is PostgreSQL's choice).
      expect(runs.toSorted()).toEqual([1, 2]);
    } finally {
      await pg.close();
    }
  }, 30_000);

  it('a write that waits on a lock past lock_timeout gives up once (55P03, a collision: 409), not run again', async () => {
    // Issue 57, G1: a queue on one row held a connection per write in it, every site's pool with them.
    const pg = await openPostgres(PG_URL!, { max: 4, lockTimeoutMs: 200 });
    try {
      await pg.migrate();
      const site = `uow-pg-${randomUUID().slice(0, 8)}`;
      const [a] = (await accountsOn(pg.db, site, 1)) as [string];
      const holding = Promise.withResolvers<void>();
      const release = Promise.withResolvers<void>();
      // Holds the account's row until told: the write below queues on it.
      const holder = pg.db.transaction(async (tx) => {
        await tx.execute(sql`select id from users where id = ${a} for update`);
        holding.resolve();
        await release.promise;
      });
      await holding.promise;
      let runs = 0;
      const started = performance.now();
      const waiting = inWrite(
        { site, actor: 'job', requestId: `uow-lock-${randomUUID()}` },
        { db: pg.db, outbox: false },
        'disable',
        { userId: a, status: 200, outcome: 'user disabled' },
        async (tx) => {
          runs++;
          await tx.execute(sql`update users set name = 'waited' where id = ${a}`);
          return true;
        },
      );
      const error = await waiting.catch((e: unknown) => e);
      release.resolve();
      await holder;
      expect(error).toMatchObject({ status: 409, code: 'conflict', cause: { cause: { code: '55P03' } } });
      expect(isWriteCollision(error)).toBe(false); // answered as it is: not run again
      expect(runs).toBe(1);
      expect(performance.now() - started).toBeLessThan(2_000);
    } finally {
      await pg.close();
    }
  }, 30_000);
});
