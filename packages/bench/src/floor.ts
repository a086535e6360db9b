// The floor: the least a server can do for a get. Hono on @hono/node-server, one postgres.js
// query with the service's own pool settings, the same JSON out. No token, limits or logs: what
// the service spends beyond this is the price of those.
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import postgres from 'postgres';

const url = process.env.DATABASE_URL!;
const sql = postgres(url, { max: 10, max_pipeline: 1, onnotice: () => {} } as Parameters<typeof postgres>[1]);
const app = new Hono();

app.get('/healthz', (c) => c.json({ status: 'ok' }));
app.get('/api/1/user/get', async (c) => {
  const id = c.req.query('_userId');
  const email = c.req.query('email');
  const rows = id
    ? await sql`select id, email, name, phone, address, created_at, updated_at from users where id = ${id}`
    : await sql`select id, email, name, phone, address, created_at, updated_at from users where site = 'default' and lower(email) = lower(${email!})`;
  const row = rows[0];
  if (!row) return c.json({ code: 'user_not_found' }, 404);
  return c.json({
    result: {
      _userId: row.id,
      email: row.email,
      name: row.name,
      phone: row.phone,
      address: row.address,
      createdAt: row.created_at.toISOString(),
      updatedAt: row.updated_at.toISOString(),
    },
  });
});

serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 0), hostname: '127.0.0.1' }, (info) => {
  process.stdout.write(`listening on http://127.0.0.1:${info.port}\n`);
});

// cpu-per-request.ts stops the servers with SIGINT: exit normally then, so that --cpu-prof writes its profile.
process.once('SIGINT', () => process.exit(0));
