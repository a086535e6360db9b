import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openPglite } from '../db/client.ts';
import { users } from '../db/schema.ts';
import { compileValidators } from '../http/validation.ts';
import { createPasswordHasher } from '../passwords/hasher.ts';
import { importFile } from './import-file.ts';

let database: Database;
let dir: string;
beforeAll(async () => {
  database = await openPglite(undefined);
  await database.migrate();
  dir = mkdtempSync(join(tmpdir(), 'ua-import-file-'));
});
afterAll(async () => {
  await database?.close();
  rmSync(dir, { recursive: true, force: true });
});

const quiet = Object.assign(new (await import('node:stream')).PassThrough(), { isTTY: false });
const HASH = '$2b$04$C6UzMDM.H6dfI/f/IKcEeO5pGdVQWpVj.ZnNYtGqPVmz/7iXS3O8a'; // bcrypt: no hashing at import

describe('cli import --dry-run over a file of more than one batch', () => {
  it('refuses a line whose email an earlier batch would create, as the real import then does', async () => {
    // 1,001 lines: the last one repeats the first line's email, in the next batch of 1,000.
    const lines = Array.from({ length: 1000 }, (_, i) =>
      JSON.stringify({ email: `user${i}@example.org`, name: `User ${i}`, passwordHash: HASH }),
    );
    lines.push(JSON.stringify({ email: 'USER0@example.org', name: 'Again', passwordHash: HASH }));
    const file = join(dir, 'accounts.ndjson');
    writeFileSync(file, `${lines.join('\n')}\n`);
    const target = { db: database.db, hasher: createPasswordHasher(), validators: compileValidators(), site: 'dry' };

    const dry = await importFile({ target, file, dryRun: true, progress: quiet });
    expect(dry.summary).toMatch(/^1000 of 1001 accounts would be imported/);
    expect(dry.summary).toContain('line 1001: email_taken: email is the email of line 1');
    expect(dry.code).toBe(1);
    expect(await database.db.select().from(users)).toHaveLength(0);

    const real = await importFile({ target, file, dryRun: false, progress: quiet });
    expect(real.summary).toMatch(/^1000 of 1001 accounts imported/);
    expect(real.code).toBe(1);
  }, 60_000);
});
