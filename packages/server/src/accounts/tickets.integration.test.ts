// Tickets without HTTP (issue 28, point 3): what is stored, a code's tries, what a change ends
// (housekeeping's removal of expired ones is in ops/housekeeping.integration.test.ts).
import { createHash, randomBytes } from 'node:crypto';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../db/client.ts';
import { deploymentKeysFrom } from '../kernel/deployment-keys.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { endTicketsOfUpdate, findTicket, issueTicket, useTicket } from './tickets.ts';

describe('tickets', () => {
  const root = randomBytes(32);
  const keys = deploymentKeysFrom([['k1', root]], true);
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
    const { ticket } = await issueTicket(
      database.db,
      { id: userId, site: 'shop' },
      'verify_email',
      3600,
      undefined,
      keys,
    );
    const stored = JSON.stringify(await database.db.execute(sql`select * from tickets`));
    expect(stored).not.toContain(ticket);
    const found = await findTicket(database.db, 'shop', 'verify_email', ticket, undefined, keys);
    expect(found?.userId).toBe(userId);
    expect(await findTicket(database.db, 'other', 'verify_email', ticket, undefined, keys)).toBeUndefined();
    expect(await findTicket(database.db, 'shop', 'reset_password', ticket, undefined, keys)).toBeUndefined();
    expect(await useTicket(database.db, found!.id)).toBe(true);
    expect(await useTicket(database.db, found!.id)).toBe(false);
  });

  it('burns a code at its fifth wrong try', async () => {
    const { ticket } = await issueTicket(
      database.db,
      { id: userId, site: 'shop' },
      'verify_phone',
      600,
      undefined,
      keys,
    );
    const wrong = ticket === '000000' ? '000001' : '000000';
    for (let i = 0; i < 4; i++)
      expect(await findTicket(database.db, 'shop', 'verify_phone', wrong, userId, keys)).toBeUndefined();
    expect(await count(sql`purpose = 'verify_phone' and tries = 4`)).toBe(1);
    expect(await findTicket(database.db, 'shop', 'verify_phone', wrong, userId, keys)).toBeUndefined();
    expect(await findTicket(database.db, 'shop', 'verify_phone', ticket, userId, keys)).toBeUndefined();
    expect(await count(sql`purpose = 'verify_phone'`)).toBe(0);
  });

  it('counts a try before comparing: 50 wrong codes at once and the right one behind them, refused (issue 41, F3)', async () => {
    await database.db.execute(sql`delete from tickets`);
    const { ticket } = await issueTicket(
      database.db,
      { id: userId, site: 'shop' },
      'verify_phone',
      600,
      undefined,
      keys,
    );
    const wrong = Array.from({ length: 50 }, (_, i) => String((Number(ticket) + 1 + i) % 1_000_000).padStart(6, '0'));
    // One connection runs statements in the order they are sent: every try is sent before any is
    // answered, the right one last (the burst an attacker sends; before, each was read before any was counted).
    const tries = await Promise.all(
      [...wrong, ticket].map((code) => findTicket(database.db, 'shop', 'verify_phone', code, userId, keys)),
    );
    expect(tries.every((t) => t === undefined)).toBe(true);
    expect(await count(sql`purpose = 'verify_phone'`)).toBe(0);
  });

  it("keeps a code as an HMAC under the deployment's key, which the row cannot recompute (issue 41, F10)", async () => {
    await database.db.execute(sql`delete from tickets`);
    const stored = async () =>
      (
        (await database.db.execute(
          sql`select id, secret_hash from tickets where purpose = 'verify_phone'`,
        )) as unknown as {
          id: string;
          secret_hash: string;
        }[]
      )[0]!;
    const { ticket } = await issueTicket(
      database.db,
      { id: userId, site: 'shop' },
      'verify_phone',
      600,
      undefined,
      keys,
    );
    const row = await stored();
    const sha = createHash('sha256').update(`${row.id}:${ticket}`).digest('base64url');
    expect(row.secret_hash).not.toContain(sha);
    expect(row.secret_hash).toMatch(/^k1\.[A-Za-z0-9_-]{43}$/);
    // Another deployment's key neither makes nor accepts it.
    const other = deploymentKeysFrom([['k1', randomBytes(32)]], true);
    expect(row.secret_hash).not.toBe(other.mac('phone_code', `${row.id}:${ticket}`));
    expect(await findTicket(database.db, 'shop', 'verify_phone', ticket, userId, other)).toBeUndefined();
    expect((await findTicket(database.db, 'shop', 'verify_phone', ticket, userId, keys))?.id).toBe(row.id);
    // A code issued before (a SHA-256) still works until it expires; a rotated ring still checks the old key's.
    await database.db.execute(sql`update tickets set secret_hash = ${sha}, tries = 0 where id = ${row.id}`);
    expect((await findTicket(database.db, 'shop', 'verify_phone', ticket, userId, keys))?.id).toBe(row.id);
    await database.db.execute(sql`update tickets set secret_hash = ${row.secret_hash}, tries = 0 where id = ${row.id}`);
    const rotated = deploymentKeysFrom(
      [
        ['k2', randomBytes(32)],
        ['k1', root],
      ],
      true,
    );
    expect((await findTicket(database.db, 'shop', 'verify_phone', ticket, userId, rotated))?.id).toBe(row.id);
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
        keys,
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
});
