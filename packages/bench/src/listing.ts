// The list, count and export figures of `pnpm bench` (issue 14): a deep page against the first,
// filtered lists at 1M against 10k accounts, an exact count over every account, and export's
// rate and memory.
import { openPostgres } from '@user-accounts/server/db';
import { cursorScope, cursorsOf } from '@user-accounts/server/listing';
import { createToken } from '@user-accounts/server/tokens';
import postgres from 'postgres';
import { median, type Row } from './report.ts';

interface Server {
  url: string;
  peakRssMb(): number;
  stop(): Promise<void>;
}

export interface ListingBench {
  /** Databases seeded with accounts created one second apart, emails user<i>@bench.example.com. */
  db: { url: string };
  accounts: number;
  ours(db: { url: string }, env?: Record<string, string>): Promise<Server>;
  token: string;
  log(line: string): void;
}

/** The median time of `n` requests one after another, after a few unmeasured ones. */
async function p50(url: string, token: string, path: (i: number) => string, n = 200): Promise<number> {
  const times: number[] = [];
  for (let i = -10; i < n; i++) {
    const t0 = performance.now();
    const response = await fetch(`${url}${path(i)}`, { headers: { authorization: token } });
    await response.arrayBuffer();
    if (response.status !== 200) throw new Error(`${path(i)} answered ${response.status}`);
    if (i >= 0) times.push(performance.now() - t0);
  }
  return median(times);
}

/** p50 of the list shapes on one database: first page, email prefix, creation range, metadata filters. */
export async function listTimes(b: ListingBench): Promise<Record<string, number>> {
  const server = await b.ours(b.db);
  try {
    const prefix = (i: number) => `user${(i * 7919) % b.accounts}`;
    const day = (i: number) => new Date(Date.parse('2026-01-01T00:00:00Z') + ((i * 7919) % b.accounts) * 1000);
    return {
      first: await p50(server.url, b.token, () => '/api/1/user/list?limit=100'),
      prefix: await p50(server.url, b.token, (i) => `/api/1/user/list?limit=100&email=${prefix(i)}`),
      range: await p50(
        server.url,
        b.token,
        (i) =>
          `/api/1/user/list?limit=100&createdAfter=${day(i).toISOString()}&createdBefore=${new Date(day(i).getTime() + 3_600_000).toISOString()}`,
      ),
      // Metadata filters (issue 28; the seed's metadata, bench.ts): a plan a quarter of the
      // accounts have, and an organisation of one account in 2,000 (500 at 1M), a new one each time.
      metadataCommon: await p50(
        server.url,
        b.token,
        () => `/api/1/user/list?limit=100&metadata=${encodeURIComponent('{"plan":"pro"}')}`,
      ),
      metadataSelective: await p50(
        server.url,
        b.token,
        (i) => `/api/1/user/list?limit=100&metadata=${encodeURIComponent(`{"org":${(i * 7919 + 11) % 2000}}`)}`,
      ),
    };
  } finally {
    await server.stop();
  }
}

/** At the large size only: the deep page, the count of everything, and export. */
export async function deepRows(b: ListingBench, first: number): Promise<Row[]> {
  const rows: Row[] = [];
  // The cursor the server would give after account N-100, signed with the deployment's own key.
  const database = await openPostgres(b.db.url, { max: 1 });
  const sql = postgres(b.db.url, { max: 1, onnotice: () => {} });
  let deep: string;
  let exportToken: string;
  try {
    // export needs a scope no configured token has: one made as an operator makes it.
    exportToken = (await createToken(database.db, { site: 'default', scopes: ['export'], label: 'bench export' }))
      .token;
    const cursors = await cursorsOf(database.db);
    const [last] = await sql<{ c: Date; id: string }[]>`select created_at as c, id from users
      where site = 'default' and origin = 'api' order by created_at, id offset ${b.accounts - 101} limit 1`;
    deep = cursors.sign({ c: last!.c.getTime(), i: last!.id }, cursorScope('default', {}, 'asc'));
  } finally {
    await sql.end();
    await database.close();
  }
  const server = await b.ours(b.db);
  try {
    const page = await p50(server.url, b.token, () => `/api/1/user/list?limit=100&after=${deep}`);
    b.log(`  list: page ${b.accounts / 100} ${page.toFixed(1)} ms p50, page 1 ${first.toFixed(1)} ms`);
    rows.push({
      group: 'list',
      name: `list of 100, last page (${(b.accounts / 100).toLocaleString('en')}) vs first, by cursor`,
      ours: [page],
      baseline: [first],
      unit: 'ms',
      lowerIsBetter: true,
      target: '≤ 1.2×',
      ok: page / first <= 1.2,
    });
    const count = await p50(server.url, b.token, () => '/api/1/user/count', 10);
    b.log(`  count of ${b.accounts.toLocaleString('en')} accounts: ${count.toFixed(0)} ms p50`);
    rows.push({
      group: 'list',
      name: `exact count of ${b.accounts.toLocaleString('en')} accounts`,
      ours: [count],
      unit: 'ms',
    });
  } finally {
    await server.stop();
  }

  // The server as it starts by default, and with V8's young generation held small.
  for (const [label, env] of [
    ['', {}],
    [', --max-semi-space-size=8', { NODE_OPTIONS: '--max-semi-space-size=8' }],
  ] as const) {
    const exporter = await b.ours(b.db, env);
    try {
      const started = performance.now();
      const response = await fetch(`${exporter.url}/api/1/user/export`, { headers: { authorization: exportToken } });
      let lines = 0;
      for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
        for (const byte of chunk) if (byte === 10) lines++;
      }
      const rate = lines / ((performance.now() - started) / 1000);
      const rss = exporter.peakRssMb();
      b.log(
        `  export${label}: ${lines.toLocaleString('en')} accounts at ${rate.toFixed(0)}/s, server peak RSS ${rss.toFixed(0)} MB`,
      );
      rows.push({
        group: 'export',
        name: `export of ${b.accounts.toLocaleString('en')} accounts${label}`,
        ours: [rate],
        unit: 'accounts/s',
        target: '≥ 50000/s',
        ok: rate >= 50_000,
      });
      rows.push({
        group: 'export',
        name: `server peak RSS over the export${label}`,
        ours: [rss],
        unit: 'MB',
        target: '≤ 200 MB',
        ok: rss <= 200,
      });
    } finally {
      await exporter.stop();
    }
  }
  return rows;
}
