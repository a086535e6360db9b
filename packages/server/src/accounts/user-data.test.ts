// The data answer's list of tables (ACCOUNT_TABLES) against db/schema.ts: a table that names an
// account by a column (a foreign key to users, or a column named as one: user_id, subject,
// account_id) must be in it, with the member of the answer that holds its rows or why the answer
// leaves it out. A new such table without either fails here before anything else runs.
// user-data-suite.ts holds the list to the rows a live database has, on PGlite and PostgreSQL.
import { is } from 'drizzle-orm';
import { getTableConfig, PgTable } from 'drizzle-orm/pg-core';
import { describe, expect, it } from 'vitest';
import * as declared from '../db/schema.ts';
import { ACCOUNT_TABLES } from './user-data.ts';

const ACCOUNT_COLUMNS = new Set(['user_id', 'subject', 'account_id']);
// Every table the module declares, whether or not it is in its `schema` object.
const tables = Object.values(declared)
  .filter((value) => is(value, PgTable))
  .map((table) => getTableConfig(table as PgTable));

describe('the tables of the data answer', () => {
  it('lists every table of the schema that names an account', () => {
    const naming = tables
      .filter(
        (t) =>
          t.name === 'users' ||
          t.columns.some((c) => ACCOUNT_COLUMNS.has(c.name)) ||
          t.foreignKeys.some((fk) => getTableConfig(fk.reference().foreignTable).name === 'users'),
      )
      .map((t) => t.name);
    expect(naming).toContain('user_factors');
    for (const name of naming) expect.soft(Object.keys(ACCOUNT_TABLES), `${name} names an account`).toContain(name);
  });

  it('lists only tables of the schema, each with a member of the answer or a reason', () => {
    const names = tables.map((t) => t.name);
    for (const [name, how] of Object.entries(ACCOUNT_TABLES)) {
      expect(names).toContain(name);
      if ('leftOut' in how) expect(how.leftOut.length).toBeGreaterThan(20);
    }
  });
});
