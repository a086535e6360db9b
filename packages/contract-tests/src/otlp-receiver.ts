// A local OpenTelemetry collector for tests: an HTTP server that takes OTLP/HTTP JSON on
// /v1/traces and keeps what it got, as an operator's collector would receive it. The server's SDK
// reads its OTEL_* variables from the process's environment (not from loadConfig's input), so
// `useProcessEnv` sets them there and gives back what puts them as they were (the contract and
// system tiers' files share a worker: isolate false).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: Record<string, unknown> }[];
}

/** OTLP's SpanKind of a request's server span. */
export const SERVER_SPAN = 2;

export interface OtlpReceiver {
  /** OTEL_EXPORTER_OTLP_ENDPOINT for a server that exports here. */
  readonly endpoint: string;
  /** Every body posted to /v1/traces, as sent. */
  readonly payloads: string[];
  /** Every span received so far. */
  spans(): OtlpSpan[];
  /** Waits until the spans received satisfy `ready` (the batch goes out every 50 ms). */
  waitFor(ready: (all: OtlpSpan[]) => boolean, ms?: number): Promise<OtlpSpan[]>;
  close(): Promise<void>;
}

/** A span's attributes as a plain object (each value's one field: stringValue, intValue …). */
export const attrs = (span: OtlpSpan): Record<string, unknown> =>
  Object.fromEntries((span.attributes ?? []).map((a) => [a.key, Object.values(a.value)[0]]));

export async function startOtlpReceiver(): Promise<OtlpReceiver> {
  const payloads: string[] = [];
  const server: Server = createServer((req, res) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (chunk: string) => {
      body += chunk;
    });
    req.on('end', () => {
      if (req.url === '/v1/traces') payloads.push(body);
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}');
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const spans = () =>
    payloads.flatMap((p) =>
      (JSON.parse(p) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] }).resourceSpans.flatMap((r) =>
        r.scopeSpans.flatMap((s) => s.spans),
      ),
    );
  return {
    endpoint: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    payloads,
    spans,
    async waitFor(ready, ms = 10_000) {
      const until = Date.now() + ms;
      while (!ready(spans())) {
        if (Date.now() > until)
          throw new Error(`spans not received; got ${JSON.stringify(spans().map((s) => s.name))}`);
        await new Promise((resolve) => setTimeout(resolve, 50));
      }
      return spans();
    },
    async close() {
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** The SDK's variables for exporting to `endpoint` as OTLP/HTTP JSON, a batch every 50 ms. */
export const otlpEnv = (endpoint: string): Record<string, string> => ({
  OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
  OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
  OTEL_BSP_SCHEDULE_DELAY: '50',
});

/** Sets `vars` in process.env; the function returned puts each back as it was. */
export function useProcessEnv(vars: Record<string, string>): () => void {
  const previous = Object.fromEntries(Object.keys(vars).map((name) => [name, process.env[name]]));
  Object.assign(process.env, vars);
  return () => {
    for (const [name, value] of Object.entries(previous)) {
      if (value === undefined) delete process.env[name];
      else process.env[name] = value;
    }
  };
}
