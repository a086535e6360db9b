// OpenTelemetry traces as an operator's collector receives them: the server as main.ts assembles
// it, with the standard OTEL_* variables, exporting OTLP/HTTP JSON to a receiver in this test
// (an HTTP server that decodes what it gets). The SDK reads its variables from the process's
// environment, so they are set here too (this file runs in a process of its own).
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API } from './harness.ts';
import { embeddedServer, type Target } from './targets.ts';

interface OtlpSpan {
  traceId: string;
  spanId: string;
  parentSpanId?: string;
  name: string;
  kind: number;
  attributes?: { key: string; value: Record<string, unknown> }[];
}

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const EMAIL = 'tracer-secret@example.com';
const PASSWORD = 'a traced but never written password';

let receiver: Server;
let endpoint: string;
const payloads: string[] = [];
let target: Target;

beforeAll(async () => {
  receiver = createServer((req, res) => {
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
  await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
  endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}`;
  const otel = {
    OTEL_EXPORTER_OTLP_ENDPOINT: endpoint,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
    OTEL_BSP_SCHEDULE_DELAY: '50',
  };
  Object.assign(process.env, otel);
  target = await embeddedServer({ env: otel });
}, 60_000);

afterAll(async () => {
  await target?.close();
  await new Promise<void>((resolve) => receiver.close(() => resolve()));
});

const spans = () =>
  payloads.flatMap((p) =>
    (JSON.parse(p) as { resourceSpans: { scopeSpans: { spans: OtlpSpan[] }[] }[] }).resourceSpans.flatMap((r) =>
      r.scopeSpans.flatMap((s) => s.spans),
    ),
  );

const attrs = (span: OtlpSpan) =>
  Object.fromEntries((span.attributes ?? []).map((a) => [a.key, Object.values(a.value)[0]]));

/** Waits until the receiver has the spans `ready` looks for (the batch goes out every 50 ms). */
async function waitFor(ready: (all: OtlpSpan[]) => boolean): Promise<OtlpSpan[]> {
  const until = Date.now() + 10_000;
  while (!ready(spans())) {
    if (Date.now() > until) throw new Error(`spans not received; got ${JSON.stringify(spans().map((s) => s.name))}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
  return spans();
}

/** The spans under `root`, however deep. */
function descendants(all: OtlpSpan[], root: OtlpSpan): OtlpSpan[] {
  const below = all.filter((s) => s.parentSpanId === root.spanId);
  return below.flatMap((s) => [s, ...descendants(all, s)]);
}

describe('OpenTelemetry traces, exported by OTLP/HTTP', () => {
  it("joins the caller's trace with a server span, its database and hashing spans, and no secret", async () => {
    const create = await fetch(`${target.baseUrl}${API}/create`, {
      method: 'POST',
      headers: {
        authorization: target.token,
        'content-type': 'application/json',
        traceparent: `00-${TRACE}-${CALLER_SPAN}-01`,
      },
      body: JSON.stringify({ email: EMAIL, password: PASSWORD, name: 'Trace Hopper' }),
    });
    expect(create.status).toBe(201);
    const id = ((await create.json()) as { result: { _userId: string } }).result._userId;

    const get = await fetch(`${target.baseUrl}${API}/get?email=${encodeURIComponent(EMAIL)}`, {
      headers: { authorization: target.token, traceparent: `00-${TRACE.replace(/^4/, '5')}-${CALLER_SPAN}-01` },
    });
    expect(get.status).toBe(200);

    const all = await waitFor(
      (s) => s.filter((x) => x.kind === 2).length >= 2 && s.some((x) => x.name === 'password hash run'),
    );
    const server = all.find((s) => s.kind === 2 && attrs(s)['http.route'] === `${API}/create`)!;
    expect(server).toBeDefined();
    expect(server.traceId).toBe(TRACE);
    expect(server.parentSpanId).toBe(CALLER_SPAN);
    expect(server.name).toBe(`POST ${API}/create`);
    expect(attrs(server)).toMatchObject({
      'http.request.method': 'POST',
      'http.route': `${API}/create`,
      'http.response.status_code': 201,
    });
    const below = descendants(all, server);
    const queries = below.filter((s) => attrs(s)['db.system.name'] === 'postgresql');
    expect(queries.length).toBeGreaterThan(0);
    expect(queries.map((q) => attrs(q)['db.query.summary'])).toContain('INSERT users');
    expect(queries.every((q) => q.kind === 3 && q.traceId === TRACE)).toBe(true);
    const hash = below.find((s) => s.name === 'password hash')!;
    expect(hash).toBeDefined();
    expect(hash.parentSpanId).toBe(server.spanId);
    expect(below.find((s) => s.name === 'password hash run')?.parentSpanId).toBe(hash.spanId);

    const read = all.find((s) => s.kind === 2 && attrs(s)['http.route'] === `${API}/get`)!;
    expect(read.traceId).toBe(TRACE.replace(/^4/, '5'));
    expect(attrs(read)['http.response.status_code']).toBe(200);

    // Nothing secret anywhere in what was exported: not the query string, the email, the password.
    const exported = payloads.join('\n');
    for (const secret of [EMAIL, encodeURIComponent(EMAIL), 'tracer-secret', PASSWORD, target.token, id, '?email']) {
      expect(exported).not.toContain(secret);
    }
  });
});
