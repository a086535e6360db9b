// `cli export` says what the file leaves out (issue 41, F9): on stderr, beside its summary, with
// the number of accounts whose second factors an import elsewhere will not have.
import { randomUUID } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../db/client.ts';
import { userFactors, users } from '../db/schema.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { exportFile } from './export-file.ts';

let database: Database;
beforeAll(async () => {
  database = await openMigratedPglite();
});
afterAll(() => database?.close());

async function account(site: string, factor?: { enabled: boolean }) {
  const id = randomUUID();
  await database.db.insert(users).values({
    id,
    site,
    email: `${id}@example.com`,
    name: 'Ada',
    passwordHash: '$argon2id$v=19$m=19456,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNoaGFzaA',
    origin: 'api',
  });
  if (factor !== undefined) {
    await database.db.insert(userFactors).values({
      id: randomUUID(),
      userId: id,
      type: 'totp',
      secret: 'sealed',
      ...(factor.enabled ? { enabledAt: new Date() } : {}),
    });
  }
}

async function exported(site: string) {
  const output = new PassThrough();
  const lines: Buffer[] = [];
  output.on('data', (chunk: Buffer) => lines.push(chunk));
  const { summary } = await exportFile({ db: database.db, site, output, progress: new PassThrough() });
  return { summary, file: Buffer.concat(lines).toString() };
}

describe('cli export', () => {
  it('says what the file leaves out, and how many accounts lose a second factor', async () => {
    await account('twofa', { enabled: true });
    await account('twofa', { enabled: true });
    await account('twofa', { enabled: false }); // a pending factor protects nothing yet
    await account('twofa');
    const { summary, file } = await exported('twofa');
    expect(file.trimEnd().split('\n')).toHaveLength(4);
    expect(file).not.toContain('sealed');
    expect(summary).toMatch(/^Exported 4 accounts of site twofa/);
    expect(summary).toContain(
      'Not in the file (an import elsewhere will not have it): second factors: 2 accounts with TOTP or passkeys will sign in with their password alone after an import',
    );
    expect(summary).toContain('recovery codes');
  });

  it('says it too when no account has a second factor', async () => {
    await account('plain');
    expect((await exported('plain')).summary).toContain('second factors (no account of the site has one)');
  });
});
