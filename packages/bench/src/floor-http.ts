// The bare floor: the same single query and the same JSON as floor.ts, on Node's own http module
// with no framework. What separates floor.ts from it is Hono and @hono/node-server's own cost
// (Request and Response objects, routing); what separates ours from floor.ts is ours (issue 33).
import { createServer } from 'node:http';
import postgres from 'postgres';

const url = process.env.DATABASE_URL!;
const sql = postgres(url, { max: 10, max_pipeline: 1, onnotice: () => {} } as Parameters<typeof postgres>[1]);

function send(res: import('node:http').ServerResponse, status: number, body: unknown): void {
  const text = JSON.stringify(body);
  res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
  res.end(text);
}

const server = createServer(async (req, res) => {
  const at = req.url!.indexOf('?');
  const path = at === -1 ? req.url! : req.url!.slice(0, at);
  if (path === '/healthz') return send(res, 200, { status: 'ok' });
  if (path !== '/api/1/user/get' || req.method !== 'GET') return send(res, 404, { code: 'not_found' });
  const query = new URLSearchParams(at === -1 ? '' : req.url!.slice(at + 1));
  const id = query.get('_userId');
  const email = query.get('email');
  try {
    const rows = id
      ? await sql`select id, email, name, phone, address, created_at, updated_at from users where id = ${id}`
      : await sql`select id, email, name, phone, address, created_at, updated_at from users where site = 'default' and lower(email) = lower(${email!})`;
    const row = rows[0];
    if (!row) return send(res, 404, { code: 'user_not_found' });
    send(res, 200, {
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
  } catch {
    send(res, 500, { code: 'internal' });
  }
});

server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address() as import('node:net').AddressInfo;
  process.stdout.write(`listening on http://127.0.0.1:${address.port}\n`);
});

// Stopped with SIGTERM by bench.ts, SIGINT by cpu-per-request.ts: exit normally, so that --cpu-prof writes its profile.
for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(0));
