// The chores over a real embedded database.
import { randomBytes, randomUUID } from 'node:crypto';
import { type SQL, sql } from 'drizzle-orm';
import { PgDialect } from 'drizzle-orm/pg-core';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { deleteAccount, purgeDeleted, restoreAccount, siteDeletionGrace } from '../accounts/delete.ts';
import { setDisabled } from '../accounts/disable.ts';
import { endDueSuspensions } from '../accounts/suspensions.ts';
import { issueTicket } from '../accounts/tickets.ts';
import { accountHooks } from '../assemble.ts';
import type { TokenVerifier } from '../auth/tokens.ts';
import { type Database, type Db, openPostgres, rows } from '../db/client.ts';
import { PRUNE_BATCH } from '../events/queue.ts';
import { addEndpoint } from '../events/webhooks/endpoints.ts';
import { secondFactorLockoutKey } from '../factors/factors.ts';
import { deploymentKeysFrom } from '../kernel/deployment-keys.ts';
import { lockoutKey } from '../limits/lockout.ts';
import { migratedPostgresDatabase, openMigratedPglite } from '../testing/templates.ts';
import { runCommand } from './commands.ts';
import { purgeAudit, purgeEvents, purgeExpired, startHousekeeping } from './housekeeping.ts';

/**
 * Its PostgreSQL tests each take a database of their own, dropped when the file ends: on the
 * shared one, another file's event numbering (files run side by side) moved a user.purged event
 * out of event_queue between two reads of this file's.
 */
const PG_URL = process.env.TEST_DATABASE_URL;
const drops: (() => Promise<void>)[] = [];
async function ownPostgres(): Promise<string> {
  const { url, drop } = await migratedPostgresDatabase();
  drops.push(drop);
  return url;
}
afterAll(async () => {
  for (const drop of drops.splice(0)) await drop();
});

let database: Database;
beforeAll(async () => {
  database = await openMigratedPglite();
});
afterAll(() => database.close());

const dialect = new PgDialect();

/** `on`, noting what each statement that deletes from `table` answered. */
function watchingDeletes(on: Db, table = 'webhook_deliveries') {
  const answers: unknown[] = [];
  const db = new Proxy(on, {
    get(target, key, receiver) {
      if (key !== 'execute') return Reflect.get(target, key, receiver);
      return async (query: SQL) => {
        const result = await target.execute(query);
        if (dialect.sqlToQuery(query).sql.includes(`delete from ${table}`)) {
          const [row] = (Array.isArray(result) ? result : (result as { rows: unknown[] }).rows) as { n?: unknown }[];
          answers.push(row?.n);
        }
        return result;
      };
    },
  }) as Db;
  return { db, answers };
}

describe('purging events', () => {
  it('removes deliveries done before the retention in bounded statements, and keeps pending and recent ones', async () => {
    const { id } = await addEndpoint(database.db, { site: 'hk', url: 'https://example.com/hooks', types: ['*'] });
    const old = PRUNE_BATCH * 2 + 5;
    await database.db.execute(sql`insert into webhook_deliveries (endpoint_id, site, seq, subject, type, state, created_at)
      select ${id}::uuid, 'hk', n, gen_random_uuid(), 'user.created', case when n % 2 = 0 then 'delivered' else 'failed' end,
        now() - interval '8 days'
      from generate_series(1, ${old}) n`);
    await database.db.execute(sql`insert into webhook_deliveries (endpoint_id, site, seq, subject, type, state, created_at)
      values (${id}::uuid, 'hk', ${old + 1}, gen_random_uuid(), 'user.created', 'pending', now() - interval '8 days'),
        (${id}::uuid, 'hk', ${old + 2}, gen_random_uuid(), 'user.created', 'delivered', now())`);

    const watched = watchingDeletes(database.db);
    await purgeEvents(watched.db, 7 * 86_400_000);
    expect(watched.answers).toEqual([PRUNE_BATCH, PRUNE_BATCH, 5]);
    const left = await rows<{ seq: string; state: string }>(
      database.db,
      sql`select seq::text as seq, state from webhook_deliveries where endpoint_id = ${id} order by seq`,
    );
    expect(left).toEqual([
      { seq: String(old + 1), state: 'pending' },
      { seq: String(old + 2), state: 'delivered' },
    ]);
  }, 60_000);
});

describe('purging the audit trail', () => {
  it('removes rows older than the retention in bounded statements, and keeps the recent ones', async () => {
    const row = (age: string) =>
      sql`(now() - ${age}::interval, 'hk-audit', 'tok', 'create', null, 'req', 201, 'user created')`;
    const old = PRUNE_BATCH * 2 + 5;
    await database.db.execute(sql`insert into audit_log (at, site, token_id, operation, user_id, request_id, status, outcome)
      select now() - interval '400 days' + n * interval '1 second', 'hk-audit', 'tok', 'create', null, 'req-' || n, 201, 'user created'
      from generate_series(1, ${old}) n`);
    await database.db.execute(sql`insert into audit_log (at, site, token_id, operation, user_id, request_id, status, outcome)
      values ${row('366 days')}, ${row('364 days')}, ${row('1 minute')}`);

    const watched = watchingDeletes(database.db, 'audit_log');
    expect(await purgeAudit(watched.db, 365 * 86_400_000)).toBe(old + 1);
    expect(watched.answers).toEqual([PRUNE_BATCH, PRUNE_BATCH, 6]);
    const left = await rows<{ days: number }>(
      database.db,
      sql`select extract(day from now() - at)::int as days from audit_log where site = 'hk-audit' order by at`,
    );
    expect(left).toEqual([{ days: 364 }, { days: 0 }]);
  }, 60_000);
});

// Timed suspensions (issue 30, point 2): the job ends each one once, with its event and audit row.
describe('ending timed suspensions', () => {
  /** An account of the API on a site of its own, disabled until `until` (SQL). */
  async function suspended(on: Db, until: SQL, count = 1) {
    const site = `susp-${randomUUID().slice(0, 8)}`;
    const ids: string[] = [];
    for (let i = 0; i < count; i++) {
      const [row] = await rows<{ id: string }>(
        on,
        sql`insert into users (site, email, name, origin, disabled, disabled_until, disabled_reason)
          values (${site}, ${`${site}-${i}@example.com`}, 'Ada', 'api', true, ${until}, 'chargeback')
          returning id::text as id`,
      );
      ids.push(row!.id);
    }
    return { site, ids };
  }
  const stateOf = async (on: Db, id: string) =>
    (
      await rows<{ disabled: boolean; until: string | null; reason: string | null }>(
        on,
        sql`select disabled, disabled_until::text as until, disabled_reason as reason from users where id = ${id}`,
      )
    )[0];
  /** Events queued or numbered about the account, and the audit rows the job wrote for it. */
  const traceOf = async (on: Db, id: string) => ({
    events: (
      await rows<{ type: string }>(
        on,
        sql`select type from event_queue where subject = ${id} union all select type from events where subject = ${id}`,
      )
    ).map((r) => r.type),
    audit: await rows<{ actor: string; operation: string; outcome: string }>(
      on,
      sql`select token_id as actor, operation, outcome from audit_log where user_id = ${id}`,
    ),
  });

  it('enables the accounts whose end has come, with user.enabled and an audit row by the job, and leaves the others', async () => {
    const db = database.db;
    const due = await suspended(db, sql`now() - interval '1 second'`, 3);
    const later = await suspended(db, sql`now() + interval '1 hour'`);
    expect(await endDueSuspensions({ db }, { batch: 2 })).toBeGreaterThanOrEqual(3);
    for (const id of due.ids) {
      expect(await stateOf(db, id)).toEqual({ disabled: false, until: null, reason: null });
      expect(await traceOf(db, id)).toEqual({
        events: ['user.enabled'],
        audit: [{ actor: 'job', operation: 'enable', outcome: 'user enabled' }],
      });
    }
    expect(await stateOf(db, later.ids[0]!)).toMatchObject({ disabled: true, reason: 'chargeback' });
    expect(await traceOf(db, later.ids[0]!)).toEqual({ events: [], audit: [] });
    // A second run finds nothing more to do.
    expect(await endDueSuspensions({ db })).toBe(0);
    expect((await traceOf(db, due.ids[0]!)).events).toEqual(['user.enabled']);
  });

  // No site can hold another back: a backlog of one site's ends does not wait out another's.
  it('takes the sites in turn, a batch each, so that sites with one due end are not held behind others with many', async () => {
    const db = database.db;
    const past = sql`now() - interval '1 second'`;
    const crowded = await Promise.all([1, 2, 3].map(() => suspended(db, past, 9)));
    const quiet = await Promise.all([1, 2, 3].map(() => suspended(db, past, 1)));
    const ours = new Map<string, string>();
    for (const { site, ids } of [...crowded, ...quiet]) for (const id of ids) ours.set(id, site);
    const claims: string[] = []; // the site of each batch of ours, in the order they were claimed
    await endDueSuspensions(
      { db },
      {
        batch: 3,
        async afterClaim(claimed) {
          const site = claimed.map((id) => ours.get(id)).find((s) => s !== undefined);
          if (site !== undefined) claims.push(site);
        },
      },
    );
    expect(claims).toHaveLength(3 * 3 + 3);
    // The first round gives each of the six sites one batch; each quiet site's one end is in it.
    expect(new Set(claims.slice(0, 6))).toEqual(new Set([...crowded, ...quiet].map((s) => s.site)));
    for (const { ids } of quiet) expect(await stateOf(db, ids[0]!)).toMatchObject({ disabled: false });
  });

  it('ends a suspension on its own, with no call, once the running chores reach its time', async () => {
    const db = database.db;
    const { ids } = await suspended(db, sql`now() + interval '300 milliseconds'`);
    const tokens = { flushLastUsed: async () => {} } as unknown as TokenVerifier;
    const chores = startHousekeeping(db, tokens, pino({ level: 'silent' }), {
      eventsRetentionMs: 86_400_000,
      auditRetentionMs: null,
      writes: { db, accountHooks },
      suspensionsEveryMs: 50,
    });
    try {
      await vi.waitFor(async () => expect((await stateOf(db, ids[0]!))?.disabled).toBe(false), {
        timeout: 5_000,
        interval: 50,
      });
    } finally {
      await chores.stop();
    }
    expect((await traceOf(db, ids[0]!)).events).toEqual(['user.enabled']);
  });

  it.skipIf(!PG_URL)(
    'ends each suspension exactly once when two servers on one PostgreSQL run the job at the same time',
    async () => {
      // Two servers: two pools of their own on the same database.
      const url = await ownPostgres();
      const [one, two] = [await openPostgres(url, { max: 2 }), await openPostgres(url, { max: 2 })];
      try {
        await one!.migrate();
        const { ids } = await suspended(one!.db, sql`now() - interval '1 second'`, 2);
        // Server one claims both and is held before its commit; server two runs all the way meanwhile.
        const reached = Promise.withResolvers<void>();
        const release = Promise.withResolvers<void>();
        const first = endDueSuspensions(
          { db: one!.db },
          {
            async afterClaim(claimed) {
              if (!claimed.some((id) => ids.includes(id))) return;
              reached.resolve();
              await release.promise;
            },
          },
        );
        await reached.promise;
        const byTwo = await rows<{ n: number }>(
          two!.db,
          sql`select count(*)::int as n from users where id in (${sql.join(
            ids.map((id) => sql`${id}::uuid`),
            sql`, `,
          )}) and disabled`,
        );
        expect(byTwo[0]!.n).toBe(2); // still disabled as server two sees it: one's claim is open
        await endDueSuspensions({ db: two!.db });
        release.resolve();
        await first;
        for (const id of ids) {
          expect(await stateOf(two!.db, id)).toEqual({ disabled: false, until: null, reason: null });
          expect(await traceOf(two!.db, id)).toEqual({
            events: ['user.enabled'],
            audit: [{ actor: 'job', operation: 'enable', outcome: 'user enabled' }],
          });
        }
      } finally {
        await one!.close();
        await two!.close();
      }
    },
    30_000,
  );
});

describe('purging what has expired', () => {
  it('removes passkey challenges past their time, of a site that asks for no more, and keeps the live ones', async () => {
    const site = `quiet-${randomUUID().slice(0, 8)}`;
    const [gone, live] = [randomUUID(), randomUUID()];
    await database.db.execute(sql`insert into passkey_challenges (challenge_hash, site, purpose, expires_at)
      values (${gone}, ${site}, 'login', now() - interval '1 second'), (${live}, ${site}, 'login', now() + interval '5 minutes')`);
    await purgeExpired(database.db);
    const left = await rows<{ hash: string }>(
      database.db,
      sql`select challenge_hash as hash from passkey_challenges where site = ${site}`,
    );
    expect(left).toEqual([{ hash: live }]);
  });

  it('removes tickets past their time, and keeps the live ones', async () => {
    const site = `tickets-${randomUUID().slice(0, 8)}`;
    const [user] = await rows<{ id: string }>(
      database.db,
      sql`insert into users (site, email, name, origin) values (${site}, 'a@example.com', 'A', 'api') returning id::text as id`,
    );
    await issueTicket(
      database.db,
      { id: user!.id, site },
      'verify_email',
      600,
      undefined,
      deploymentKeysFrom([['k1', randomBytes(32)]], true),
    );
    await issueTicket(
      database.db,
      { id: user!.id, site },
      'reset_password',
      600,
      undefined,
      deploymentKeysFrom([['k1', randomBytes(32)]], true),
    );
    await database.db.execute(
      sql`update tickets set expires_at = now() - interval '1 second' where site = ${site} and purpose = 'verify_email'`,
    );
    await purgeExpired(database.db);
    const left = await rows<{ purpose: string }>(database.db, sql`select purpose from tickets where site = ${site}`);
    expect(left).toEqual([{ purpose: 'reset_password' }]);
  });
  it('removes sessions ended 30 days ago (revoked, expired, idle), and keeps live ones and those ended since', async () => {
    const site = `sessions-${randomUUID().slice(0, 8)}`;
    const [user] = await rows<{ id: string }>(
      database.db,
      sql`insert into users (site, email, name, origin) values (${site}, 'a@example.com', 'A', 'api') returning id::text as id`,
    );
    const made: Record<string, string> = {};
    const rowsOf = {
      live: sql`now() + interval '1 day', now(), null`,
      revokedLately: sql`now() + interval '1 day', now(), now() - interval '29 days'`,
      revokedLongAgo: sql`now() + interval '1 day', now(), now() - interval '31 days'`,
      expiredLongAgo: sql`now() - interval '31 days', now() - interval '40 days', null`,
      idleLongAgo: sql`now() + interval '1 day', now() - interval '38 days', null`,
    };
    for (const [name, values] of Object.entries(rowsOf)) {
      made[name] = randomUUID();
      await database.db.execute(sql`insert into sessions (id, site, user_id, token_hash, expires_at, last_seen_at, revoked_at, idle_seconds, aal, amr)
        values (${made[name]}, ${site}, ${user!.id}, ${randomUUID()}, ${values}, 604800, 1, '["pwd"]')`);
    }
    // Replaced tokens: a fresh one's successor masks stay (its grace window), an older one's go;
    // those of a removed session go with it.
    const replaced = (session: string, hash: string, ago: string) =>
      database.db.execute(sql`insert into session_replaced_tokens (token_hash, session_id, seq, replaced_at, successor_masks)
        values (${hash}, ${session}, ${hash.length}, now() - ${ago}::interval, 'mask')`);
    await replaced(made.live!, `fresh-${site}`, '1 second');
    await replaced(made.live!, `older-${site}!`, '2 minutes');
    await replaced(made.revokedLongAgo!, `gone-${site}`, '31 days');
    // One that carries its session's locator is kept for the refresh window only (issue 57, G3).
    await database.db.execute(sql`insert into session_replaced_tokens (token_hash, session_id, seq, replaced_at, lifelong)
      values (${`passing-${site}`}, ${made.live!}, 99, now() - interval '61 seconds', false),
        (${`passing-fresh-${site}`}, ${made.live!}, 98, now() - interval '30 seconds', false)`);
    await purgeExpired(database.db);
    const left = await rows<{ id: string }>(database.db, sql`select id::text as id from sessions where site = ${site}`);
    expect(left.map((r) => r.id).sort()).toEqual([made.live, made.revokedLately].sort());
    const tokens = await rows<{ token_hash: string; masked: boolean }>(
      database.db,
      sql`select token_hash, successor_masks is not null as masked from session_replaced_tokens
        where token_hash like ${`%${site}%`} order by token_hash`,
    );
    expect(tokens).toEqual([
      { token_hash: `fresh-${site}`, masked: true },
      { token_hash: `older-${site}!`, masked: false },
      { token_hash: `passing-fresh-${site}`, masked: false },
    ]);
  });
});

// Deletion with a grace period (issue 30, point 1): the purge at its end leaves nothing that names
// the person, and the site's default comes from `cli site set`.
describe('purging accounts past their grace period', () => {
  /** An account of the API with an email, an audit row and an event of a disable, and a lockout counter. */
  async function accountWithTraces(on: Db, site: string) {
    const email = `Purge.${randomUUID().slice(0, 8)}@Example.com`;
    const [row] = await rows<{ id: string }>(
      on,
      sql`insert into users (site, email, name, origin) values (${site}, ${email}, 'Ada', 'api') returning id::text as id`,
    );
    const id = row!.id;
    const scope = { site, actor: 'test-token', requestId: randomUUID() };
    await setDisabled(scope, { db: on, accountHooks }, id, undefined, true);
    await on.execute(sql`insert into verify_failures (key, failures, window_start)
      values (${lockoutKey(site, 'email', email.toLowerCase())}, 3, now()), (${lockoutKey(site, 'id', id)}, 2, now()),
        (${secondFactorLockoutKey(site, id)}, 1, now())`);
    // A passkey challenge made for it (registration), which no foreign key ties to the row.
    await on.execute(sql`insert into passkey_challenges (challenge_hash, site, purpose, user_id, expires_at)
      values (${randomUUID()}, ${site}, 'register', ${id}, now() + interval '5 minutes')`);
    // A ticket to change its email (naming both), and a create's answer kept for its Idempotency-Key.
    await on.execute(sql`insert into tickets (site, user_id, purpose, secret_hash, new_email, expires_at)
      values (${site}, ${id}, 'change_email', ${randomUUID()}, ${`new.${email}`}, now() + interval '1 day')`);
    await on.execute(sql`insert into idempotency_keys (token_id, key, fingerprint, status, body)
      values ('test-token', ${randomUUID()}, 'f', 201, ${JSON.stringify({ result: { _userId: id, status: 'user created' } })})`);
    return { id, email, scope };
  }

  /** Every table of the schema whose rows, as text, hold `needle` (any case): table and count. */
  async function tablesNaming(on: Db, needle: string) {
    const tables = await rows<{ name: string }>(
      on,
      sql`select table_name as name from information_schema.tables where table_schema = 'public' and table_type = 'BASE TABLE'`,
    );
    const found: Record<string, number> = {};
    for (const { name } of tables) {
      const [hit] = await rows<{ n: number }>(
        on,
        sql`select count(*)::int as n from ${sql.identifier(name)} t where t::text ilike ${`%${needle}%`}`,
      );
      if (hit!.n > 0) found[name] = hit!.n;
    }
    return found;
  }

  async function graceAndPurge(on: Db) {
    const site = `purge-${randomUUID().slice(0, 8)}`;
    const { id, email, scope } = await accountWithTraces(on, site);
    const kept = await accountWithTraces(on, site);
    await deleteAccount(scope, { db: on, accountHooks }, id, undefined, 30);
    await deleteAccount(scope, { db: on, accountHooks }, kept.id, undefined, 30);
    // In its grace period, nothing is purged; then its period ends (as 30 days later).
    // (Other sites' accounts past their period, left by earlier runs on a shared PostgreSQL, may go.)
    await purgeDeleted({ db: on, accountHooks });
    // Before: the row, and the disable's event (the account as get answers it, email and all).
    expect(await tablesNaming(on, email)).toEqual({ event_queue: 1, tickets: 1, users: 1 });
    const counters = [
      lockoutKey(site, 'email', email.toLowerCase()),
      lockoutKey(site, 'id', id),
      secondFactorLockoutKey(site, id),
    ];
    const countersLeft = async () =>
      (
        await rows<{ n: number }>(
          on,
          sql`select count(*)::int as n from verify_failures where key in (${sql.join(
            counters.map((k) => sql`${k}`),
            sql`, `,
          )})`,
        )
      )[0]!.n;
    expect(await countersLeft()).toBe(3);
    await on.execute(sql`update users set purge_at = now() - interval '1 second' where id = ${id}`);
    expect(await purgeDeleted({ db: on, accountHooks })).toBeGreaterThanOrEqual(1);

    // The email: nowhere. The id: only the purge's own audit row and user.purged event.
    expect(await tablesNaming(on, email)).toEqual({});
    // Its lockout counters (keys are digests: looked for by key), the second factor's too.
    expect(await countersLeft()).toBe(0);
    const naming = await tablesNaming(on, id);
    expect(Object.keys(naming).sort()).toEqual(['audit_log', 'event_queue']);
    expect(naming).toEqual({ audit_log: 1, event_queue: 1 });
    expect(
      await rows(on, sql`select token_id as actor, operation, outcome from audit_log where user_id = ${id}`),
    ).toEqual([{ actor: 'job', operation: 'purge', outcome: 'user purged' }]);
    expect(await rows(on, sql`select type, data from event_queue where subject = ${id}`)).toEqual([
      { type: 'user.purged', data: { _userId: id } },
    ]);
    // The other account, still in its grace period, keeps everything, and restore brings it back.
    expect(await tablesNaming(on, kept.email)).toEqual({ event_queue: 1, tickets: 1, users: 1 });
    expect(await tablesNaming(on, kept.id)).toMatchObject({ passkey_challenges: 1 });
    await restoreAccount(scope, { db: on }, kept.id);
    await expect(restoreAccount(scope, { db: on }, id)).rejects.toMatchObject({ code: 'user_not_found' });
  }

  it('removes the row and everything naming the person, and leaves only the purge’s own bare-id record (PGlite)', async () => {
    await graceAndPurge(database.db);
  });

  it.skipIf(!PG_URL)(
    'does the same on PostgreSQL',
    async () => {
      const pg = await openPostgres(await ownPostgres(), { max: 2 });
      try {
        await pg.migrate();
        await graceAndPurge(pg.db);
      } finally {
        await pg.close();
      }
    },
    60_000,
  );

  it.skipIf(!PG_URL)(
    'purges each account exactly once when two servers on one PostgreSQL run the job at the same time',
    async () => {
      const url = await ownPostgres();
      const [one, two] = [await openPostgres(url, { max: 2 }), await openPostgres(url, { max: 2 })];
      try {
        await one!.migrate();
        const site = `purge2-${randomUUID().slice(0, 8)}`;
        const { id, scope } = await accountWithTraces(one!.db, site);
        await deleteAccount(scope, { db: one!.db, accountHooks }, id, undefined, 1);
        await one!.db.execute(sql`update users set purge_at = now() - interval '1 second' where id = ${id}`);
        // Server one purges it and is held before its commit; server two runs all the way meanwhile.
        const reached = Promise.withResolvers<void>();
        const release = Promise.withResolvers<void>();
        const first = purgeDeleted(
          { db: one!.db, accountHooks },
          {
            async afterClaim(claimed) {
              if (!claimed.includes(id)) return;
              reached.resolve();
              await release.promise;
            },
          },
        );
        await reached.promise;
        expect(await purgeDeleted({ db: two!.db, accountHooks })).toBe(0);
        release.resolve();
        expect(await first).toBeGreaterThanOrEqual(1);
        expect(await rows(two!.db, sql`select type from event_queue where subject = ${id}`)).toEqual([
          { type: 'user.purged' },
        ]);
        expect(await rows(two!.db, sql`select operation from audit_log where user_id = ${id}`)).toEqual([
          { operation: 'purge' },
        ]);
      } finally {
        await one!.close();
        await two!.close();
      }
    },
    30_000,
  );

  it('takes the site default that `cli site set --deletion-grace` sets, and refuses a period over 90 days', async () => {
    const db = database.db;
    const site = `grace-${randomUUID().slice(0, 8)}`;
    expect(await runCommand(['site', 'set', '--site', site, '--deletion-grace', '91d'], db)).toMatchObject({ code: 2 });
    expect(await siteDeletionGrace(db, site)).toBe(0);
    expect(await runCommand(['site', 'set', '--site', site, '--deletion-grace', '30d'], db)).toMatchObject({
      code: 0,
      stdout: `Site ${site}: a delete without graceDays keeps the account restorable for 30 days.\n`,
    });
    const { id, scope } = await accountWithTraces(db, site);
    expect(await deleteAccount(scope, { db, accountHooks }, id, undefined)).toEqual({ graceDays: 30 });
    expect(
      await rows(db, sql`select extract(day from purge_at - deleted_at)::int as days from users where id = ${id}`),
    ).toEqual([{ days: 30 }]);
    await runCommand(['site', 'set', '--site', site, '--deletion-grace', '0d'], db);
    expect(await siteDeletionGrace(db, site)).toBe(0);
  });
});
