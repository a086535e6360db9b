// The worker thread that checks metadata against sites' schemas (issue 41, F1), so that a costly
// check holds no event loop but this one, and is stopped (the worker terminated) past its
// deadline: see schema-checks.ts. It answers each message with the check's faults.
import { constants, setPriority } from 'node:os';
import { parentPort } from 'node:worker_threads';
import { siteSchemaFaults, siteSchemaValidator } from './site-schema.ts';

export interface SchemaCheckRequest {
  schema: unknown;
  metadata: Record<string, unknown>;
  pointer: string;
}

// The lowest scheduling priority, for this thread only (Linux gives each thread its own: elsewhere
// it would be the whole process's, so it is left alone): on a busy machine, the event loop and the
// hashes take the CPU before a site's costly check does.
if (process.platform === 'linux') setPriority(0, constants.priority.PRIORITY_LOW);

parentPort?.on('message', ({ schema, metadata, pointer }: SchemaCheckRequest) => {
  const validate = siteSchemaValidator(schema);
  parentPort?.postMessage(validate === undefined ? [] : siteSchemaFaults(validate, metadata, pointer));
});
parentPort?.postMessage('ready');
