// A local OTLP/HTTP receiver that accepts and drops (hot-path.ts, issue 58): the collector a server
// started with OTEL_EXPORTER_OTLP_ENDPOINT exports its traces to, so that the bench measures what
// tracing costs the server (its spans, their batching, their encoding and sending) and nothing of a
// real collector's. Each POST (e.g. to /v1/traces) is read to its end and answered 200 with an empty
// body, which OTLP/HTTP reads as a full success (an empty ExportTraceServiceResponse, protobuf or
// JSON alike). `GET /count` answers what it has received: {"exports": n, "bytes": n}, so that the
// bench can tell that tracing was on. A process of its own, as a collector would be, so that it
// shares no event loop with the load generator.
import { createServer } from 'node:http';

let exports = 0;
let bytes = 0;

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/count') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ exports, bytes }));
    return;
  }
  req.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
  });
  req.on('end', () => {
    if (req.method === 'POST') exports++;
    res.writeHead(200, {
      'content-type': req.headers['content-type'] ?? 'application/x-protobuf',
      'content-length': 0,
    });
    res.end();
  });
});

server.listen(Number(process.env.PORT ?? 0), '127.0.0.1', () => {
  const address = server.address() as import('node:net').AddressInfo;
  process.stdout.write(`listening on http://127.0.0.1:${address.port}\n`);
});

for (const signal of ['SIGINT', 'SIGTERM'] as const) process.once(signal, () => process.exit(0));
