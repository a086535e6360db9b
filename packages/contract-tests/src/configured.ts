// The contract suites once more on a server with CORS and tracing on (issue 58: "the same answers,
// headers and log lines whatever the configuration"): configured-*.test.ts, one group of
// suites.ts each, as pglite-*.test.ts. The accounts and life groups only: each group costs
// 1.05–1.12× its pglite-*.test.ts side by side (one pipeline, 2026-12-02), the three about 63 s of
// a clean run in all, more than the ~60 s `./pnpmw test`'s budget leaves; the data group (login,
// import, list, events, metadata, contacts: about 22 s) passed too (87 tests) and runs with a
// file like the other two, of `DATA_SUITES`.
// Each file starts a local OTLP receiver (otlp-receiver.ts)
// that every server of its suites exports to, and ends with a test that the configuration was
// really on: a listed origin's request is answered with Access-Control-Allow-Origin, and every
// operation the suites called left a server span at the receiver.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { API, GHOST } from './harness.ts';
import { type OtlpReceiver, otlpEnv, SERVER_SPAN, startOtlpReceiver, useProcessEnv } from './otlp-receiver.ts';
import { type Define, defineSuites } from './suites.ts';
import { CONFIGURED_ORIGIN, configuredTarget, type Target } from './targets.ts';

/** `METHOD route` of each request an access line names whose route is an operation of /api/. */
function operationsLogged(targets: Target[]): Set<string> {
  const called = new Set<string>();
  for (const target of targets) {
    for (const line of target.logs) {
      const fields = JSON.parse(line) as { msg?: string; method?: string; route?: string };
      if (fields.msg !== 'request' || !fields.route?.startsWith('/api/') || fields.route.endsWith('*')) continue;
      called.add(`${fields.method} ${fields.route}`);
    }
  }
  return called;
}

export function defineConfiguredSuites(suites: Define[]): void {
  let receiver: OtlpReceiver | undefined;
  let restoreEnv = () => {};
  const started: Target[] = [];
  const collector = {
    get endpoint() {
      if (receiver === undefined) throw new Error('the OTLP receiver has not started');
      return receiver.endpoint;
    },
  };
  beforeAll(async () => {
    receiver = await startOtlpReceiver();
    restoreEnv = useProcessEnv(otlpEnv(receiver.endpoint));
  });
  afterAll(async () => {
    // The contract tier's files share a worker (isolate: false): the next file gets the environment back.
    restoreEnv();
    await receiver?.close();
  });

  const spec = configuredTarget(collector, started);
  defineSuites(suites, spec);

  describe(`${spec.name}: the configuration was on`, () => {
    it("answers a listed origin's request with Access-Control-Allow-Origin, and exported a server span of every operation called", async () => {
      const target = await spec.start();
      try {
        const response = await fetch(`${target.baseUrl}${API}/get?_userId=${GHOST}`, {
          headers: { Authorization: target.token, Origin: CONFIGURED_ORIGIN },
        });
        expect(response.status).toBe(404);
        expect(response.headers.get('access-control-allow-origin')).toBe(CONFIGURED_ORIGIN);
        const other = await fetch(`${target.baseUrl}${API}/get?_userId=${GHOST}`, {
          headers: { Authorization: target.token, Origin: 'https://evil.example' },
        });
        expect(other.headers.get('access-control-allow-origin')).toBeNull();
      } finally {
        // Its SDK's shutdown exports what is still buffered, as each suite's server's did.
        await target.close();
      }
      const called = operationsLogged(started);
      expect(called.size).toBeGreaterThan(0);
      const spans = receiver!.spans().filter((s) => s.kind === SERVER_SPAN);
      const traced = new Set(spans.map((s) => s.name));
      expect([...called].filter((operation) => !traced.has(operation))).toEqual([]);
    });
  });
}
