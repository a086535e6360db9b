// `cli site set --rp-id --origins [--rp-name]` (issue 29, point 3): what it stores is what the
// passkey operations read (relyingPartyOf), and it refuses what a browser would refuse later
// (an RP id with a scheme, an origin off the RP id, http away from localhost), changing nothing.
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../db/client.ts';
import { relyingPartyOf } from '../factors/passkeys.ts';
import { lifetimesOf } from '../sessions/rules.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { runCommand } from './commands.ts';

describe('cli site set --rp-id --origins', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openMigratedPglite();
  }, 60_000);
  afterAll(() => database?.close());

  it('makes the site a relying party that the passkey operations read; without one they answer 409 naming the command', async () => {
    const db = database.db;
    const site = `rp-${randomUUID().slice(0, 8)}`;
    await expect(relyingPartyOf(db, site)).rejects.toMatchObject({
      status: 409,
      code: 'passkeys_not_configured',
      message: expect.stringContaining(`cli site set --site ${site} --rp-id`),
    });
    const set = await runCommand(
      [
        'site',
        'set',
        '--site',
        site,
        '--rp-id',
        'example.com',
        '--origins',
        'https://example.com,https://app.example.com:8443',
        '--rp-name',
        'Example',
      ],
      db,
    );
    expect(set).toMatchObject({
      code: 0,
      stdout: `Site ${site}: passkeys for relying party example.com, from https://example.com, https://app.example.com:8443.\n`,
    });
    expect(await relyingPartyOf(db, site)).toEqual({
      id: 'example.com',
      name: 'Example',
      origins: ['https://example.com', 'https://app.example.com:8443'],
    });
    // The grace period is another setting of the same row: setting one keeps the other.
    await runCommand(['site', 'set', '--site', site, '--deletion-grace', '7d'], db);
    expect((await relyingPartyOf(db, site)).id).toBe('example.com');
    // Without --rp-name, the browser shows the site's name.
    await runCommand(['site', 'set', '--site', site, '--rp-id', 'localhost', '--origins', 'http://localhost:5173'], db);
    expect(await relyingPartyOf(db, site)).toEqual({ id: 'localhost', name: site, origins: ['http://localhost:5173'] });
  });

  it.each([
    [
      'an RP id with a scheme',
      ['--rp-id', 'https://example.com', '--origins', 'https://example.com'],
      '--rp-id must be a domain',
    ],
    [
      'an origin on another domain',
      ['--rp-id', 'example.com', '--origins', 'https://example.org'],
      '--origins must be',
    ],
    [
      'an origin that only ends like the RP id',
      ['--rp-id', 'example.com', '--origins', 'https://badexample.com'],
      '--origins must be',
    ],
    ['http away from localhost', ['--rp-id', 'example.com', '--origins', 'http://example.com'], '--origins must be'],
    ['an origin with a path', ['--rp-id', 'localhost', '--origins', 'http://localhost:5173/app'], '--origins must be'],
    ['an RP id without origins', ['--rp-id', 'example.com'], '--rp-id and --origins go together'],
  ])('refuses %s with a usage error, changing nothing', async (_, flags, message) => {
    const db = database.db;
    const site = `rp-${randomUUID().slice(0, 8)}`;
    const refused = await runCommand(['site', 'set', '--site', site, ...flags], db);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(message);
    await expect(relyingPartyOf(db, site)).rejects.toMatchObject({ code: 'passkeys_not_configured' });
  });
});

describe('cli site set --session-lifetime --session-idle', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openMigratedPglite();
  }, 60_000);
  afterAll(() => database?.close());

  it('stores the lifetimes the sessions read, keeps the other settings, and refuses one out of bounds', async () => {
    const db = database.db;
    const site = `sessions-${randomUUID().slice(0, 8)}`;
    expect(await lifetimesOf(db, site)).toEqual({ lifetime: 30 * 86400, idle: 7 * 86400 });
    await runCommand(['site', 'set', '--site', site, '--deletion-grace', '7d'], db);
    const set = await runCommand(
      ['site', 'set', '--site', site, '--session-lifetime', '12h', '--session-idle', '90m'],
      db,
    );
    expect(set).toMatchObject({
      code: 0,
      stdout: `Site ${site}: new sessions live at most 43200 s.\nSite ${site}: new sessions end after 5400 s without use.\n`,
    });
    expect(await lifetimesOf(db, site)).toEqual({ lifetime: 43_200, idle: 5_400 });
    await runCommand(['site', 'set', '--site', site, '--session-idle', '3600s'], db);
    expect(await lifetimesOf(db, site)).toEqual({ lifetime: 43_200, idle: 3_600 });
    for (const bad of ['4m', '366d', '12', 'forever']) {
      const refused = await runCommand(['site', 'set', '--site', site, '--session-lifetime', bad], db);
      expect(refused, bad).toMatchObject({ code: 2 });
    }
    expect(await lifetimesOf(db, site)).toEqual({ lifetime: 43_200, idle: 3_600 });
  });
});
