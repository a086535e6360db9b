// Bringing accounts over through the client: per-row answers, foreign hashes verified and then
// rehashed, dry runs, idempotency, and no email ever imported twice. Server targets only.
import { pbkdf2Sync } from 'node:crypto';
import { readFileSync } from 'node:fs';
import type { components } from '@user-accounts/client';
import { generateSecret, generateSync } from 'otplib';
import { describe, expect, it } from 'vitest';
import { useTarget } from './harness.ts';
import { type TargetSpec, TEST_HASH_FORMAT } from './targets.ts';

type ImportUser = components['schemas']['ImportUser'];
type ImportItem = components['schemas']['ImportItem'];

interface Fixture {
  format: string;
  password: string;
  hash: string;
  sharesFirst72?: string;
  salt?: string;
  firebase?: { signerKey: string; saltSeparator: string; rounds: number; memCost: number };
}
// Made by each format's reference tool (packages/server/src/passwords/fixtures/make-fixtures.sh);
// Firebase's is the sample of Firebase's own README, with its project parameters.
const FIXTURES = JSON.parse(
  readFileSync(new URL('../../server/src/passwords/fixtures/foreign-hashes.json', import.meta.url), 'utf8'),
) as Fixture[];
export const FOREIGN_HASHES = FIXTURES.filter((f) => f.format !== 'firebase-scrypt');
export const FIREBASE_SAMPLE = FIXTURES.find((f) => f.format === 'firebase-scrypt')!;

export function defineImportSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: import`, () => {
    const h = useTarget(spec);
    const importUsers = (users: ImportUser[], options: { dryRun?: boolean; key?: string } = {}) =>
      h.client.POST('/api/1/user/import', {
        body: { users, ...(options.dryRun !== undefined && { dryRun: options.dryRun }) },
        params: { header: options.key === undefined ? {} : { 'Idempotency-Key': options.key } },
      });
    const countSite = async (emails: string[]) =>
      Number(
        (
          await h.target.sql('select count(*)::int as n from users where lower(email) = any($1::text[])', [
            emails.map((e) => e.toLowerCase()),
          ])
        )[0]!.n,
      );
    const created = (item: ImportItem | undefined) => (item !== undefined && '_userId' in item ? item._userId : '');

    it('imports every hash format made by its reference tool; verify accepts its password, then rehashes it to argon2id (never down) with the ETag unchanged', async () => {
      const rows = FOREIGN_HASHES.map((f) => ({
        email: h.uniqueEmail(f.format),
        name: f.format,
        passwordHash: f.hash,
      }));
      const { data, response } = await importUsers(rows);
      expect(response.status).toBe(200);
      expect(data?.result).toMatchObject({ status: 'import done', created: rows.length, failed: 0 });
      for (const [i, fixture] of FOREIGN_HASHES.entries()) {
        const id = created(data!.result.items[i]);
        expect(data!.result.items[i]).toEqual({ index: i, _userId: id, status: 'user created' });
        expect((await h.rowOf(id))!.password_hash).toBe(fixture.hash);
        const before = await h.client.GET('/api/1/user/get', { params: { query: { _userId: id } } });
        const wrong = await h.client.POST('/api/1/user/verify', {
          body: { email: rows[i]!.email, password: `!${fixture.password}` },
        });
        expect(wrong.response.status, fixture.hash).toBe(422);
        const right = await h.client.POST('/api/1/user/verify', {
          body: { email: rows[i]!.email, password: fixture.password },
        });
        expect(right.response.status, fixture.hash).toBe(200);
        // Rehashed at the server's cost of new hashes (the test profile's: m=1024, t=1), but never
        // down: an argon2id hash costing at least that, in memory and in passes, is kept.
        const cost = /^\$argon2id\$v=19\$m=(\d+),t=(\d+),/.exec(fixture.hash);
        const kept = cost !== null && Number(cost[1]) >= 1024 && Number(cost[2]) >= 1;
        if (kept) expect((await h.rowOf(id))!.password_hash, fixture.hash).toBe(fixture.hash);
        else expect(String((await h.rowOf(id))!.password_hash), fixture.hash).toMatch(TEST_HASH_FORMAT);
        const after = await h.client.GET('/api/1/user/get', { params: { query: { _userId: id } } });
        expect(after.response.headers.get('etag')).toBe(before.response.headers.get('etag'));
        expect(after.data?.result.updatedAt).toBe(before.data?.result.updatedAt);
        // Rehashed: the same password goes on working.
        const again = await h.client.POST('/api/1/user/verify', { body: { _userId: id, password: fixture.password } });
        expect(again.response.status).toBe(200);
      }
    });

    it('checks an imported hash against the password as sent when the other system did not normalize it', async () => {
      // Found by review: the server normalized the password before the hasher could try it as sent.
      const typed = 'Cafe\u0301 au lait, sans sucre'; // "é" as e + a combining accent (NFD)
      const hash = pbkdf2Sync(typed, 'nfdsalt', 1000, 32, 'sha256').toString('base64');
      const email = h.uniqueEmail('nfd');
      await importUsers([{ email, name: 'Nfd', passwordHash: `pbkdf2_sha256$1000$nfdsalt$${hash}` }]);
      const verify = (password: string) => h.client.POST('/api/1/user/verify', { body: { email, password } });
      expect((await verify(typed)).response.status).toBe(200);
      // Rehashed to ours, of the NFC form: from now on either form is the same password.
      expect((await verify(typed.normalize('NFC'))).response.status).toBe(200);
      expect((await verify(typed)).response.status).toBe(200);
    });

    it("keeps bcrypt's 72-byte rule until the rehash, and the whole password from then on", async () => {
      const long = FOREIGN_HASHES.find((f) => f.format === 'bcrypt-long')!;
      const email = h.uniqueEmail('bcrypt-long');
      await importUsers([{ email, name: 'Long Password', passwordHash: long.hash }]);
      const verify = (password: string) => h.client.POST('/api/1/user/verify', { body: { email, password } });
      expect((await verify(long.password)).response.status).toBe(200);
      expect((await verify(long.sharesFirst72!)).response.status).toBe(422);
      expect((await verify(long.password)).response.status).toBe(200);
    });

    it("imports Firebase's modified scrypt with the project's parameters given once, and refuses its salt without them", async () => {
      const firebase = FIREBASE_SAMPLE;
      const email = h.uniqueEmail('firebase');
      const row = { email, name: 'Firebase User', passwordHash: firebase.hash, passwordSalt: firebase.salt! };
      const without = await importUsers([row]);
      expect(without.data?.result.items[0]).toMatchObject({
        index: 0,
        error: { code: 'invalid_password_hash', errors: [{ pointer: '/users/0/passwordSalt' }] },
      });
      const { data } = await h.client.POST('/api/1/user/import', {
        body: { users: [row], firebaseScrypt: firebase.firebase! },
      });
      const id = created(data!.result.items[0]);
      expect(String((await h.rowOf(id))!.password_hash)).toMatch(/^\$firebase-scrypt\$r=8,m=14\$/);
      const wrong = await h.client.POST('/api/1/user/verify', { body: { email, password: `${firebase.password}!` } });
      expect(wrong.response.status).toBe(422);
      const right = await h.client.POST('/api/1/user/verify', { body: { email, password: firebase.password } });
      expect(right.response.status).toBe(200);
      expect(String((await h.rowOf(id))!.password_hash)).toMatch(/^\$argon2id\$/);
    });

    it('answers each row at its index: created, invalid, weak, unusable hash, repeated in the batch, already in use', async () => {
      const existing = await h.createUser();
      const fresh = h.uniqueEmail('fresh');
      const plain = h.uniqueEmail('plain');
      const rows = [
        { email: fresh, name: 'Fresh', passwordHash: FOREIGN_HASHES[0]!.hash },
        { email: 'not an email', name: 'Bad', passwordHash: FOREIGN_HASHES[0]!.hash },
        { email: h.uniqueEmail('weak'), name: 'Weak', password: 'password123' },
        { email: h.uniqueEmail('md5'), name: 'Md5', passwordHash: '5f4dcc3b5aa765d61d8327deb882cf99' },
        { email: `  ${fresh.toUpperCase()} `, name: 'Again', passwordHash: FOREIGN_HASHES[0]!.hash },
        { email: existing.email.toLowerCase(), name: 'Taken', passwordHash: FOREIGN_HASHES[0]!.hash },
        { email: plain, name: 'Plain', password: 'a long and unusual passphrase' },
        { email: h.uniqueEmail('both'), name: 'Both', password: 'a long and unusual passphrase', passwordHash: 'x' },
      ];
      const { data, response } = await importUsers(rows);
      expect(response.status).toBe(200);
      const items = data!.result.items;
      expect(data!.result).toMatchObject({ status: 'import done', created: 2, failed: 6 });
      expect(items.map((item) => item.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
      const codes = items.map((item) => ('error' in item ? item.error.code : item.status));
      expect(codes).toEqual([
        'user created',
        'invalid_request',
        'weak_password',
        'invalid_password_hash',
        'email_taken',
        'email_taken',
        'user created',
        'invalid_request',
      ]);
      const pointers = items.map((item) => ('error' in item ? item.error.errors.map((e) => e.pointer) : []));
      expect(pointers).toEqual([
        [],
        ['/users/1/email'],
        ['/users/2/password'],
        ['/users/3/passwordHash'],
        ['/users/4/email'],
        ['/users/5/email'],
        [],
        ['/users/7/password'],
      ]);
      expect(await countSite([fresh])).toBe(1);
      expect(await countSite([existing.email])).toBe(1);
      // A plain password is hashed as on create, and works.
      const login = await h.client.POST('/api/1/user/verify', {
        body: { email: plain, password: 'a long and unusual passphrase' },
      });
      expect(login.response.status).toBe(200);
      // Imported accounts are in reach of every operation.
      const read = await h.client.GET('/api/1/user/get', { params: { query: { email: plain } } });
      expect(read.data?.result).toMatchObject({ _userId: created(items[6]), name: 'Plain', disabled: false });
      const audit = await h.target.sql(
        `select count(*)::int as n from audit_log where operation = 'import' and outcome = 'user created' and user_id = any($1::text[])`,
        [[created(items[0]), created(items[6])]],
      );
      expect(audit[0]!.n).toBe(2);
    });

    it('checks everything in a dry run, emails in use included, and writes nothing', async () => {
      const existing = await h.createUser();
      const emails = [h.uniqueEmail('dry'), h.uniqueEmail('dry')];
      const { data, response } = await importUsers(
        [
          { email: emails[0]!, name: 'Dry', passwordHash: FOREIGN_HASHES[0]!.hash },
          { email: emails[1]!, name: 'Dry', password: 'a long and unusual passphrase' },
          { email: existing.email, name: 'Taken', passwordHash: FOREIGN_HASHES[0]!.hash },
        ],
        { dryRun: true },
      );
      expect(response.status).toBe(200);
      expect(data?.result).toMatchObject({ status: 'import checked', created: 2, failed: 1 });
      expect(data?.result.items.slice(0, 2)).toEqual([
        { index: 0, status: 'user would be created' },
        { index: 1, status: 'user would be created' },
      ]);
      expect(await countSite(emails)).toBe(0);
    });

    it('replays an answer for its Idempotency-Key, and imports once', async () => {
      const email = h.uniqueEmail('idem');
      const key = `import-${email}`;
      const rows = [{ email, name: 'Once', passwordHash: FOREIGN_HASHES[0]!.hash }];
      const first = await importUsers(rows, { key });
      const second = await importUsers(rows, { key });
      expect(second.response.headers.get('idempotent-replayed')).toBe('true');
      expect(second.data).toEqual(first.data);
      expect(await countSite([email])).toBe(1);
    });

    it('never creates two accounts for one email, across 20 imports of overlapping batches at once', async () => {
      const pool = Array.from({ length: 30 }, () => h.uniqueEmail('race'));
      const batches = Array.from({ length: 20 }, (_, b) =>
        Array.from({ length: 10 }, (_, i) => ({
          email: pool[(b * 7 + i * 3) % pool.length]!,
          name: `Race ${b}`,
          passwordHash: FOREIGN_HASHES[0]!.hash,
        })),
      );
      const answers = await Promise.all(batches.map((batch) => importUsers(batch)));
      for (const answer of answers) expect(answer.response.status).toBe(200);
      const createdTotal = answers.reduce((sum, a) => sum + a.data!.result.created, 0);
      const used = new Set(batches.flat().map((row) => row.email.toLowerCase()));
      const rows = await h.target.sql(
        'select lower(email) as email, count(*)::int as n from users where lower(email) = any($1::text[]) group by 1',
        [[...used]],
      );
      expect(rows.every((row) => row.n === 1)).toBe(true);
      expect(rows.length).toBe(used.size);
      expect(createdTotal).toBe(used.size);
    });

    it('takes 1,000 rows in one call (a body over 64 KiB), and refuses 1,001 as a whole', async () => {
      const rows = Array.from({ length: 1000 }, (_, i) => ({
        email: h.uniqueEmail(`bulk${i}`),
        name: `Bulk ${i}`,
        address: 'A street with a long enough name to make the body larger',
        passwordHash: FOREIGN_HASHES[0]!.hash,
      }));
      expect(JSON.stringify({ users: rows }).length).toBeGreaterThan(64 * 1024);
      const { data, response } = await importUsers(rows);
      expect(response.status).toBe(200);
      expect(data?.result.created).toBe(1000);
      expect(await countSite(rows.map((r) => r.email))).toBe(1000);

      const tooMany = [...rows, { ...rows[0]!, email: h.uniqueEmail('one-more') }];
      const refused = await importUsers(tooMany);
      expect(refused.response.status).toBe(400);
      expect(refused.error?.errors?.[0]?.pointer).toBe('/users');
    });

    it.each([
      ['no users', {}],
      ['no rows', { users: [] }],
      ['users that is not an array', { users: { email: 'a@example.com' } }],
      ['an unknown top-level field', { users: [{ email: 'a@example.com', name: 'A', password: 'x' }], force: true }],
      ['a body that is an array', [{ email: 'a@example.com' }]],
    ])('refuses %s as a whole with 400 invalid_request', async (_, body) => {
      const response = await h.raw('/api/1/user/import', {
        method: 'POST',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify(body),
      });
      expect(response.status).toBe(400);
      expect(((await response.json()) as { code: string }).code).toBe('invalid_request');
    });
  });

  // Issue 29, point 4: a migration keeps its users' authenticator apps working.
  describe(`${spec.name}: import with TOTP secrets`, () => {
    const h = useTarget(spec);
    let sites = 0;
    const newSite = async () => {
      const site = `import-totp-${Date.now().toString(36)}-${sites++}`;
      const { token } = await h.target.createToken({
        site,
        scopes: ['read', 'write', 'verify', 'events'],
        label: 'import totp',
      });
      return h.clientFor(token);
    };
    /** A code as the person's authenticator app shows it now: otplib, from the secret they hold. */
    const appCode = (secret: string) => generateSync({ secret, epoch: Date.now() / 1000 });
    const PASSWORD = 'a long and unusual passphrase';
    const created = (item: ImportItem | undefined) => (item !== undefined && '_userId' in item ? item._userId : '');
    const countSite = async (emails: string[]) =>
      (
        await h.target.sql('select count(*)::int as n from users where lower(email) = any($1::text[])', [
          emails.map((e) => e.toLowerCase()),
        ])
      )[0]!.n;

    it('enables an imported secret at once: the login asks for the second step, and a code of the app completes it', async () => {
      const client = await newSite();
      const secret = generateSecret({ length: 20 });
      const email = h.uniqueEmail('totp');
      // As another system may export it: lower case, padded.
      const given = `${secret.toLowerCase()}${'='.repeat((8 - (secret.length % 8)) % 8)}`;
      const { data, response } = await client.POST('/api/1/user/import', {
        body: { users: [{ email, name: 'Grace', password: PASSWORD, totp: { secret: given, label: 'Phone' } }] },
        // The answer is kept for the key, in the database: it must hold no secret either.
        params: { header: { 'Idempotency-Key': `totp-${email}` } },
      });
      expect(response.status).toBe(200);
      expect(data?.result).toMatchObject({ created: 1, failed: 0 });
      const userId = created(data!.result.items[0]);
      // The answer carries nothing of the secret.
      expect(JSON.stringify(data)).not.toContain(secret.slice(0, 16));

      const listed = await client.GET('/api/1/user/factor/list', { params: { query: { _userId: userId } } });
      expect(listed.data?.result).toEqual({
        factors: [
          {
            factorId: expect.any(String),
            type: 'totp',
            label: 'Phone',
            createdAt: expect.any(String),
            lastUsedAt: null,
          },
        ],
        recoveryCodesLeft: 0,
      });

      const first = await client.POST('/api/1/user/verify', { body: { email, password: PASSWORD } });
      expect(first.response.status).toBe(403);
      expect(first.error?.code).toBe('second_factor_required');
      const { ticket, factors } = first.error as { ticket: string; factors: string[] };
      expect(factors).toEqual(['totp']);
      const done = await client.POST('/api/1/user/factor/verify', { body: { ticket, code: appCode(secret) } });
      expect(done.response.status).toBe(200);
      expect(done.data?.result).toEqual({ _userId: userId, status: 'second factor verified' });

      // Sealed at rest: no form of the secret in the factor's row.
      const rows = await h.target.sql('select * from user_factors where user_id = $1', [userId]);
      expect(rows).toHaveLength(1);
      expect(String(rows[0]!.secret)).toMatch(/^v1\.[A-Za-z0-9_-]+\./);
      const dump = JSON.stringify(rows).toUpperCase();
      expect(dump).not.toContain(secret.slice(0, 16));
      // Nor anywhere else the import wrote: the kept answer, the audit trail, the events.
      for (const table of ['idempotency_keys', 'audit_log', 'event_queue', 'events']) {
        const all = JSON.stringify(await h.target.sql(`select * from ${table}`)).toUpperCase();
        expect(all, table).not.toContain(secret.slice(0, 16));
      }

      // Audited and told as an enabled factor is, without the secret.
      const audit = await client.GET('/api/1/audit', { params: { query: { _userId: userId } } });
      expect(audit.data!.result.entries.map((e) => [e.operation, e.status, e.outcome])).toEqual([
        ['factor_verify', 200, 'second factor verified'],
        ['verify', 403, 'second_factor_required'],
        ['factor_add', 200, 'factor enabled'],
        ['import', 200, 'user created'],
      ]);
      let events: { type: string; data: unknown }[] = [];
      for (let i = 0; i < 50 && events.length < 2; i++) {
        const read = await client.GET('/api/1/events', { params: { query: { limit: 100, wait: 1 } } });
        events = read.data!.result.events;
      }
      expect(events.map((e) => e.type)).toEqual(['user.created', 'user.factor_added']);
      expect(events[1]!.data).toEqual({ _userId: userId, factorId: rows[0]!.id, factorType: 'totp' });
      expect(JSON.stringify(events).toUpperCase()).not.toContain(secret.slice(0, 16));
    });

    it('refuses a secret that is not base32 of whole bytes at its pointer, writing nothing for that row only', async () => {
      const client = await newSite();
      const good = generateSecret({ length: 20 });
      const secrets = [
        'JBSWY3DPEHPK3PX1', // 1 is not base32
        'JBSWY3DPEHPK3PX', // 15 characters: under 80 bits
        'JBSWY3DPEHPK3PXPJ', // 17 characters: 85 bits, not whole bytes
        'JBSWY3DPEHPK3PXPJB=', // padding that does not fill the group of 8
        good,
      ];
      const rows = secrets.map((secret, i) => ({
        email: h.uniqueEmail(`totp-bad${i}`),
        name: 'Bad',
        password: PASSWORD,
        totp: { secret },
      }));
      const { data, response } = await client.POST('/api/1/user/import', { body: { users: rows } });
      expect(response.status).toBe(200);
      expect(data?.result).toMatchObject({ created: 1, failed: 4 });
      const items = data!.result.items;
      for (const i of [0, 1, 2, 3]) {
        const item = items[i]!;
        expect('error' in item && item.error.code).toBe('invalid_request');
        expect('error' in item && item.error.errors.map((e) => e.pointer)).toEqual([`/users/${i}/totp/secret`]);
        expect(await countSite([rows[i]!.email])).toBe(0);
      }
      expect(items[4]).toMatchObject({ index: 4, status: 'user created' });
      const factors = await h.target.sql(
        'select count(*)::int as n from user_factors f join users u on u.id = f.user_id where lower(u.email) = any($1::text[])',
        [rows.map((r) => r.email.toLowerCase())],
      );
      expect(factors[0]!.n).toBe(1);
    });

    it('mints no recovery codes at import; the first factor the account confirms later brings them', async () => {
      const client = await newSite();
      const email = h.uniqueEmail('totp-codes');
      const { data } = await client.POST('/api/1/user/import', {
        body: { users: [{ email, name: 'Codes', password: PASSWORD, totp: { secret: generateSecret() } }] },
      });
      const userId = created(data!.result.items[0]);
      const added = (await client.POST('/api/1/user/factor/totp', { body: { _userId: userId } })).data!.result;
      const confirmed = await client.POST('/api/1/user/factor/confirm', {
        body: { _userId: userId, factorId: added.factorId, code: appCode(added.secret) },
      });
      expect(confirmed.data?.result.recoveryCodes).toHaveLength(10);
      const listed = await client.GET('/api/1/user/factor/list', { params: { query: { _userId: userId } } });
      expect(listed.data?.result.factors).toHaveLength(2);
      expect(listed.data?.result.recoveryCodesLeft).toBe(10);
    });
  });
}
