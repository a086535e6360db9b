// The bare floor: the same single query and the same JSON as floor.ts, on Node's own http module
// with no framework. What separates floor.ts from it is Hono and @hono/node-server's own cost
// (Request and Response objects, routing); what separates ours from floor.ts is ours (issue 33).
import { createServer } from 'node:http';
import { getAccount } from './floor-query.ts';

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
  try {
    const answer = await getAccount(query.get('_userId') ?? undefined, query.get('email') ?? undefined);
    if (answer) send(res, 200, answer);
    else send(res, 404, { code: 'user_not_found' });
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
