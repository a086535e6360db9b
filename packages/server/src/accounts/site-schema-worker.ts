// The worker thread that checks metadata against sites' schemas (issue 41, F1), so that a costly
// check holds no event loop but this one, and is stopped (the worker terminated) past its
// deadline: see schema-checks.ts. It answers each message with the check's faults.
import { parentPort } from 'node:worker_threads';
import { siteSchemaFaults, siteSchemaValidator } from './site-schema.ts';

export interface SchemaCheckRequest {
  schema: unknown;
  metadata: Record<string, unknown>;
  pointer: string;
}

// The thread keeps the process's priority. At the lowest (nice 19, as it once ran) it stalled the
// event loop it was meant to spare: on a machine whose cores were busy, /healthz waited 195–395 ms
// while thrasher's checks ran (noisy-neighbours' metadata test failed three tries of three beside
// two busy loops, and passed three of three at the process's priority), likely the main thread
// waiting on what this starved thread held (one address space, one pool of V8 helper threads). It
// is bounded otherwise: one thread of checks, SCHEMA_CHECK_MS of CPU a check, sites in turn.
parentPort?.on('message', ({ schema, metadata, pointer }: SchemaCheckRequest) => {
  const validate = siteSchemaValidator(schema);
  parentPort?.postMessage(validate === undefined ? [] : siteSchemaFaults(validate, metadata, pointer));
});
parentPort?.postMessage('ready');
