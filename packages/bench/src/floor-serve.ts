// What the bare node:http floors share (floor-http.ts, the reads; floor-write.ts, the writes): the
// JSON answer, the request's body, and the server's skeleton (the health check, a 500 for what
// throws, the port, the line bench.ts waits for, a normal exit on a signal). Each floor brings only
// its routes.
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export function send(res: ServerResponse, status: number, body: unknown, etag?: string): void {
  const text = JSON.stringify(body);
  res.writeHead(status, {
    'content-type': 'application/json',
    'content-length': Buffer.byteLength(text),
    ...(etag !== undefined && { etag }),
  });
  res.end(text);
}

/** The request's body as JSON (undefined when it is not JSON). */
export async function jsonBody(req: IncomingMessage): Promise<any> {
  const chunks: Buffer[] = [];
  for await (const chunk of req) chunks.push(chunk as Buffer);
  try {
    return JSON.parse(Buffer.concat(chunks).toString('utf8'));
  } catch {
    return undefined;
  }
}

/**
 * Serves `route` (given the path and the query string after `?`, or '') on PORT (any free port
 * when unset), after `/healthz`; a route that answers nothing (false) is a 404, and one that throws a 500.
 */
export function serveFloor(
  route: (req: IncomingMessage, res: ServerResponse, path: string, query: string) => Promise<unknown>,
): void {
  const server = createServer(async (req, res) => {
    const at = req.url!.indexOf('?');
    const path = at === -1 ? req.url! : req.url!.slice(0, at);
    if (path === '/healthz') return send(res, 200, { status: 'ok' });
    try {
      if ((await route(req, res, path, at === -1 ? '' : req.url!.slice(at + 1))) === false)
        send(res, 404, { code: 'not_found' });
    } catch {
      send(res, 500, { code: 'internal' });
    }
  });
  server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
    const address = server.address() as AddressInfo;
    process.stdout.write(`listening on http://127.0.0.1:${address.port}\n`);
  });
  // Stopped with SIGTERM by bench.ts, SIGINT by cpu-per-request.ts: exit normally, so that --cpu-prof writes its profile.
  for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(0));
}
