// Upgrades of a database made by an earlier main, with data in it, to this one by `cli migrate`,
// as an operator does: the accounts are all there, the feed has every event numbered once, in
// the order written, and new writes go on from there. upgrade-fixtures/<commit>/ holds that
// commit's journal and the files it had that differ from today's (the others are the committed
// ones, which drizzle/checksums.json keeps as they were).
//   77f4cf6: the first 0006, without its trigger on TRUNCATE (no events yet).
//   733e409: the first 0010, edited after (its journal time too): `cli migrate` failed on
//            `DROP INDEX "events_unnumbered_idx"` (issue 32, point 2).
//   1ca8b0c: the first 0011, whose functions were edited after.
//   3f2fac5: the last main before the plain event queue (0015).
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createClient } from '@user-accounts/client';
import { processes } from '@user-accounts/server/testing/processes';
import { mintToken } from '@user-accounts/server/tokens';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { freshPostgresDatabase, postgresUnavailable } from './targets.ts';

const FIXTURES = fileURLToPath(new URL('upgrade-fixtures/', import.meta.url));
const MIGRATIONS = fileURLToPath(new URL('../../server/drizzle/', import.meta.url));
const skip = await postgresUnavailable();
if (skip !== undefined) console.warn(`\n[contract-tests] upgrades from earlier releases: SKIPPED, ${skip}\n`);

const procs = processes();
const drops: (() => Promise<void>)[] = [];
afterAll(async () => {
  procs.cleanup();
  await Promise.all(drops.map((drop) => drop()));
});

/** The migrations as they were at `commit`: its journal, its files. */
function migrationsAt(commit: string): { tag: string; when: number; text: string }[] {
  const dir = join(FIXTURES, commit);
  const journal = JSON.parse(readFileSync(join(dir, '_journal.json'), 'utf8')) as {
    entries: { tag: string; when: number }[];
  };
  return journal.entries.map(({ tag, when }) => {
    const own = join(dir, `${tag}.sql`);
    return { tag, when, text: readFileSync(existsSync(own) ? own : join(MIGRATIONS, `${tag}.sql`), 'utf8') };
  });
}

/** What drizzle's migrator of that time did: every migration in one transaction, each recorded by hash and time. */
async function migrateAsAt(sql: postgres.Sql, commit: string): Promise<void> {
  await sql.unsafe('create schema if not exists drizzle');
  await sql.unsafe(
    'create table if not exists drizzle.__drizzle_migrations (id serial primary key, hash text not null, created_at bigint)',
  );
  await sql.begin(async (tx) => {
    for (const { when, text } of migrationsAt(commit)) {
      for (const statement of text.split('--> statement-breakpoint')) await tx.unsafe(statement);
      const hash = createHash('sha256').update(text).digest('hex');
      await tx`insert into drizzle.__drizzle_migrations (hash, created_at) values (${hash}, ${when})`;
    }
  });
}

/**
 * Accounts and their events, written as that version's server wrote them: the site's row in
 * event_sequences first, the events unnumbered, a numbering run (sequence_events) over some of
 * them, and the last ones left for the next run (written just before the servers were stopped).
 */
async function writeAsBefore(sql: postgres.Sql, site: string): Promise<{ emails: string[]; events: boolean }> {
  const [found] = await sql<{ events: boolean }[]>`select to_regclass('events') is not null as events`;
  const events = found!.events;
  if (events) await sql`insert into event_sequences (site, last) values (${site}, 0) on conflict do nothing`;
  const emails: string[] = [];
  const created = async (i: number) => {
    const email = `${site}-${i}@example.com`;
    emails.push(email);
    const [user] = await sql<{ id: string }[]>`
      insert into users (site, email, name, origin) values (${site}, ${email}, ${`User ${i}`}, 'api') returning id::text`;
    if (events)
      await sql`insert into events (site, type, subject, data)
      values (${site}, 'user.created', ${user!.id}, ${sql.json({ _userId: user!.id, email, name: `User ${i}` })})`;
    return user!.id;
  };
  const first = await created(1);
  await created(2);
  await sql`update users set name = 'Renamed', version = version + 1 where id = ${first}`;
  if (events) {
    await sql`insert into events (site, type, subject, changed, data)
      values (${site}, 'user.updated', ${first}, 'name', ${sql.json({ _userId: first, name: 'Renamed' })})`;
    await sql`select sequence_events()`;
  }
  await created(3);
  await created(4);
  return { emails, events };
}

const COMMITS = readdirSync(FIXTURES).sort();

describe.skipIf(skip !== undefined)('upgrading a database made by an earlier main with `cli migrate`', () => {
  it.each(COMMITS)(
    'from %s: the accounts, the feed in order, and writes after',
    async (commit) => {
      const database = await freshPostgresDatabase();
      drops.push(database.drop);
      const sql = postgres(database.url, { max: 1, onnotice: () => {} });
      let emails: string[];
      let shop: string[];
      let events: boolean;
      try {
        await migrateAsAt(sql, commit);
        ({ emails, events } = await writeAsBefore(sql, 'default'));
        shop = (await writeAsBefore(sql, 'shop')).emails;
      } finally {
        await sql.end();
      }

      const env = { DATABASE_URL: database.url };
      const migrated = await procs.cli(['migrate'], env);
      expect(migrated.stderr).toBe('');
      expect(migrated.code).toBe(0);

      const exported = await procs.cli(['export', '--site', 'shop'], env);
      expect(exported.code, exported.stderr).toBe(0);
      expect(
        exported.stdout
          .trim()
          .split('\n')
          .map((line) => (JSON.parse(line) as { email: string }).email)
          .sort(),
      ).toEqual(shop.sort());

      const token = mintToken();
      const server = procs.server({ ...env, API_TOKENS: token });
      await server.ready;
      const client = createClient({ baseUrl: server.baseUrl, token });
      const listed = await client.GET('/api/1/user/list', { params: { query: { limit: 100 } } });
      expect(listed.data?.result.users.map((u) => u.email).sort()).toEqual(emails.sort());

      const feed = async () => {
        const { data } = await client.GET('/api/1/events', { params: { query: { limit: 100 } } });
        return (data?.result.events ?? []).map((e) => [
          e.sequence,
          e.type,
          (e.data as { email?: string }).email ?? null,
        ]);
      };
      // Before 0007 there were no events: the accounts of then have none.
      const before = !events
        ? []
        : [
            ['00000000000000000001', 'user.created', emails[0]],
            ['00000000000000000002', 'user.created', emails[1]],
            ['00000000000000000003', 'user.updated', null],
            ['00000000000000000004', 'user.created', emails[2]],
            ['00000000000000000005', 'user.created', emails[3]],
          ];
      await expect.poll(feed, { timeout: 5_000 }).toEqual(before);

      const made = await client.POST('/api/1/user/create', {
        body: { email: 'after@example.com', password: 'an upgraded passphrase', name: 'After' },
      });
      expect(made.response.status).toBe(201);
      await expect
        .poll(feed, { timeout: 5_000 })
        .toEqual([...before, [String(before.length + 1).padStart(20, '0'), 'user.created', 'after@example.com']]);

      // What the edited 0006 lacked: a TRUNCATE of the tokens tells the servers too.
      const check = postgres(database.url, { max: 1, onnotice: () => {} });
      const triggers = await check`select tgname from pg_trigger where tgname = 'api_tokens_notify_truncate'`;
      await check.end();
      expect(triggers).toHaveLength(1);
    },
    120_000,
  );

  it('says what failed, that nothing changed, and what to do, when a migration fails', async () => {
    const database = await freshPostgresDatabase();
    drops.push(database.drop);
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      await migrateAsAt(sql, '3f2fac5');
      // Something of the operator's own where a migration of ours creates a table.
      await sql`create table event_queue (note text)`;
      const failed = await procs.cli(['migrate'], { DATABASE_URL: database.url });
      expect(failed.code).toBe(1);
      expect(failed.stderr).toMatch(
        /^cli: Migrating the database failed in 0015_plain_event_queue: relation "event_queue" already exists\. Nothing was changed: .*What to do: .*run `cli migrate` again/,
      );
      const [after] = await sql<{ n: number }[]>`select count(*)::int as n from drizzle.__drizzle_migrations`;
      expect(after!.n).toBe(migrationsAt('3f2fac5').length);
      expect((await sql`select to_regclass('events_0014') as t`)[0]!.t).toBeNull();
    } finally {
      await sql.end();
    }
  }, 180_000);

  it('refuses a database whose 0007 and 0008 came from main before 5b1690b, saying what to do instead', async () => {
    const database = await freshPostgresDatabase();
    drops.push(database.drop);
    const sql = postgres(database.url, { max: 1, onnotice: () => {} });
    try {
      await migrateAsAt(sql, '3f2fac5');
      // As 5805b04's migrator recorded its 0007 (the file and time it had then).
      await sql`update drizzle.__drizzle_migrations
        set hash = 'a75451e026e25757985ff6d2748a746480689106a86539d5b767019850a2ed76', created_at = 1795336238799
        where created_at = ${migrationsAt('3f2fac5')[7]!.when}`;
      const refused = await procs.cli(['migrate'], { DATABASE_URL: database.url });
      expect(refused.code).toBe(1);
      expect(refused.stderr).toMatch(/This database cannot be migrated: .*before 5b1690b.*cli export --site NAME/);
    } finally {
      await sql.end();
    }
  }, 180_000);
});
