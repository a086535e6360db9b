import { type SQL, sql } from 'drizzle-orm';

/**
 * `array[$1, $2, …]::type[]`: each element bound as a parameter of its own, nulls as NULL (a
 * JavaScript array bound whole, postgres.js sends a null element as the text 'NULL').
 */
export const sqlArray = (values: readonly (string | number | null)[], type: 'text' | 'int' | 'uuid'): SQL =>
  sql`array[${sql.join(
    values.map((v) => sql`${v}`),
    sql`, `,
  )}]::${sql.raw(type)}[]`;
