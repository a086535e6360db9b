import type { Sql } from 'postgres';

/** What a wrapper may replace: postgres.js's `unsafe`, which runs each of drizzle's queries. */
export type Client = { unsafe: Sql['unsafe'] };

/**
 * Applies `install` to a postgres.js client and to the client of each of its transactions
 * (sql.begin hands its callback a client of its own; drizzle's transactions run on it).
 */
export function onEveryClient(client: Sql, install: (client: Client) => void): void {
  install(client);
  const begin = client.begin;
  client.begin = function begin_(this: unknown, ...args: unknown[]) {
    const fn = args.at(-1) as (tx: Client) => unknown;
    args[args.length - 1] = (tx: Client) => {
      install(tx);
      return fn(tx);
    };
    return (begin as (...a: unknown[]) => unknown).apply(this, args);
  } as Sql['begin'];
}
