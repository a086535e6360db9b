// cli metadata-schema set/clear (issue 28, point 1): through runCommand, as the CLI and the admin
// socket run it, on an embedded database.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type Database, openPglite } from '../db/client.ts';
import { processes } from '../testing/processes.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { inlineSchemaFile, runCommand } from './commands.ts';

describe('cli metadata-schema', () => {
  let database: Database;
  const folder = mkdtempSync(join(tmpdir(), 'metadata-schema-'));
  const file = (name: string, text: string) => {
    const path = join(folder, name);
    writeFileSync(path, text);
    return path;
  };
  const schema = JSON.stringify({
    type: 'object',
    required: ['plan'],
    properties: { plan: { enum: ['free', 'pro'] } },
  });

  beforeAll(async () => {
    database = await openMigratedPglite();
    await database.db.execute(
      `insert into users (site, email, name, origin, metadata) values
         ('shop', 'a@example.com', 'A', 'api', '{"plan":"pro"}'),
         ('shop', 'b@example.com', 'B', 'api', '{}'),
         ('shop', 'c@example.com', 'C', 'external', '{}'),
         ('other', 'd@example.com', 'D', 'api', '{}')` as never,
    );
  }, 60_000);
  afterAll(async () => {
    await database?.close();
    rmSync(folder, { recursive: true, force: true });
  });

  it('sets a schema from a file, saying how many of the site’s accounts do not match it', async () => {
    // The CLI's process reads the file; the command (here, or in a server through its socket) gets its text.
    const argv = inlineSchemaFile(['metadata-schema', 'set', '--site', 'shop', file('plan.json', schema)]);
    expect(argv.slice(0, 4)).toEqual(['metadata-schema', 'set', '--site', 'shop']);
    expect(argv.slice(4)).toEqual(['--schema-json', schema]);
    const result = await runCommand(argv, database.db);
    expect(result).toEqual({
      code: 0,
      stdout:
        'Set the metadata schema of site shop; 1 of its 2 accounts do not match it: each must, at its next write of metadata.\n',
      stderr: '',
    });
    const rows = await database.db.execute('select site, schema from metadata_schemas' as never);
    expect(JSON.stringify(rows)).toContain('"plan"');
  });

  it('refuses a file that is not JSON, a schema that does not compile, and one that would fetch', async () => {
    for (const [name, text, why] of [
      ['bad.json', '{plan', /not JSON/],
      ['typo.json', '{"type":"objekt"}', /cannot be used/],
      ['remote.json', '{"$ref":"https://example.com/s.json"}', /cannot be used/],
    ] as const) {
      const result = await runCommand(
        inlineSchemaFile(['metadata-schema', 'set', '--site', 'shop', file(name, text)]),
        database.db,
      );
      expect(result.code, name).toBe(1);
      expect(result.stderr, name).toMatch(why);
    }
    const missing = await runCommand(['metadata-schema', 'set', '--site', 'shop'], database.db);
    expect(missing.code).toBe(2);
  });

  // Issue 41, F1: a site's schema runs on the event loop every site shares; what could not be
  // checked in bounded time is refused at set, saying what would be allowed, and nothing changes.
  it('refuses what could not be checked in bounded time, naming what is allowed', async () => {
    const chain: Record<string, unknown> = { a8: { type: 'string' } };
    for (let i = 7; i >= 0; i--)
      chain[`a${i}`] = { anyOf: [{ $ref: `#/$defs/a${i + 1}` }, { $ref: `#/$defs/a${i + 1}` }] };
    const cases: [string, unknown, RegExp][] = [
      [
        'unique-untyped.json',
        { properties: { tags: { type: 'array', uniqueItems: true } } },
        /uniqueItems at \/properties\/tags needs "items" with a scalar "type" \("string", "number", "integer", "boolean" or "null"/,
      ],
      [
        'unique-objects.json',
        { $defs: { t: { type: 'array', uniqueItems: true, items: { type: 'object' } } } },
        /uniqueItems at \/\$defs\/t needs "items" with a scalar "type"/,
      ],
      [
        'backreference.json',
        { properties: { x: { type: 'string', pattern: '^(a+)\\1$' } } },
        /linear time.*no backreferences/,
      ],
      ['lookahead.json', { patternProperties: { '^(?!x)': { type: 'string' } } }, /linear time.*lookahead/],
      [
        'chain.json',
        { $defs: chain, properties: { x: { $ref: '#/$defs/a0' } } },
        /against 1022 subschemas.*at most 64 are allowed/,
      ],
      [
        'loop.json',
        { $defs: { n: { anyOf: [{ $ref: '#/$defs/n' }] } }, $ref: '#/$defs/n' },
        /leads back to its own schema/,
      ],
    ];
    const before = await database.db.execute('select schema from metadata_schemas' as never);
    for (const [name, refused, why] of cases) {
      const result = await runCommand(
        inlineSchemaFile(['metadata-schema', 'set', '--site', 'shop', file(name, JSON.stringify(refused))]),
        database.db,
      );
      expect(result.code, name).toBe(1);
      expect(result.stderr, name).toMatch(why);
    }
    expect(await database.db.execute('select schema from metadata_schemas' as never)).toEqual(before);
    // What is allowed: uniqueItems over scalars, RE2 patterns (the backtracking attack's own
    // pattern included: RE2 runs it in linear time), a recursive schema that goes down the metadata.
    const allowed = {
      $defs: { node: { type: 'object', properties: { kids: { type: 'array', items: { $ref: '#/$defs/node' } } } } },
      properties: {
        plan: { enum: ['free', 'pro'] },
        tags: { type: 'array', uniqueItems: true, items: { type: ['string', 'integer'] } },
        code: { type: 'string', pattern: '^(a+)+$' },
        tree: { $ref: '#/$defs/node' },
      },
    };
    const result = await runCommand(
      inlineSchemaFile(['metadata-schema', 'set', '--site', 'shop', file('allowed.json', JSON.stringify(allowed))]),
      database.db,
    );
    expect(result.stderr).toBe('');
    expect(result.code).toBe(0);
  });

  it('counts the accounts in its own process, and exits (the schema worker does not hold it)', async () => {
    // The CLI's process on a database folder no server runs on: the checks run in its own schema
    // worker, which must let the process end once they are done (issue 41; it held it for ever).
    const procs = processes();
    const dataDir = mkdtempSync(join(tmpdir(), 'metadata-schema-cli-'));
    try {
      const db = await openPglite(dataDir);
      await db.migrate();
      await db.db.execute(
        `insert into users (site, email, name, origin, metadata) values
           ('shop', 'a@example.com', 'A', 'api', '{"plan":"pro"}'),
           ('shop', 'b@example.com', 'B', 'api', '{"plan":"gold"}')` as never,
      );
      await db.close();
      const result = await procs.cli(['metadata-schema', 'set', '--site', 'shop', file('cli.json', schema)], {
        DATA_DIR: dataDir,
      });
      expect(result.stderr).toBe('');
      expect(result.stdout).toMatch(/1 of its 2 accounts do not match it/);
      expect(result.code).toBe(0);
    } finally {
      procs.cleanup();
      rmSync(dataDir, { recursive: true, force: true });
    }
  }, 60_000);

  it('clears a site’s schema', async () => {
    const result = await runCommand(['metadata-schema', 'clear', '--site', 'shop'], database.db);
    expect(result.code).toBe(0);
    expect(result.stdout).toMatch(/Cleared the metadata schema of site shop/);
    const rows = (await database.db.execute('select count(*)::int as n from metadata_schemas' as never)) as unknown as {
      n: number;
    }[];
    expect(rows[0]!.n).toBe(0);
  });
});
