// Tickets without HTTP (issue 28, point 3): what is stored, a code's tries, what a change ends,
// and housekeeping's removal of expired ones.
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../db/client.ts';
import { purgeExpired } from '../ops/housekeeping.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { endTicketsOfUpdate, findTicket, issueTicket, useTicket } from './tickets.ts';

describe('tickets', () => {
  let database: Database;
  let userId: string;
  const count = async (where = sql`true`) =>
    Number(
      (
        (await database.db.execute(sql`select count(*)::int as n from tickets where ${where}`)) as unknown as {
          n: number;
        }[]
      )[0]!.n,
    );

  beforeAll(async () => {
    database = await openMigratedPglite();
    const rows = (await database.db.execute(
      sql`insert into users (site, email, name, phone, origin) values ('shop', 'a@example.com', 'A', '555-0100', 'api') returning id`,
    )) as unknown as { id: string }[];
    userId = rows[0]!.id;
  }, 60_000);
  afterAll(async () => {
    await database?.close();
  });

  it('stores a hash of the secret, never the secret, and finds and uses it once', async () => {
    const { ticket } = await issueTicket(database.db, { id: userId, site: 'shop' }, 'verify_email', 3600, undefined);
    const stored = JSON.stringify(await database.db.execute(sql`select * from tickets`));
    expect(stored).not.toContain(ticket);
    const found = await findTicket(database.db, 'shop', 'verify_email', ticket, undefined);
    expect(found?.userId).toBe(userId);
    expect(await findTicket(database.db, 'other', 'verify_email', ticket, undefined)).toBeUndefined();
    expect(await findTicket(database.db, 'shop', 'reset_password', ticket, undefined)).toBeUndefined();
    expect(await useTicket(database.db, found!.id)).toBe(true);
    expect(await useTicket(database.db, found!.id)).toBe(false);
  });

  it('burns a code at its fifth wrong try', async () => {
    const { ticket } = await issueTicket(database.db, { id: userId, site: 'shop' }, 'verify_phone', 600, undefined);
    const wrong = ticket === '000000' ? '000001' : '000000';
    for (let i = 0; i < 4; i++)
      expect(await findTicket(database.db, 'shop', 'verify_phone', wrong, userId)).toBeUndefined();
    expect(await count(sql`purpose = 'verify_phone' and tries = 4`)).toBe(1);
    expect(await findTicket(database.db, 'shop', 'verify_phone', wrong, userId)).toBeUndefined();
    expect(await findTicket(database.db, 'shop', 'verify_phone', ticket, userId)).toBeUndefined();
    expect(await count(sql`purpose = 'verify_phone'`)).toBe(0);
  });

  it('ends what a change stood on: a new email, password or phone, not a change of letter case', async () => {
    await database.db.execute(sql`delete from tickets`);
    const account = sql`id = ${userId}`;
    for (const purpose of ['verify_email', 'reset_password', 'change_email', 'verify_phone'] as const)
      await issueTicket(
        database.db,
        { id: userId, site: 'shop' },
        purpose,
        600,
        purpose === 'change_email' ? 'b@example.com' : undefined,
      );
    await endTicketsOfUpdate(database.db, account, userId, { email: 'A@EXAMPLE.COM' });
    expect(await count()).toBe(4);
    await endTicketsOfUpdate(database.db, account, userId, { password: true });
    expect(await count(sql`purpose = 'reset_password'`)).toBe(0);
    await endTicketsOfUpdate(database.db, account, userId, { phone: '555-0100' });
    expect(await count(sql`purpose = 'verify_phone'`)).toBe(1);
    await endTicketsOfUpdate(database.db, account, userId, { phone: null });
    expect(await count(sql`purpose = 'verify_phone'`)).toBe(0);
    await endTicketsOfUpdate(database.db, account, userId, { email: 'new@example.com' });
    expect(await count()).toBe(0);
  });

  it('is removed by housekeeping once expired', async () => {
    await issueTicket(database.db, { id: userId, site: 'shop' }, 'verify_email', 600, undefined);
    await issueTicket(database.db, { id: userId, site: 'shop' }, 'reset_password', 600, undefined);
    await database.db.execute(
      sql`update tickets set expires_at = now() - interval '1 second' where purpose = 'verify_email'`,
    );
    await purgeExpired(database.db);
    expect(await count(sql`purpose = 'verify_email'`)).toBe(0);
    expect(await count(sql`purpose = 'reset_password'`)).toBe(1);
  });
});
