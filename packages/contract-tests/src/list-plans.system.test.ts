// list and count read through an index, whatever the filter, on a site of many accounts: the
// plans PostgreSQL chooses for the very queries the server sends (built by the same functions).
import { openPostgres } from '@user-accounts/server/db';
import {
  countQuery,
  FEW_MATCHES,
  fewMatchesPage,
  keyset,
  type ListFilters,
  listQuery,
  WALK_BUDGET,
  walkQuery,
} from '@user-accounts/server/listing';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { freshPostgresDatabase, postgresUnavailable } from './targets.ts';

const skip = await postgresUnavailable();
if (skip) console.warn(`\n[contract-tests] list and count plans on PostgreSQL: SKIPPED, ${skip}\n`);

// Enough rows, spread over 1,000 domains, other sites and out-of-reach rows, for the planner
// to weigh the indexes as it would at a million.
const ACCOUNTS = 200_000;

describe.skipIf(skip !== undefined)(
  `list and count plans on PostgreSQL, ${ACCOUNTS.toLocaleString('en')} accounts`,
  () => {
    let database: Awaited<ReturnType<typeof freshPostgresDatabase>>;
    let server: Awaited<ReturnType<typeof openPostgres>>;
    let sql: postgres.Sql;

    beforeAll(async () => {
      database = await freshPostgresDatabase();
      server = await openPostgres(database.url, { max: 1 });
      await server.migrate();
      sql = postgres(database.url, { max: 1, onnotice: () => {} });
      // Metadata as sites keep it: a plan most accounts share, a rare one, and an organisation of ~40.
      await sql`insert into users (id, site, email, name, password_hash, origin, created_at, metadata)
      select gen_random_uuid(), case when i % 10 = 0 then 'other' else 'shop' end,
        'user' || i || '@d' || (i % 1000) || '.example.com', 'User ' || i, 'x',
        case when i % 50 = 0 then 'external' else 'api' end,
        timestamptz '2026-01-01' + i * interval '1 second',
        jsonb_build_object('plan', case when i % 100 = 1 then 'enterprise' when i % 3 = 0 then 'pro' else 'free' end,
          'org', i % 5000, 'prefs', jsonb_build_object('locale', 'en'))
      from generate_series(1, ${ACCOUNTS}) as i`;
      // ANALYZE samples 300 × the statistics target rows: at the default (100), 30,000 of the 200,000,
      // and a prefix's estimate moved with the sample, once enough to walk the creation index
      // instead (a system-tier run). At 1,000 the sample is the whole table: the same plan every run.
      await sql`alter table users alter column email set statistics 1000`;
      await sql`analyze users`;
    }, 120_000);
    afterAll(async () => {
      await sql?.end();
      await server?.close();
      await database?.drop();
    });

    /** The plan of a query builder's SQL, as one line of node types and index names. */
    async function plan(query: { toSQL(): { sql: string; params: unknown[] } }): Promise<string> {
      const { sql: text, params } = query.toSQL();
      const [row] = await sql.unsafe(`explain (format json) ${text}`, params as never[]);
      const nodes: string[] = [];
      // A subplan's nodes (a page's `emailDeliverable`, read in messages for each row of the page)
      // are marked so, for a test to tell them from the read of the accounts.
      const walk = (node: Record<string, unknown>, inSubPlan = false) => {
        const sub = inSubPlan || node['Parent Relationship'] === 'SubPlan';
        const cond = node['Index Cond'] ? ` [${node['Index Cond']}]` : '';
        nodes.push(
          `${sub ? 'SubPlan ' : ''}${node['Node Type']}${node['Index Name'] ? ` ${node['Index Name']}` : ''}${cond}`,
        );
        for (const child of (node.Plans as Record<string, unknown>[] | undefined) ?? []) walk(child, sub);
      };
      walk((row!['QUERY PLAN'] as { Plan: Record<string, unknown> }[])[0]!.Plan);
      return nodes.join(' > ');
    }
    const list = (filters: ListFilters, order: 'asc' | 'desc' = 'asc', after?: { c: number; i: string; t: number }) =>
      plan(listQuery(server.db, 'shop', filters, keyset(after, order), 100));

    it.each([
      ['the first page', {}, 'asc', 'users_list_created_idx'],
      ['the first page, newest first', {}, 'desc', 'users_list_created_idx'],
      ['an email prefix', { email: 'user12345' }, 'asc', 'users_list_email_prefix_idx'],
      ['a domain', { email: '@d7.example.com' }, 'asc', 'users_list_email_domain_idx'],
      [
        'a creation range',
        { createdAfter: '2026-01-02T00:00:00Z', createdBefore: '2026-01-02T01:00:00Z' },
        'asc',
        'users_list_created_idx',
      ],
      ['disabled accounts with a prefix', { email: 'user99', disabled: false }, 'desc', 'users_list_email_prefix_idx'],
      // A selective metadata filter reads the GIN index; one most accounts match walks the
      // creation index, filtering, as the first page does (either way, never the whole table).
      ['an organisation in metadata', { metadata: '{"org":42}' }, 'asc', 'users_metadata_site_idx'],
      ['an organisation in metadata, newest first', { metadata: '{"org":42}' }, 'desc', 'users_metadata_site_idx'],
      ['a common plan in metadata', { metadata: '{"plan":"free"}' }, 'asc', 'users_list_created_idx'],
      [
        'metadata with a domain',
        { metadata: '{"plan":"pro"}', email: '@d7.example.com' },
        'asc',
        'users_list_email_domain_idx',
      ],
    ] as const)('lists %s through an index', async (_, filters, order, index) => {
      const shape = await list(filters, order);
      expect(shape).toContain(index);
      expect(shape).not.toContain('Seq Scan');
    });

    it("looks for a metadata filter's page first by a bounded walk of the creation index, in order, without a sort", async () => {
      for (const order of ['asc', 'desc'] as const) {
        const shape = await plan(
          walkQuery(server.db, 'shop', { metadata: '{"plan":"free"}' }, keyset(undefined, order), 100),
        );
        expect(shape).toMatch(/^Limit > Subquery Scan > Limit > Index Scan users_list_created_idx/);
        expect(shape).not.toMatch(/Sort|Seq Scan/);
      }
      // A common value fills its page there; a rare one does not, and list goes on as below.
      const common = await walkQuery(server.db, 'shop', { metadata: '{"plan":"free"}' }, keyset(undefined, 'asc'), 100);
      expect(common).toHaveLength(101);
      const rare = await walkQuery(server.db, 'shop', { metadata: '{"org":42}' }, keyset(undefined, 'asc'), 100);
      expect(rare.length).toBeLessThanOrEqual(100);
      expect(WALK_BUDGET).toBeLessThan(ACCOUNTS);
    });

    it('reads a metadata filter that few accounts match through the GIN index, in one statement; one that many match by walking', async () => {
      // PostgreSQL cannot estimate jsonb containment: list reads the matches after the cursor,
      // up to FEW_MATCHES (at 1M accounts, a filter 200 accounts matched took 546 ms a page
      // walking the creation index, 4.6 ms so), counts them and sorts them for the page.
      for (const order of ['asc', 'desc'] as const) {
        const few = { metadata: '{"org":42}' };
        const page = await fewMatchesPage(server.db, 'shop', few, keyset(undefined, order), 100);
        expect(page.length).toBeGreaterThan(0);
        expect(page[0]!.matches).toBeLessThan(FEW_MATCHES);
        // Each match's row read once, through the GIN index, then the page's top-N: no second read by id.
        // (`emailDeliverable`, issue 60, is a subplan over messages for the page's rows, with its
        // Result node above the page.)
        const shape = (await plan(fewMatchesPage(server.db, 'shop', few, keyset(undefined, order), 100)))
          .split(' > ')
          .filter((node) => !node.startsWith('SubPlan '))
          .join(' > ');
        expect(shape).toMatch(
          /^Limit > (Result > )?Sort > WindowAgg > Limit > Bitmap Heap Scan > Bitmap Index Scan users_metadata_site_idx/,
        );
        expect(shape.match(/Scan/g)).toHaveLength(2);
      }
      const many = await fewMatchesPage(
        server.db,
        'shop',
        { metadata: '{"plan":"free"}' },
        keyset(undefined, 'asc'),
        100,
      );
      expect(many[0]!.matches).toBe(FEW_MATCHES);
    });

    it('goes on from a cursor through the creation index, not by skipping rows', async () => {
      const shape = await list({}, 'asc', {
        c: Date.parse('2026-01-02T00:00:00Z'),
        i: '00000000-0000-7000-8000-000000000000',
        t: 0,
      });
      expect(shape).toContain('users_list_created_idx');
      expect(shape).not.toContain('Seq Scan');
      // The cursor bounds the index scan (an Index Cond) rather than filtering every row before
      // it: spelt with OR, each page read the whole site up to the cursor again (export: O(n²)).
      expect(shape).toMatch(/users_list_created_idx \[[^\]]*created_at[^\]]*\]/);
    });

    it.each([
      ['a domain', { email: '@d7.example.com' }, 'users_list_email_domain_idx'],
      ['an email prefix', { email: 'user12' }, 'users_list_email_prefix_idx'],
      [
        'a creation range',
        { createdAfter: '2026-01-02T00:00:00Z', createdBefore: '2026-01-02T01:00:00Z' },
        'users_list_created_idx',
      ],
      ['an organisation in metadata', { metadata: '{"org":42}' }, 'users_metadata_site_idx'],
      ['a rare plan in metadata', { metadata: '{"plan":"enterprise"}' }, 'users_metadata_site_idx'],
    ] as const)('counts %s through an index', async (_, filters, index) => {
      const shape = await plan(countQuery(server.db, 'shop', filters));
      expect(shape).toContain(index);
      expect(shape).not.toContain('Seq Scan');
    });
  },
);
