// The floor: the least a server can do for a get. Hono on @hono/node-server, one postgres.js
// query with the service's own pool settings, the same JSON out. No token, limits or logs: what
// the service spends beyond this is the price of those.
import { serve } from '@hono/node-server';
import { Hono } from 'hono';
import { getAccount } from './floor-query.ts';

const app = new Hono();

app.get('/healthz', (c) => c.json({ status: 'ok' }));
app.get('/api/1/user/get', async (c) => {
  const answer = await getAccount(c.req.query('_userId'), c.req.query('email'));
  return answer ? c.json(answer) : c.json({ code: 'user_not_found' }, 404);
});

serve({ fetch: app.fetch, port: Number(process.env.PORT ?? 0), hostname: '127.0.0.1' }, (info) => {
  process.stdout.write(`listening on http://127.0.0.1:${info.port}\n`);
});

// cpu-per-request.ts stops the servers with SIGINT: exit normally then, so that --cpu-prof writes its profile.
process.once('SIGINT', () => process.exit(0));
