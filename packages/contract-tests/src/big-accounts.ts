// Many accounts with large metadata, written straight into the database: heavy reads' fixtures.
import type { Target } from './targets.ts';

/**
 * `n` accounts of `site` made through the API as far as the database is concerned, created a
 * second apart in the order of their number, each with `kib` KiB of metadata (hex text). `target`:
 * anything that runs a statement with parameters (the bench passes its own connection).
 */
export async function bigAccounts(target: Pick<Target, 'sql'>, site: string, n: number, kib: number, prefix = 'big') {
  await target.sql(
    `insert into users (site, email, name, origin, password_hash, metadata, created_at, updated_at)
     select $1, $2 || '.' || i || '@example.com', 'Big ' || i, 'api', null,
       jsonb_build_object('blob', (select string_agg(md5(i::text || ':' || g), '') from generate_series(1, $4::int * 32) g)),
       now() - make_interval(secs => $3::int - i), now()
     from generate_series(1, $3::int) i`,
    [site, prefix, n, kib],
  );
}
