import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createToken, createTokenVerifier, hashToken, listTokens, mintToken } from '../auth/tokens.ts';
import { type Database, openPglite } from '../db/client.ts';
import { apiTokens, webhookEndpoints } from '../db/schema.ts';
import { MIGRATIONS_DIR } from '../resources.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { parseExpiry, planCommand, runCommand } from './commands.ts';

/** The committed migrations, as drizzle-kit's journal lists them. */
const MIGRATIONS = (
  JSON.parse(readFileSync(join(MIGRATIONS_DIR, 'meta', '_journal.json'), 'utf8')) as { entries: unknown[] }
).entries.length;

// A fixed "now", so that relative expiries have exact answers.
const NOW = new Date('2026-05-01T12:00:00.000Z');
const HOUR = 3_600_000;

describe('parseExpiry (token create --expires)', () => {
  it.each([
    ['90d', 90 * 24 * HOUR],
    ['12h', 12 * HOUR],
    ['30m', 30 * 60_000],
    ['1m', 60_000],
    ['99999d', 99_999 * 24 * HOUR],
  ])('reads %s as that long from now', (raw, ms) => {
    expect(parseExpiry(raw, NOW).getTime()).toBe(NOW.getTime() + ms);
  });

  it('defaults now to the current time', () => {
    const before = Date.now();
    const expiry = parseExpiry('1h').getTime();
    expect(expiry).toBeGreaterThanOrEqual(before + HOUR);
    expect(expiry).toBeLessThanOrEqual(Date.now() + HOUR);
  });

  it.each([
    ['a date, as midnight UTC', '2027-01-31', '2027-01-31T00:00:00.000Z'],
    ['an ISO 8601 time', '2027-01-31T08:30:00Z', '2027-01-31T08:30:00.000Z'],
    ['an ISO 8601 time with an offset', '2026-05-01T14:30:00+02:00', '2026-05-01T12:30:00.000Z'],
  ])('reads %s', (_, raw, iso) => {
    expect(parseExpiry(raw, NOW).toISOString()).toBe(iso);
  });

  it.each([
    ['a past date', '2020-01-01'],
    ['the present moment', NOW.toISOString()],
    ['a relative zero', '0d'],
    ['zero minutes', '0m'],
  ])('refuses %s: a token must not be born expired', (_, raw) => {
    expect(() => parseExpiry(raw, NOW)).toThrow('--expires must be in the future');
  });

  it.each([
    ['a number without unit', '90'],
    ['weeks', '2w'],
    ['an upper-case unit', '90D'],
    ['seconds', '30s'],
    ['six digits', '100000d'],
    ['a negative amount', '-1d'],
    ['a word', 'tomorrow'],
    ['an empty value', ''],
    ['a trailing space', '1d '],
    ['a day-first date', '31/01/2027'],
    ['a date followed by text', '2027-01-31garbage'],
    ['a month 13', '2027-13-01'],
    ['a day the month does not have', '2027-02-30'],
    ['a date and a time without the T, in no stated zone', '2027-01-31 12:00'],
    ['a time without a zone', '2027-01-31T12:00:00'],
  ])('refuses %s with the expected forms in the message', (_, raw) => {
    expect(() => parseExpiry(raw, NOW)).toThrow(/^--expires must be like 90d, 12h, 30m or a date like 2027-01-31/);
  });
});

describe('migrate', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openPglite(undefined);
  });
  afterAll(() => database?.close());

  it('says how many migrations it applied now and how many were there, on a fresh database and on a re-run', async () => {
    const first = await database.migrate();
    expect(first).toEqual({ applied: MIGRATIONS, already: 0 });
    expect(await runCommand(['migrate'], database.db, first)).toEqual({
      code: 0,
      stdout: `Applied ${MIGRATIONS} migrations (0 were already applied); the database is up to date.\n`,
      stderr: '',
    });

    const again = await database.migrate();
    expect(again).toEqual({ applied: 0, already: MIGRATIONS });
    const upToDate = `The database is up to date: ${MIGRATIONS} migrations already applied, none new.\n`;
    expect((await runCommand(['migrate'], database.db, again)).stdout).toBe(upToDate);
    // Through a running server's socket: it migrated at its start, the command applied nothing.
    expect((await runCommand(['migrate'], database.db)).stdout).toBe(upToDate);
  });

  it('refuses arguments, with its own usage', async () => {
    expect(await runCommand(['migrate', 'now'], database.db)).toMatchObject({
      code: 2,
      stderr: expect.stringMatching(/^cli migrate: takes no arguments\nUsage: cli migrate\n/),
    });
  });
});

describe('token revoke', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openMigratedPglite();
  });
  afterAll(() => database?.close());

  const revoke = (arg: string) => runCommand(['token', 'revoke', arg], database.db);
  const revokedAt = async (id: string) => (await listTokens(database.db)).find((t) => t.id === id)?.revokedAt;
  /** A stored token with a chosen display prefix, as two tokens may share one by chance. */
  async function tokenWithPrefix(prefix: string, revoked = false): Promise<string> {
    const [row] = await database.db
      .insert(apiTokens)
      .values({
        tokenHash: hashToken(mintToken()),
        prefix,
        label: 'same prefix',
        ...(revoked ? { revokedAt: new Date() } : {}),
      })
      .returning({ id: apiTokens.id });
    return row!.id;
  }

  it('revokes by the prefix token list shows, with or without its ellipsis', async () => {
    const plain = await createToken(database.db, { site: 'shop', scopes: ['read'], label: 'plain' });
    const copied = await createToken(database.db, { site: 'shop', scopes: ['read'], label: 'copied' });
    expect(await revoke(plain.prefix)).toEqual({
      code: 0,
      stdout: `Revoked token ${plain.id}. It is refused from its next request on.\n`,
      stderr: '',
    });
    expect(await revoke(`${copied.prefix}…`)).toMatchObject({ code: 0 });
    expect(await revokedAt(plain.id)).toBeInstanceOf(Date);
    expect(await revokedAt(copied.id)).toBeInstanceOf(Date);
    expect(await createTokenVerifier(database.db, []).verify(plain.token)).toBeUndefined();
  });

  it('still revokes by id', async () => {
    const created = await createToken(database.db, { site: 'shop', scopes: ['read'], label: 'by id' });
    expect(await revoke(created.id)).toMatchObject({ code: 0 });
    expect(await revokedAt(created.id)).toBeInstanceOf(Date);
  });

  it('refuses an ambiguous prefix, listing the matching ids, and revokes none of them', async () => {
    const ids = [await tokenWithPrefix('ua_twinsAA'), await tokenWithPrefix('ua_twinsAA')];
    const result = await revoke('ua_twinsAA');
    expect(result.code).toBe(1);
    expect(result.stderr).toBe(
      `2 active tokens have the prefix ua_twinsAA; revoke one by its id:\n  ${ids[0]}\n  ${ids[1]}\n`,
    );
    for (const id of ids) expect(await revokedAt(id)).toBeNull();
  });

  it('does not count a revoked token as a match', async () => {
    await tokenWithPrefix('ua_onceBBB', true);
    const active = await tokenWithPrefix('ua_onceBBB');
    expect(await revoke('ua_onceBBB')).toMatchObject({ code: 0, stdout: expect.stringContaining(active) });
  });

  it('says when no active token has the prefix or the id', async () => {
    expect(await revoke('ua_nothing')).toEqual({
      code: 1,
      stdout: '',
      stderr: 'No active token has the prefix ua_nothing.\n',
    });
    const id = '0198c6a4-0000-7000-8000-000000000001';
    expect(await revoke(id)).toEqual({ code: 1, stdout: '', stderr: `No active token has the id ${id}.\n` });
  });

  it.each([
    ['nothing', []],
    ['a shorter prefix', ['ua_abc']],
    ['a whole token', [mintToken()]],
    ['an id with a typo', ['0198c6a4-0000-7000-8000-00000000000g']],
  ])('refuses %s with one line and its own usage, echoing nothing it was given', async (_, args) => {
    const result = await runCommand(['token', 'revoke', ...args], database.db);
    expect(result.code).toBe(2);
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines[0]).toBe('cli token revoke: needs the id or the prefix of a token, as token list shows them');
    expect(lines[1]).toBe('Usage: cli token revoke ID|PREFIX');
    expect(result.stderr).not.toMatch(/token create|audit tail|DATABASE_URL/);
    for (const arg of args) expect(result.stderr).not.toContain(arg);
  });
});

describe('what the database holds, printed', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openMigratedPglite();
  });
  afterAll(() => database?.close());

  it('is escaped cell by cell: a label cannot set the title or forge a row', async () => {
    // Written as any other program with the database could write it: the CLI refuses such a label.
    const label = '\u001b]0;pwned\u0007\nua_forged  shop  \u009b2J\u202e';
    await createToken(database.db, { site: 'shop', scopes: ['read'], label });
    const { stdout } = await runCommand(['token', 'list'], database.db);
    // biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
    expect(stdout).not.toMatch(/[\u0000-\u0009\u000b-\u001f\u007f-\u009f\u202e]/);
    expect(stdout).toContain('\\u001b]0;pwned\\u0007\\u000aua_forged  shop  \\u009b2J\\u202e');
    expect(stdout.trimEnd().split('\n')).toHaveLength(3); // the header, the token, the note
  });
});

describe('usage errors', () => {
  const stderrOf = (argv: string[]) => {
    const planned = planCommand(argv);
    if (typeof planned === 'function') throw new Error(`${argv.join(' ')} was accepted`);
    expect(planned.code).toBe(2);
    return planned.stderr;
  };

  it("say what is wrong in one line, then that command's usage only", () => {
    const stderr = stderrOf(['token', 'create', '--site', 'shop', '--scopes', 'admin', '--label', 'x']);
    const [what, usage, ...rest] = stderr.trimEnd().split('\n');
    expect(what).toBe(
      'cli token create: --scopes must be a comma-separated list of read, write, verify, export, events, impersonate (got "admin")',
    );
    expect(usage).toMatch(/^Usage: cli token create --site NAME /);
    expect(rest.join('\n')).toMatch(/^ {6}Prints a new token, once\./);
    expect(stderr).not.toMatch(/token list|token revoke|audit tail|migrate/);
    expect(stderrOf(['audit', 'tail', '--limit', '0'])).toMatch(
      /^cli audit tail: --limit must be .*\nUsage: cli audit tail /,
    );
  });

  it('refuse an option no command takes, a value on a switch, and an option where a value should be', () => {
    expect(stderrOf(['token', 'list', '--frob'])).toMatch(
      /^cli token list: unknown option --frob\nUsage: cli token list /,
    );
    expect(stderrOf(['token', 'list', '--json=yes'])).toMatch(/^cli token list: --json takes no value\n/);
    expect(stderrOf(['token', 'create', '--site', 'shop', '--scopes', 'read', '--label', '--expires', '90d'])).toMatch(
      /^cli token create: --label needs a value\n/,
    );
  });

  it('show the family of an unknown subcommand, and every synopsis for an unknown command', () => {
    const token = stderrOf(['token', 'frob']);
    expect(token).toMatch(/^cli: unknown command: token frob\nUsage:\n {2}cli token create /);
    expect(token).toContain('  cli token revoke ID|PREFIX');
    expect(token).not.toMatch(/audit tail|migrate/);

    const unknown = stderrOf(['frobnicate']);
    expect(unknown.split('\n')[0]).toBe('cli: unknown command: frobnicate');
    for (const synopsis of ['cli token create --site', 'cli token list', 'cli audit tail', 'cli migrate'])
      expect(unknown).toContain(synopsis);
    expect(unknown).not.toContain('Prints a new token');
  });
});

describe('console', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openMigratedPglite();
  }, 60_000);
  afterAll(() => database?.close());

  it('mints a token for the site, read, write and events for 8 hours, and prints the address that carries it in the fragment', async () => {
    const before = Date.now();
    const result = await runCommand(['console', '--site', 'shop', '--url', 'http://127.0.0.1:3917'], database.db);
    expect(result.code).toBe(0);
    const token = /^ {2}http:\/\/127\.0\.0\.1:3917\/console#token=(ua_[\w-]+)$/m.exec(result.stdout)?.[1];
    expect(token, result.stdout).toBeDefined();
    expect(result.stdout).toMatch(
      /^Created token [\da-f-]+ "console" for site shop \(read,write,events\), expires \S+Z\.$/m,
    );
    const info = await createTokenVerifier(database.db, []).verify(token!);
    expect(info).toMatchObject({ site: 'shop', scopes: ['read', 'write', 'events'] });
    const stored = (await listTokens(database.db)).find((t) => t.id === info!.id)!;
    expect(stored.label).toBe('console');
    expect(stored.expiresAt!.getTime()).toBeGreaterThanOrEqual(before + 8 * HOUR);
    expect(stored.expiresAt!.getTime()).toBeLessThanOrEqual(Date.now() + 8 * HOUR);
  });

  it('--as names the person: the label is the name as given; a running server gives its own address', async () => {
    const result = await runCommand(
      ['console', '--site', 'shop', '--as', ' Ada (support) '],
      database.db,
      undefined,
      undefined,
      {
        webhookAllowPrivate: false,
        consoleUrl: () => 'http://127.0.0.1:4711',
      },
    );
    expect(result.code, result.stderr).toBe(0);
    const token = /^ {2}http:\/\/127\.0\.0\.1:4711\/console#token=(ua_[\w-]+)$/m.exec(result.stdout)?.[1];
    const info = await createTokenVerifier(database.db, []).verify(token!);
    const stored = (await listTokens(database.db)).find((t) => t.id === info!.id)!;
    // As given, nothing appended (issue 64: it was "Ada (support) (console)").
    expect(stored.label).toBe('Ada (support)');
    for (const bad of ['', 'a\u0007b', 'x'.repeat(101)]) {
      expect((await runCommand(['console', '--site', 'shop', '--as', bad], database.db)).code, bad).toBe(2);
    }
  });

  it('takes the scopes and a shorter expiry given', async () => {
    const result = await runCommand(
      ['console', '--site', 'shop', '--scopes', 'read', '--expires', '30m', '--url', 'https://accounts.example.com'],
      database.db,
    );
    const token = /https:\/\/accounts\.example\.com\/console#token=(\S+)/.exec(result.stdout)?.[1];
    expect(await createTokenVerifier(database.db, []).verify(token!)).toMatchObject({ scopes: ['read'] });
  });

  it.each([
    ['more than a day', ['--expires', '25h'], '--expires must be at most 24h for a console token'],
    ['an unknown scope', ['--scopes', 'read,admin'], '--scopes must be a comma-separated list'],
    ['no site', [], '--site'],
  ])('refuses %s, minting nothing', async (_, extra, message) => {
    const count = (await listTokens(database.db)).length;
    const site = extra.length === 0 ? [] : ['--site', 'shop'];
    const result = await runCommand(['console', ...site, ...extra], database.db);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(message);
    expect((await listTokens(database.db)).length).toBe(count);
  });
});

describe('webhook commands, by the id or its first characters (as the README and webhook list show them)', () => {
  let database: Database;
  beforeAll(async () => {
    database = await openMigratedPglite();
  });
  afterAll(() => database?.close());

  const settings = { webhookAllowPrivate: true };
  const add = async () => {
    const added = await runCommand(
      ['webhook', 'add', '--site', 'shop', '--url', 'http://127.0.0.1:9/hook'],
      database.db,
      undefined,
      undefined,
      settings,
    );
    return /Added webhook ([0-9a-f-]{36})/.exec(added.stdout)![1]!;
  };

  it('replays a webhook named by a unique prefix of its id, with or without the ellipsis a copy brings', async () => {
    const id = await add();
    for (const given of [id.slice(0, 8), `${id.slice(0, 8)}…`, id]) {
      const result = await runCommand(['webhook', 'replay', given, '--from', '1'], database.db);
      expect(result).toMatchObject({ code: 0 });
      expect(result.stdout).toContain(`to webhook ${id}`);
    }
  });

  it('says so when a prefix names no webhook or several, and changes nothing', async () => {
    const none = await runCommand(['webhook', 'replay', 'ffffffff', '--from', '1'], database.db);
    expect(none.code).toBe(1);
    expect(none.stderr).toContain('No webhook has an id starting with ffffffff');
    // Two webhooks whose ids share their first eight digits, as two may by chance.
    const twins = ['abcdef01-0000-4000-8000-000000000001', 'abcdef01-0000-4000-8000-000000000002'];
    await database.db.insert(webhookEndpoints).values(
      twins.map((id) => ({
        id,
        site: 'shop',
        url: 'https://example.com/h',
        types: ['user.*'],
        secret: 'whsec_x',
        fannedSeq: 0,
      })),
    );
    const several = await runCommand(['webhook', 'remove', 'abcdef01'], database.db);
    expect(several.code).toBe(1);
    expect(several.stderr).toContain('2 webhooks have an id starting with abcdef01');
    for (const id of twins) expect(several.stderr).toContain(id);
    const left = await database.db.select().from(webhookEndpoints);
    expect(left.filter((e) => twins.includes(e.id))).toHaveLength(2);
    // Fewer than 4 characters is no prefix: a usage error, as before.
    expect((await runCommand(['webhook', 'remove', 'abc'], database.db)).code).toBe(2);
  });

  it('refuses a private URL naming WEBHOOK_ALLOW_PRIVATE, the setting that allows it', async () => {
    const result = await runCommand(
      ['webhook', 'add', '--site', 'shop', '--url', 'http://127.0.0.1:9/hook'],
      database.db,
    );
    expect(result.code).toBe(2);
    // In the error itself, not only in the usage text below it.
    expect(result.stderr.split('\n')[0]).toContain('WEBHOOK_ALLOW_PRIVATE=true');
  });
});
