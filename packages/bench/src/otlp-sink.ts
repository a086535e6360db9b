// A local OTLP/HTTP receiver that accepts and drops (hot-path.ts, issue 58): the collector a server
// started with OTEL_EXPORTER_OTLP_ENDPOINT exports its traces to, so that the bench measures what
// tracing costs the server (its spans, their batching, their encoding and sending) and nothing of a
// real collector's. Each POST (e.g. to /v1/traces) is read to its end and answered 200 with an empty
// body, which OTLP/HTTP reads as a full success (an empty ExportTraceServiceResponse, protobuf or
// JSON alike). It counts the spans in each export (the protobuf's three levels of length-delimited
// fields, never a span's own contents), so that the bench can say how many spans a request made and
// that none were dropped on the way (the SDK drops what its queue cannot hold, silently).
// `GET /count` answers {"exports": n, "bytes": n, "spans": n}. A process of its own, as a collector
// would be, so that it shares no event loop with the load generator.
import { createServer } from 'node:http';
import { gunzipSync } from 'node:zlib';

let exports = 0;
let bytes = 0;
let spans = 0;

/** The length-delimited fields numbered `field` of one protobuf message, as [start, end) offsets. */
function fieldsOf(buf: Buffer, start: number, end: number, field: number): [number, number][] {
  const found: [number, number][] = [];
  let at = start;
  const varint = () => {
    let value = 0;
    let shift = 0;
    for (;;) {
      const byte = buf[at++]!;
      value += (byte & 0x7f) * 2 ** shift;
      if (byte < 0x80) return value;
      shift += 7;
    }
  };
  while (at < end) {
    const key = varint();
    const wire = key % 8;
    if (wire === 0) varint();
    else if (wire === 1) at += 8;
    else if (wire === 5) at += 4;
    else if (wire === 2) {
      const length = varint();
      if (Math.floor(key / 8) === field) found.push([at, at + length]);
      at += length;
    } else throw new Error(`protobuf wire type ${wire}`);
  }
  return found;
}

/** ExportTraceServiceRequest: resource_spans (1) → scope_spans (2) → spans (2). */
function protobufSpans(buf: Buffer): number {
  let n = 0;
  for (const [rs, re] of fieldsOf(buf, 0, buf.length, 1))
    for (const [ss, se] of fieldsOf(buf, rs, re, 2)) n += fieldsOf(buf, ss, se, 2).length;
  return n;
}

function jsonSpans(text: string): number {
  const body = JSON.parse(text) as { resourceSpans?: { scopeSpans?: { spans?: unknown[] }[] }[] };
  return (body.resourceSpans ?? []).reduce(
    (sum, r) => sum + (r.scopeSpans ?? []).reduce((s, x) => s + (x.spans?.length ?? 0), 0),
    0,
  );
}

const server = createServer((req, res) => {
  if (req.method === 'GET' && req.url === '/count') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ exports, bytes, spans }));
    return;
  }
  const chunks: Buffer[] = [];
  req.on('data', (chunk: Buffer) => {
    bytes += chunk.length;
    chunks.push(chunk);
  });
  req.on('end', () => {
    if (req.method === 'POST') {
      exports++;
      try {
        let body = Buffer.concat(chunks);
        if (req.headers['content-encoding'] === 'gzip') body = gunzipSync(body);
        spans += String(req.headers['content-type']).includes('json')
          ? jsonSpans(body.toString('utf8'))
          : protobufSpans(body);
      } catch (error) {
        process.stderr.write(`otlp-sink: an export it could not read: ${String(error)}\n`);
      }
    }
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
