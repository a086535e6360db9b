// What both floors do for a get (floor.ts on Hono, floor-http.ts on node:http): one postgres.js
// query with the service's own pool settings, and the same JSON out. Only the framework around
// it differs between the two.
import postgres from 'postgres';

const sql = postgres(process.env.DATABASE_URL!, {
  max: 10,
  max_pipeline: 1,
  onnotice: () => {},
} as Parameters<typeof postgres>[1]);

/** The account's answer as get gives it, or undefined when there is none. */
export async function getAccount(id: string | undefined, email: string | undefined) {
  const rows = id
    ? await sql`select id, email, name, phone, address, created_at, updated_at from users where id = ${id}`
    : await sql`select id, email, name, phone, address, created_at, updated_at from users where site = 'default' and lower(email) = lower(${email!})`;
  const row = rows[0];
  if (!row) return undefined;
  return {
    result: {
      _userId: row.id,
      email: row.email,
      name: row.name,
      phone: row.phone,
      address: row.address,
      createdAt: row.created_at.toISOString(),
      updatedAt: row.updated_at.toISOString(),
    },
  };
}
