// Checks of metadata against a site's schema, off the event loop every site shares (issue 41,
// F1). The schema rules (site-schema.ts) bound what a schema may ask, but RE2's linear time has a
// constant that depends on the pattern: twenty patterns that defeat its DFA (`[ab]*a[ab]{20}$`,
// …) took 10.5 s over 60 KB. So each check runs in one worker thread, under a deadline: past
// SCHEMA_CHECK_MS of its CPU time the worker is terminated (the only way to stop synchronous code) and the
// metadata refused; the next check starts a new worker. Sites take turns: each site's checks
// wait in its own queue, and the worker takes one check from each waiting site in turn, so a
// site that sends costly checks delays another site's by at most one check a round.
import { Worker } from 'node:worker_threads';
import type { SchemaFault } from './site-schema.ts';
import type { SchemaCheckRequest } from './site-schema-worker.ts';

/**
 * The most CPU time one check may take. A real one takes far less (a 64 KiB array of 8,000 unique
 * strings: 5–19 ms on a loaded machine).
 */
export const SCHEMA_CHECK_MS = 250;

// Beside this file in the source; beside main.js in the bundle (build.ts builds the worker too).
const workerUrl = new URL(
  import.meta.url.endsWith('.ts') ? './site-schema-worker.ts' : './site-schema-worker.js',
  import.meta.url,
);

interface Check extends SchemaCheckRequest {
  resolve(faults: SchemaFault[]): void;
  reject(error: unknown): void;
}

/** Checks waiting, by site; a Map keeps its order, so the first key is the site whose turn it is. */
const waiting = new Map<string, Check[]>();
let worker: { thread: Worker; ready: boolean } | undefined;
let running: { check: Check; timer: NodeJS.Timeout | undefined } | undefined;
let lastSite: string | undefined;

/** The faults of `metadata` under a site's `schema` (pointers under `pointer`); [] when it matches. */
export function checkSiteSchema(
  site: string,
  schema: unknown,
  metadata: Record<string, unknown>,
  pointer: string,
  /** Aborts once the request is gone (its deadline passed, its client left): a waiting check leaves the line. */
  signal?: AbortSignal,
): Promise<SchemaFault[]> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    // The abort listener goes once the check settles: an import's rows share one signal, and a
    // listener each would pile up (holding each row's metadata) until the request ended.
    const onAbort = () => {
      const line = waiting.get(site);
      const at = line?.indexOf(check) ?? -1;
      if (at < 0) return; // running or done: it ends as it will
      line!.splice(at, 1);
      if (line!.length === 0) waiting.delete(site);
      reject(signal!.reason);
      next();
    };
    const check = {
      schema,
      metadata,
      pointer,
      resolve: (faults: SchemaFault[]) => {
        signal?.removeEventListener('abort', onAbort);
        resolve(faults);
      },
      reject: (error: unknown) => {
        signal?.removeEventListener('abort', onAbort);
        reject(error);
      },
    };
    const queue = waiting.get(site);
    if (queue === undefined) waiting.set(site, [check]);
    else queue.push(check);
    signal?.addEventListener('abort', onAbort, { once: true });
    next();
  });
}

const late = (pointer: string): SchemaFault[] => [
  {
    pointer: pointer || '/',
    code: 'not_allowed',
    message: `could not be checked against the site's metadata schema within ${SCHEMA_CHECK_MS} ms: send less of what its patterns check`,
  },
];

/**
 * Starts the next check if none runs. The worker keeps the process alive only while a check runs or
 * waits (a CLI's process that awaits one has nothing else that would), never when idle.
 */
function next(): void {
  step();
  if (worker === undefined) return;
  if (running !== undefined || waiting.size > 0) worker.thread.ref();
  else worker.thread.unref();
}

function step(): void {
  if (running !== undefined || waiting.size === 0) return;
  const current = worker ?? start();
  if (!current.ready) return; // its 'ready' calls next()
  // The first site in line, unless that is the site whose check ran last and another waits (it
  // may have queued again while its check ran).
  let site = waiting.keys().next().value!;
  if (site === lastSite && waiting.size > 1) site = [...waiting.keys()][1]!;
  const queue = waiting.get(site)!;
  lastSite = site;
  const check = queue.shift()!;
  // The site goes to the back of the line, with what it has left.
  waiting.delete(site);
  if (queue.length > 0) waiting.set(site, queue);
  running = { check, timer: undefined };
  // The deadline counts the worker's own CPU time, not the wall clock: on a busy machine a check
  // that waits for the CPU is not refused for it; the request's own deadline bounds that wait (503).
  const since = current.thread.cpuUsage();
  const watch = (after: number) => {
    running!.timer = setTimeout(async () => {
      const [before, now] = await Promise.all([since, current.thread.cpuUsage()]).catch(() => [undefined, undefined]);
      if (running?.check !== check) return; // answered meanwhile
      const used = before === undefined || now === undefined ? SCHEMA_CHECK_MS : cpuMs(now) - cpuMs(before);
      if (used < SCHEMA_CHECK_MS) return watch(Math.max(10, SCHEMA_CHECK_MS - used));
      running = undefined;
      worker = undefined;
      void current.thread.terminate();
      check.resolve(late(check.pointer));
      next();
    }, after);
  };
  watch(SCHEMA_CHECK_MS);
  current.thread.postMessage({ schema: check.schema, metadata: check.metadata, pointer: check.pointer });
}

const cpuMs = (usage: { user: number; system: number }) => (usage.user + usage.system) / 1000;

function start(): NonNullable<typeof worker> {
  const thread = new Worker(workerUrl);
  const started = { thread, ready: false };
  worker = started;
  thread.on('message', (message: SchemaFault[] | 'ready') => {
    if (worker !== started) return;
    if (message === 'ready') {
      started.ready = true;
    } else if (running !== undefined) {
      clearTimeout(running.timer);
      const { check } = running;
      running = undefined;
      check.resolve(message);
    }
    next();
  });
  const fail = (error: unknown) => {
    if (worker !== started) return;
    worker = undefined;
    if (running !== undefined) {
      clearTimeout(running.timer);
      const { check } = running;
      running = undefined;
      check.reject(error);
    }
    // A worker that could not even start (a missing file, a broken build) would fail again: the
    // checks waiting fail with it (500, logged) rather than start workers without end.
    if (!started.ready) {
      for (const queue of waiting.values()) for (const check of queue) check.reject(error);
      waiting.clear();
    }
    next();
  };
  thread.on('error', fail);
  thread.on('exit', (code) => fail(new Error(`the schema worker exited (${code})`)));
  return started;
}
