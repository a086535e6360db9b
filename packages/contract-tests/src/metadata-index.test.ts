// The metadata filter's index is scoped by site (issue 41, F7): a value that another site's
// accounts hold by the thousand is not read, nor weighed, when a site counts or lists it. Shown by
// the plans of the very queries the server sends, run (EXPLAIN ANALYZE): a value the site holds
// nowhere reads no row, where the index on the metadata alone (and its statistics) read thousands.
import { type Database, openPostgres } from '@user-accounts/server/db';
import { countQuery, fewMatchesPage, keyset, listQuery } from '@user-accounts/server/listing';
import { openMigratedPglite } from '@user-accounts/server/testing/templates';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migratedPostgresDatabase, postgresUnavailable } from './targets.ts';

const postgresSkip = await postgresUnavailable();
const OTHERS = 50_000;
const SHOP = 10_000;

interface PlanNode {
  'Node Type': string;
  'Index Name'?: string;
  'Index Cond'?: string;
  'Actual Rows'?: number;
  'Actual Loops'?: number;
  'Rows Removed by Filter'?: number;
  'Rows Removed by Index Recheck'?: number;
  Plans?: PlanNode[];
}

describe.each([
  { database: 'the embedded database', skip: undefined },
  { database: 'PostgreSQL', skip: postgresSkip },
])('the metadata filter on $database', ({ database: name, skip }) => {
  let database: Database | undefined;
  let drop: (() => Promise<void>) | undefined;

  beforeAll(async () => {
    if (skip !== undefined) return;
    if (name === 'PostgreSQL') {
      const migrated = await migratedPostgresDatabase();
      drop = migrated.drop;
      database = await openPostgres(migrated.url, { max: 1 });
    } else {
      database = await openMigratedPglite();
    }
    // Another site whose every account holds {"plan": "pro"}; shop's accounts hold other plans.
    await database.sql.unsafe(
      `insert into users (site, email, name, origin, metadata, created_at)
       select case when i <= ${OTHERS} then 'other' else 'shop' end, 'user' || i || '@example.com', 'User', 'api',
         case when i <= ${OTHERS} then '{"plan": "pro"}'::jsonb
              else jsonb_build_object('plan', case when i % 10 = 0 then 'team' else 'free' end) end,
         timestamptz '2026-01-01' + i * interval '1 second'
       from generate_series(1, ${OTHERS + SHOP}) i`,
    );
    await database.sql.unsafe('analyze users');
  }, 120_000);
  afterAll(async () => {
    await database?.close();
    await drop?.();
  });

  /** Every node of the query's plan as run, with the rows it read. */
  async function run(query: { toSQL(): { sql: string; params: unknown[] } }): Promise<PlanNode[]> {
    const { sql: text, params } = query.toSQL();
    const [row] = await database!.sql.unsafe(`explain (analyze, format json) ${text}`, params as never[]);
    const nodes: PlanNode[] = [];
    const walk = (node: PlanNode) => {
      nodes.push(node);
      for (const child of node.Plans ?? []) walk(child);
    };
    walk((row!['QUERY PLAN'] as { Plan: PlanNode }[])[0]!.Plan);
    return nodes;
  }
  const read = (node: PlanNode) =>
    ((node['Actual Rows'] ?? 0) +
      (node['Rows Removed by Filter'] ?? 0) +
      (node['Rows Removed by Index Recheck'] ?? 0)) *
    (node['Actual Loops'] ?? 1);

  it.skipIf(skip !== undefined)(
    "counts and lists a value only another site's accounts hold through the site's own index entries, reading none of theirs",
    async () => {
      const db = database!.db;
      const filters = { metadata: '{"plan":"pro"}' };
      for (const query of [
        countQuery(db, 'shop', filters),
        fewMatchesPage(db, 'shop', filters, keyset(undefined, 'asc'), 100),
      ]) {
        const nodes = await run(query);
        const described = nodes.map((n) => `${n['Node Type']} ${n['Index Name'] ?? ''} ${read(n)}`).join(' > ');
        expect(described).toContain('users_metadata_site_idx');
        // The index condition names the site: its entries are shop's alone.
        expect(nodes.find((n) => n['Index Name'] === 'users_metadata_site_idx')?.['Index Cond']).toContain('shop');
        // Nothing to read: shop holds no such value. Before, the plan read every account of shop's
        // (through a site index, the statistics saying most accounts match) or every one of other's.
        for (const node of nodes) expect(read(node), described).toBeLessThanOrEqual(10);
      }
      // And the answer is right: shop has no such account; its own values are found.
      expect((await countQuery(db, 'shop', filters))[0]?.count).toBe(0);
      expect((await countQuery(db, 'shop', { metadata: '{"plan":"team"}' }))[0]?.count).toBe(SHOP / 10);
      expect((await countQuery(db, 'other', filters))[0]?.count).toBe(OTHERS);
      // A page and one more (whether a next page exists), all of them shop's.
      const page = await listQuery(db, 'shop', { metadata: '{"plan":"team"}' }, keyset(undefined, 'asc'), 100);
      expect(page).toHaveLength(101);
      expect(page.every((row) => row.metadata.plan === 'team')).toBe(true);
    },
    60_000,
  );
});
