// `cli signing-keys rotate [--now]` and `cli signing-keys list` (issue 43, point 4): a rotation
// publishes a key that signs later (or at once with --now), under the ring the command is given
// (the CLI's own FACTOR_ENCRYPTION_KEY, or the running server's through its socket), and tells
// the server that runs it to read its keys again; the list says each key's state and seal.
import { randomBytes } from 'node:crypto';
import { decodeProtectedHeader } from 'jose';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../db/client.ts';
import { signingKeys } from '../db/schema.ts';
import { type KeyRing, parseKeyRing } from '../kernel/secret-box.ts';
import { ACTIVATION_DELAY_SECONDS, createSigningKeys } from '../sessions/signing-keys.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { runCommand } from './commands.ts';

const ring = parseKeyRing(`cli:${randomBytes(32).toString('base64')}`) as KeyRing;
const request = { site: 'shop', userId: 'u', sessionId: 's', amr: ['pwd'], aal: 1 };

describe('cli signing-keys', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openMigratedPglite();
  }, 60_000);
  afterAll(() => database?.close());

  it('rotates: the new key is listed pending, then signs from its time; --now signs at once and tells the server', async () => {
    const db = database.db;
    await db.delete(signingKeys);
    expect((await runCommand(['signing-keys', 'list'], db)).stdout).toMatch(/^No signing keys yet/);
    const signer = createSigningKeys({ db, ring, issuer: 'https://i.example', lifetimeSeconds: 300 });
    const first = decodeProtectedHeader((await signer.sign(request)).accessToken).kid!;

    let told = 0;
    const settings = {
      webhookAllowPrivate: false,
      factorKeys: ring,
      signingKeysChanged: async () => {
        told++;
        await signer.refresh();
      },
    };
    const started = Date.now();
    const rotated = await runCommand(['signing-keys', 'rotate'], db, undefined, undefined, settings);
    expect(rotated.code, rotated.stderr).toBe(0);
    const kid = /^Published signing key ([A-Za-z0-9_-]{43}) /.exec(rotated.stdout)?.[1];
    expect(kid).toBeDefined();
    expect(rotated.stdout).toContain(`${first} stops signing then`);
    expect(told).toBe(1);
    const listed = JSON.parse((await runCommand(['signing-keys', 'list', '--json'], db)).stdout) as {
      kid: string;
      state: string;
      activatesAt: string;
      sealedWith: string;
    }[];
    expect(listed.map((k) => [k.kid, k.state, k.sealedWith])).toEqual([
      [kid, 'pending', 'cli'],
      [first, 'signing', 'cli'],
    ]);
    const activates = new Date(listed[0]!.activatesAt).getTime();
    expect(activates).toBeGreaterThanOrEqual(started + ACTIVATION_DELAY_SECONDS * 1000);
    expect(activates).toBeLessThanOrEqual(Date.now() + ACTIVATION_DELAY_SECONDS * 1000);
    // Published, not signing yet.
    expect((await signer.publishedKeys()).keys.map((k) => k.kid)).toEqual([kid, first]);
    expect(decodeProtectedHeader((await signer.sign(request)).accessToken).kid).toBe(first);

    const now = await runCommand(['signing-keys', 'rotate', '--now'], db, undefined, undefined, settings);
    expect(now.code, now.stderr).toBe(0);
    expect(now.stdout).toContain('It signs from now on');
    const third = /^Published signing key ([A-Za-z0-9_-]{43}) /.exec(now.stdout)![1];
    expect(told).toBe(2);
    expect(decodeProtectedHeader((await signer.sign(request)).accessToken).kid).toBe(third);
    const table = (await runCommand(['signing-keys', 'list'], db)).stdout;
    expect(table).toMatch(/KID\s+STATE\s+CREATED\s+SIGNS FROM\s+RETIRED\s+PUBLISHED UNTIL\s+SEALED WITH/);
    expect(table).toMatch(new RegExp(`${third}\\s+signing`));
    expect(table).toMatch(new RegExp(`${first}\\s+retired`));
    // The pending key retired before it ever signed: still published, as every retired key.
    expect(table).toMatch(new RegExp(`${kid}\\s+retired`));
    expect((await signer.publishedKeys()).keys.map((k) => k.kid).sort()).toEqual([first, kid, third].sort());
  });

  it('refuses arguments it does not take, changing nothing', async () => {
    const db = database.db;
    const before = await db.select().from(signingKeys);
    for (const argv of [
      ['signing-keys', 'rotate', 'extra'],
      ['signing-keys', 'rotate', '--site', 'shop'],
      ['signing-keys', 'list', 'extra'],
    ]) {
      const result = await runCommand(argv, db);
      expect(result.code, argv.join(' ')).toBe(2);
      expect(result.stderr).toMatch(/^cli signing-keys (rotate|list): /);
    }
    expect(await db.select().from(signingKeys)).toEqual(before);
  });
});
