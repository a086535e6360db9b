// OpenTelemetry traces as an operator's collector receives them: the server as main.ts assembles
// it, with the standard OTEL_* variables, exporting OTLP/HTTP JSON to a receiver in this test
// (otlp-receiver.ts: an HTTP server that decodes what it gets). The SDK reads its variables from the process's
// environment, so they are set here too, and put back after (the system tier's files share a worker).
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { processes } from '@user-accounts/server/testing/processes';
import { mintToken } from '@user-accounts/server/tokens';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API } from './harness.ts';
import { attrs, type OtlpReceiver, type OtlpSpan, otlpEnv, startOtlpReceiver, useProcessEnv } from './otlp-receiver.ts';
import { embeddedServer, freshPostgresDatabase, postgresUnavailable, serverTarget, TEST_HASHES } from './targets.ts';

const TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';
const EMAIL = 'tracer-secret@example.com';
const PASSWORD = 'a traced but never written password';

let receiver: OtlpReceiver;
let otel: Record<string, string>;
let restoreEnv: () => void = () => {};
const postgresSkip = await postgresUnavailable();

beforeAll(async () => {
  receiver = await startOtlpReceiver();
  otel = otlpEnv(receiver.endpoint);
  restoreEnv = useProcessEnv(otel);
});

const procs = processes();

afterAll(async () => {
  // The system tier's files share a worker (isolate: false): the next file gets the environment back.
  restoreEnv();
  await procs.cleanup();
  await receiver.close();
});

const waitFor = (ready: (all: OtlpSpan[]) => boolean) => receiver.waitFor(ready);

/** The spans under `root`, however deep. */
function descendants(all: OtlpSpan[], root: OtlpSpan): OtlpSpan[] {
  const below = all.filter((s) => s.parentSpanId === root.spanId);
  return below.flatMap((s) => [s, ...descendants(all, s)]);
}

describe('OpenTelemetry traces, exported by OTLP/HTTP', () => {
  const backends = [
    { name: 'embedded PGlite', skip: undefined, start: () => embeddedServer({ env: otel }), trace: TRACE },
    {
      name: 'PostgreSQL',
      skip: postgresSkip,
      async start() {
        const database = await freshPostgresDatabase();
        return serverTarget({ DATABASE_URL: database.url }, database.drop, { env: otel });
      },
      trace: TRACE.replace(/^4b/, '6c'),
    },
  ];
  it.each(backends)(
    "on $name: joins the caller's trace with a server span, its database and hashing spans, and no secret",
    async (backend) => {
      if (backend.skip !== undefined) {
        console.log(`[tracing] skipped on ${backend.name}: ${backend.skip}`);
        return;
      }
      const TRACE = backend.trace;
      const target = await backend.start();
      try {
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
          headers: { authorization: target.token, traceparent: `00-${TRACE.replace(/^./, '5')}-${CALLER_SPAN}-01` },
        });
        expect(get.status).toBe(200);

        const all = await waitFor(
          (s) =>
            s.filter((x) => x.kind === 2 && x.traceId.slice(1) === TRACE.slice(1)).length >= 2 &&
            s.some((x) => x.name === 'password hash run' && x.traceId === TRACE),
        );
        const server = all.find(
          (s) => s.kind === 2 && s.traceId === TRACE && attrs(s)['http.route'] === `${API}/create`,
        )!;
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

        const read = all.find((s) => s.kind === 2 && s.traceId === TRACE.replace(/^./, '5'))!;
        expect(attrs(read)['http.route']).toBe(`${API}/get`);
        expect(attrs(read)['http.response.status_code']).toBe(200);

        // Nothing secret anywhere in what was exported: not the query string, the email, the password.
        const exported = receiver.payloads.join('\n');
        for (const secret of [
          EMAIL,
          encodeURIComponent(EMAIL),
          'tracer-secret',
          PASSWORD,
          target.token,
          id,
          '?email',
        ]) {
          expect(exported).not.toContain(secret);
        }
      } finally {
        await target.close();
      }
    },
    180_000,
  );

  it("sends a webhook delivery's traceparent in the trace of the write that made the event", async () => {
    const hooks: { traceparent: string | undefined; type: string }[] = [];
    const hookServer = createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (chunk: string) => {
        body += chunk;
      });
      req.on('end', () => {
        hooks.push({
          traceparent: req.headers.traceparent as string | undefined,
          type: (JSON.parse(body) as { type: string }).type,
        });
        res.writeHead(204).end();
      });
    });
    await new Promise<void>((resolve) => hookServer.listen(0, '127.0.0.1', resolve));
    try {
      // The server as an operator runs it (main.ts starts the webhook sender), told by the standard variables.
      const token = mintToken();
      const env = {
        DATA_DIR: await procs.migratedDataDir(),
        ...TEST_HASHES,
        API_TOKENS: token,
        WEBHOOK_ALLOW_PRIVATE: 'true',
        ...otel,
      };
      const server = procs.server(env);
      await server.ready;
      const url = `http://127.0.0.1:${(hookServer.address() as AddressInfo).port}/hooks`;
      const added = await procs.cli(['webhook', 'add', '--site', 'default', '--url', url], env);
      expect(added.code, added.stderr).toBe(0);

      const trace = '0af7651916cd43dd8448eb211c80319c';
      const created = await fetch(`${server.baseUrl}${API}/create`, {
        method: 'POST',
        headers: {
          authorization: token,
          'content-type': 'application/json',
          traceparent: `00-${trace}-b7ad6b7169203331-01`,
        },
        body: JSON.stringify({ email: 'hooked@example.com', password: PASSWORD, name: 'Hook' }),
      });
      expect(created.status).toBe(201);

      const until = Date.now() + 15_000;
      while (hooks.length === 0 && Date.now() < until) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(hooks[0]?.type).toBe('user.created');
      const sent = /^00-([0-9a-f]{32})-([0-9a-f]{16})-01$/.exec(hooks[0]!.traceparent ?? '');
      expect(sent, `traceparent ${hooks[0]!.traceparent}`).not.toBeNull();
      expect(sent![1]).toBe(trace);
      // The delivery's span is exported, a CLIENT span under the write's server span.
      const all = await waitFor((s) => s.some((x) => x.spanId === sent![2]));
      const delivery = all.find((s) => s.spanId === sent![2])!;
      const write = all.find((s) => s.kind === 2 && s.traceId === trace)!;
      expect(delivery.kind).toBe(3);
      expect(delivery.parentSpanId).toBe(write.spanId);
      expect(receiver.payloads.join('\n')).not.toContain('hooked@example.com');
    } finally {
      hookServer.closeAllConnections();
      await new Promise<void>((resolve) => hookServer.close(() => resolve()));
    }
  }, 180_000);
});
