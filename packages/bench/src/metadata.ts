// The metadata figures of `pnpm bench` (issue 28): get-by-id of accounts with 4 KiB of metadata
// against accounts without, on one server, rounds interleaved (the ratio is of one run). The
// filtered list at 1M accounts is measured with the other lists (listing.ts, `metadataListTimes`).
import postgres from 'postgres';
import { median, type Row } from './report.ts';

interface Server {
  url: string;
  stop(): Promise<void>;
}

type Make = (i: number) => { method?: 'GET' | 'POST'; path: string; body?: string };

export interface MetadataBench {
  /** A seeded database and a sample of its account ids (not written to by anything else meanwhile). */
  db: { url: string; ids: string[] };
  ours(db: { url: string }): Promise<Server>;
  load(
    url: string,
    connections: number,
    seconds: number,
    make: Make,
  ): Promise<{ rps: number; p50: number; bad: number }>;
  log(line: string): void;
  rounds: number;
  seconds: number;
}

/** Keys of 32 hex characters each: about 4 KiB of JSON text an account, as a site's profile data. */
const KEYS = 88;

export async function metadataGetRows(b: MetadataBench): Promise<Row[]> {
  // Two disjoint halves of the sample: one given 4 KiB of metadata, the other left with `{}`.
  const half = Math.floor(Math.min(b.db.ids.length, 10_000) / 2);
  const heavy = b.db.ids.slice(0, half);
  const light = b.db.ids.slice(half, 2 * half);
  const sql = postgres(b.db.url, { max: 1, onnotice: () => {} });
  let size: number;
  try {
    await sql`update users set metadata = (
        select jsonb_object_agg('field' || k, md5(users.id::text || k)) from generate_series(1, ${KEYS}) as k)
      where id = any(${heavy}::uuid[])`;
    await sql`vacuum analyze users`;
    const [row] = await sql<{ n: number }[]>`select avg(octet_length(metadata::text))::int as n from users
      where id = any(${heavy}::uuid[])`;
    size = row!.n;
  } finally {
    await sql.end();
  }
  b.log(
    `get-by-id: ${half.toLocaleString('en')} accounts with ${size} bytes of metadata each, against as many without`,
  );
  const server = await b.ours(b.db);
  try {
    const get = (ids: string[]) => (i: number) => ({ path: `/api/1/user/get?_userId=${ids[i % ids.length]}` });
    await b.load(server.url, 16, 1, get(heavy));
    const rps = { heavy: [] as number[], light: [] as number[] };
    const p50 = { heavy: [] as number[], light: [] as number[] };
    for (let r = 0; r < b.rounds; r++) {
      const without = await b.load(server.url, 16, b.seconds, get(light));
      const withIt = await b.load(server.url, 16, b.seconds, get(heavy));
      if (without.bad + withIt.bad > 0) b.log(`  warning: get answered ${without.bad + withIt.bad} non-2xx or errors`);
      rps.light.push(without.rps);
      rps.heavy.push(withIt.rps);
      p50.light.push(without.p50);
      p50.heavy.push(withIt.p50);
    }
    b.log(
      `  get-by-id ${median(rps.heavy).toFixed(0)} req/s with metadata, ${median(rps.light).toFixed(0)} req/s without`,
    );
    return [
      {
        group: 'metadata',
        name: `get-by-id throughput, ${(size / 1024).toFixed(1)} KiB of metadata vs none, 16 connections`,
        ours: rps.heavy,
        baseline: rps.light,
        unit: 'req/s',
        target: '≥ 0.9×',
        ok: median(rps.heavy) / median(rps.light) >= 0.9,
      },
      {
        group: 'metadata',
        name: `get-by-id p50, ${(size / 1024).toFixed(1)} KiB of metadata vs none, 16 connections`,
        ours: p50.heavy,
        baseline: p50.light,
        unit: 'ms',
        lowerIsBetter: true,
      },
    ];
  } finally {
    await server.stop();
  }
}
