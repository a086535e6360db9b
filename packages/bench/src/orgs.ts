// The organizations figures of `pnpm bench` (issue 45): `org/member/check` (the question a B2B
// site asks on every request: may this person do this in this organization?) against get-by-id
// (the read a site's backend makes most, our baseline) in the same run, at 1,000,000 memberships,
// interleaved round by round with the Hono floor's get-by-id beside them (how much the machine
// varied). Targets: at least 0.9× get-by-id's throughput, a p99 within 1.5× of get-by-id's.
//
// The organizations, the site's roles and the memberships are rows inserted with SQL before the
// load, as the server writes them (orgs/): 100 members an organization, each account in several,
// roles `admin` or `member`. Each request asks about a pair drawn from the memberships (a member)
// and a permission the member's role may or may not grant.
import postgres from 'postgres';
import type { LoadResult, Make, Server } from './load-types.ts';
import { median, type Row } from './report.ts';

type Result = LoadResult;

interface Side {
  name: string;
  start(): Promise<Server>;
  make: Make;
}

export interface OrgsBench {
  /** A seeded database and a sample of its account ids. */
  db: { url: string; ids: string[] };
  ours(): Promise<Server>;
  floor(): Promise<Server>;
  /** The Hono floor's throughput per round: how much the machine varied (the noise check). */
  floorRounds(rps: number[]): void;
  interleavedAll(sides: Side[], connections: number): Promise<Result[][]>;
  /** The top frames of ours under one more run of `make` (profile.ts). */
  profiled(make: Make, connections: number): Promise<string>;
  log(line: string): void;
  token: string;
  /** Memberships seeded: 1,000,000 in a full run. */
  memberships: number;
}

const CONNECTIONS = 16;
const PICK = 7919;
const pick = <T>(xs: T[], i: number) => xs[(i * PICK) % xs.length]!;
export const MEMBERS_PER_ORG = 100;
/** The pairs requests pick from: enough that no cache of a few rows answers them. */
const SAMPLE = 20_000;
export const PERMISSIONS = ['billing:manage', 'projects:read', 'members:invite'];

/**
 * `memberships` memberships of the site `default`: organizations of 100 members each, the
 * accounts taken in turn (each in memberships / accounts organizations). Returns a sample of pairs.
 */
export async function seedMemberships(url: string, memberships: number): Promise<{ orgId: string; userId: string }[]> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    await sql`insert into org_roles (site, role, permissions, position) values
      ('default', 'admin', ${['billing:manage', 'members:invite', 'projects:read']}::text[], 0),
      ('default', 'member', ${['projects:read']}::text[], 1)
      on conflict do nothing`;
    const orgCount = Math.ceil(memberships / MEMBERS_PER_ORG);
    const [{ n: accounts } = { n: 0 }] = await sql<{ n: number }[]>`
      select count(*)::int as n from users where site = 'default' and origin = 'api'`;
    if (accounts < MEMBERS_PER_ORG) throw new Error(`orgs: ${accounts} accounts, fewer than ${MEMBERS_PER_ORG}`);
    await sql`create temporary table bench_accounts as
      select id, (row_number() over (order by id) - 1)::int as n from users where site = 'default' and origin = 'api'`;
    await sql`create index on bench_accounts (n)`;
    for (let from = 0; from < orgCount; from += 1000) {
      const count = Math.min(1000, orgCount - from);
      await sql`with o as (
          insert into orgs (id, site, name, slug, member_count)
          select gen_random_uuid(), 'default', 'Bench ' || k, 'bench-' || k, ${MEMBERS_PER_ORG}
          from generate_series(${from}::int, ${from + count - 1}::int) k
          returning id, (substr(slug, 7))::int as k)
        insert into org_memberships (org_id, user_id, site, roles)
        select o.id, a.id, 'default', case when j % 10 = 0 then '{admin}'::text[] else '{member}'::text[] end
        from o cross join generate_series(0, ${MEMBERS_PER_ORG - 1}::int) j
        join bench_accounts a on a.n = (o.k * ${MEMBERS_PER_ORG} + j) % ${accounts}::int`;
    }
    await sql`vacuum analyze orgs`;
    await sql`vacuum analyze org_memberships`;
    await sql`vacuum analyze org_roles`;
  } finally {
    await sql.end();
  }
  return sampleMemberships(url);
}

/** A sample of 20,000 of the memberships seeded (none when there are none). */
export async function sampleMemberships(url: string): Promise<{ orgId: string; userId: string }[]> {
  const sql = postgres(url, { max: 1, onnotice: () => {} });
  try {
    const sample = await sql<{ orgId: string; userId: string }[]>`
      select org_id as "orgId", user_id as "userId" from org_memberships order by random() limit ${SAMPLE}`;
    return [...sample];
  } finally {
    await sql.end();
  }
}

export async function orgRows(b: OrgsBench): Promise<Row[]> {
  const started = performance.now();
  const pairs = await seedMemberships(b.db.url, b.memberships);
  b.log(
    `  seeded ${b.memberships.toLocaleString('en')} memberships in ${Math.ceil(b.memberships / MEMBERS_PER_ORG).toLocaleString('en')} organizations in ${((performance.now() - started) / 1000).toFixed(1)} s`,
  );
  const getById: Make = (i) => ({ path: `/api/1/user/get?_userId=${pick(b.db.ids, i)}` });
  const check: Make = (i) => {
    const { orgId, userId } = pick(pairs, i);
    return {
      path: `/api/1/org/member/check?orgId=${orgId}&_userId=${userId}&permission=${PERMISSIONS[i % PERMISSIONS.length]}`,
    };
  };

  // The check answers as meant before it is timed: a member, with roles, a permission decided.
  const server = await b.ours();
  try {
    const r = check(0);
    const response = await fetch(`${server.url}${r.path}`, { headers: { authorization: b.token } });
    const body = (await response.json().catch(() => null)) as any;
    if (response.status !== 200 || body?.result?.member !== true || typeof body?.result?.allowed !== 'boolean')
      throw new Error(`org/member/check answered ${response.status} ${JSON.stringify(body)}`);
  } finally {
    await server.stop();
  }

  b.log(`  org/member/check, get-by-id and the Hono floor, ${CONNECTIONS} connections`);
  const [f, c, g] = (await b.interleavedAll(
    [
      { name: 'the Hono floor', start: b.floor, make: getById },
      { name: 'org/member/check', start: b.ours, make: check },
      { name: 'get-by-id', start: b.ours, make: getById },
    ],
    CONNECTIONS,
  )) as [Result[], Result[], Result[]];
  b.floorRounds(f.map((x) => x.rps));
  const bad = c.reduce((sum, r) => sum + r.bad, 0);
  if (bad > 0) b.log(`  warning: org/member/check answered ${bad} non-2xx or errors`);
  const rps = (rs: Result[]) => rs.map((x) => x.rps);
  const p99 = (rs: Result[]) => rs.map((x) => x.p99);
  const throughput = median(rps(c)) / median(rps(g));
  const tail = median(p99(c)) / Math.max(median(p99(g)), 1);
  b.log(
    `  org/member/check ${median(rps(c)).toFixed(0)} req/s p99 ${median(p99(c))} ms; get-by-id ${median(rps(g)).toFixed(0)} req/s p99 ${median(p99(g))} ms (${throughput.toFixed(2)}×, p99 ${tail.toFixed(2)}×)`,
  );
  const frames = await b.profiled(check, CONNECTIONS);
  b.log(`  org/member/check, top frames: ${frames}`);
  const at = `${b.memberships.toLocaleString('en')} memberships`;
  return [
    {
      group: 'organizations',
      name: `org/member/check vs get-by-id, throughput, ${at}, ${CONNECTIONS} connections`,
      ours: rps(c),
      baseline: rps(g),
      unit: 'req/s',
      target: '≥ 0.9×',
      ok: throughput >= 0.9,
      frames,
    },
    {
      group: 'organizations',
      name: `org/member/check vs get-by-id, p99, ${at}, ${CONNECTIONS} connections`,
      ours: p99(c),
      baseline: p99(g),
      unit: 'ms',
      lowerIsBetter: true,
      target: '≤ 1.5×',
      ok: tail <= 1.5,
    },
    {
      group: 'organizations',
      name: `org/member/check vs the Hono floor's get-by-id, throughput, ${at}, ${CONNECTIONS} connections`,
      ours: rps(c),
      baseline: rps(f),
      unit: 'req/s',
    },
  ];
}

export const ORG_NOTES = [
  '**Organizations** (issue 45): organizations, the site’s two roles and memberships inserted with SQL as the ' +
    'server writes them (100 members an organization, each account in several). `org/member/check` (GET, a pair ' +
    'drawn from 20,000 sampled memberships and one of three permissions) is one prepared statement of three ' +
    'primary-key lookups (the organization, the membership, the member’s roles), nothing cached; it is ' +
    'interleaved round by round with our get-by-id and the Hono floor’s, each round on freshly started processes.',
];
