import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { eq } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileValidators } from '../contract/validation.ts';
import type { Database } from '../db/client.ts';
import { auditLog, userFactors, users } from '../db/schema.ts';
import { type KeyRing, mintKeyRingText, open, parseKeyRing } from '../kernel/secret-box.ts';
import { createPasswordHasher } from '../passwords/hasher.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { importFile } from './import-file.ts';

let database: Database;
let dir: string;
beforeAll(async () => {
  database = await openMigratedPglite();
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

describe('cli import of TOTP secrets (issue 29, point 4)', () => {
  const SECRET = 'JBSWY3DPEHPK3PXPJBSWY3DPEHPK3PXP';
  const file = () => {
    const path = join(dir, 'totp.ndjson');
    const lines = [
      {
        email: 'totp@example.org',
        name: 'Totp',
        passwordHash: HASH,
        totp: { secret: SECRET.toLowerCase(), label: 'Phone' },
      },
      { email: 'bad-totp@example.org', name: 'Bad', passwordHash: HASH, totp: { secret: 'JBSWY3DPEHPK3PXPJ' } },
    ];
    writeFileSync(path, `${lines.map((l) => JSON.stringify(l)).join('\n')}\n`);
    return path;
  };
  const target = (factorKeys?: KeyRing) => ({
    db: database.db,
    hasher: createPasswordHasher(),
    validators: compileValidators(),
    site: 'cli-totp',
    factorKeys,
  });

  it('refuses the whole file without a key (503, nothing written): an account never arrives without its factor', async () => {
    await expect(importFile({ target: target(), file: file(), dryRun: false, progress: quiet })).rejects.toMatchObject({
      status: 503,
    });
    expect(await database.db.select().from(users).where(eq(users.site, 'cli-totp'))).toHaveLength(0);
  });

  it('seals a good secret under the key and enables it; tells a bad one by its line and field', async () => {
    const ring = parseKeyRing(mintKeyRingText('k1')) as KeyRing;
    const result = await importFile({ target: target(ring), file: file(), dryRun: false, progress: quiet });
    expect(result.summary).toMatch(/^1 of 2 accounts imported/);
    expect(result.summary).toContain('line 2: invalid_request: totp/secret must be base32');
    const [account] = await database.db.select().from(users).where(eq(users.site, 'cli-totp'));
    const factors = await database.db.select().from(userFactors).where(eq(userFactors.userId, account!.id));
    expect(factors).toHaveLength(1);
    expect(factors[0]).toMatchObject({ type: 'totp', label: 'Phone', enabledAt: expect.any(Date) });
    expect(factors[0]!.secret).toMatch(/^v1\.k1\./);
    expect(open(ring, factors[0]!.secret!, factors[0]!.id)).toBe(SECRET);
    const audit = await database.db.select().from(auditLog).where(eq(auditLog.site, 'cli-totp'));
    expect(audit.map((a) => [a.operation, a.outcome]).sort()).toEqual([
      ['factor_add', 'factor enabled'],
      ['import', 'user created'],
    ]);
  });
});
