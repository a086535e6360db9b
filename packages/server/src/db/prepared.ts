import type { Db } from './client.ts';

/**
 * A statement built once per database, then executed with its placeholders filled: drizzle
 * otherwise builds the SQL text of every query anew, which the profile of a get put at a sixth
 * of the server's CPU. (postgres.js then prepares the text once per connection by itself.)
 */
export function preparedOn<T>(build: (db: Db) => T): (db: Db) => T {
  const built = new WeakMap<Db, T>();
  return (db) => {
    let statement = built.get(db);
    if (statement === undefined) {
      statement = build(db);
      built.set(db, statement);
    }
    return statement;
  };
}
