// Checks of metadata against a site's schema, off the event loop every site shares (issue 41,
// F1). The schema rules (site-schema.ts) bound what a schema may ask, but RE2's linear time has a
// constant that depends on the pattern: twenty patterns that defeat its DFA (`[ab]*a[ab]{20}$`,
// …) took 10.5 s over 60 KB. So each check runs in one worker thread, under a deadline: past
// SCHEMA_CHECK_MS of its CPU time the worker is terminated (the only way to stop synchronous code) and the
// metadata refused; the next check starts a new worker. Sites take turns: each site's checks
// wait in its own queue, and the worker takes one check from each waiting site in turn. Still, a
// site whose every check ran into the deadline delayed another's by 250 ms and a worker's start
// a round (issue 57, G2: 8 → 323 ms p50): a site whose check ran late is moved, with the checks
// it has waiting, to a lane of its own kind (a second worker, where such sites take turns with
// each other) until SUSPECT_MS have passed without a late check of its; the first lane is left
// to the sites whose checks end in time.
import { Worker } from 'node:worker_threads';
import type { SchemaFault } from './site-schema.ts';
import type { SchemaCheckRequest } from './site-schema-worker.ts';

/**
 * The most CPU time one check may take. A real one takes far less (a 64 KiB array of 8,000 unique
 * strings: 5–19 ms on a loaded machine).
 */
export const SCHEMA_CHECK_MS = 250;

/** How long a site whose check ran late keeps its checks in the slow lane: since its last late one. */
export const SUSPECT_MS = 60_000;

/**
 * A check that took this much of the worker's CPU counts as late too, though answered: a site
 * whose every check took 240 ms would otherwise hold the others back by that much a round.
 */
export const SLOW_CHECK_MS = 50;
/** Slow checks of a site in a row that count as a late one (its schema's first check compiles it). */
export const SLOW_CHECKS = 3;
/** Each site's slow checks in a row, in the first lane. */
const slowInARow = new Map<string, number>();

// Beside this file in the source; beside main.js in the bundle (build.ts builds the worker too).
const workerUrl = new URL(
  import.meta.url.endsWith('.ts') ? './site-schema-worker.ts' : './site-schema-worker.js',
  import.meta.url,
);

interface Check extends SchemaCheckRequest {
  site: string;
  resolve(faults: SchemaFault[]): void;
  reject(error: unknown): void;
}

/** One worker and the checks waiting for it, by site, taking turns. */
interface Lane {
  /** Checks waiting, by site; a Map keeps its order, so the first key is the site whose turn it is. */
  waiting: Map<string, Check[]>;
  worker: { thread: Worker; ready: boolean } | undefined;
  running:
    | { check: Check; timer: NodeJS.Timeout | undefined; since: Promise<{ user: number; system: number }> }
    | undefined;
  lastSite: string | undefined;
}

const newLane = (): Lane => ({ waiting: new Map(), worker: undefined, running: undefined, lastSite: undefined });
/** The sites whose checks end in time, and those whose check ran late lately. */
const quick = newLane();
const slow = newLane();
/** When each site's last check ran late (performance.now()); a site here for SUSPECT_MS is in the slow lane. */
const lateAt = new Map<string, number>();

function laneOf(site: string): Lane {
  const at = lateAt.get(site);
  if (at === undefined) return quick;
  if (performance.now() - at < SUSPECT_MS) return slow;
  lateAt.delete(site);
  return quick;
}

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
      // Either lane: the site may have moved while its check waited.
      for (const lane of [quick, slow]) {
        const line = lane.waiting.get(site);
        const at = line?.indexOf(check) ?? -1;
        if (at < 0) continue;
        line!.splice(at, 1);
        if (line!.length === 0) lane.waiting.delete(site);
        reject(signal!.reason);
        next(lane);
        return;
      }
      // running or done: it ends as it will
    };
    const check: Check = {
      site,
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
    const lane = laneOf(site);
    const queue = lane.waiting.get(site);
    if (queue === undefined) lane.waiting.set(site, [check]);
    else queue.push(check);
    signal?.addEventListener('abort', onAbort, { once: true });
    next(lane);
  });
}

const late = (pointer: string): SchemaFault[] => [
  {
    pointer: pointer || '/',
    code: 'not_allowed',
    message: `could not be checked against the site's metadata schema within ${SCHEMA_CHECK_MS} ms: send less of what its patterns check`,
  },
];

/** `site`'s check ran late: it and the checks it has waiting go to the slow lane. */
function suspect(site: string): void {
  const now = performance.now();
  lateAt.set(site, now);
  // Sites whose last late check is long past weigh nothing: the map keeps the recent ones.
  if (lateAt.size > 1_000) for (const [name, at] of lateAt) if (now - at >= SUSPECT_MS) lateAt.delete(name);
  if (slowInARow.size > 1_000) slowInARow.clear();
  const moving = quick.waiting.get(site);
  if (moving === undefined) return;
  quick.waiting.delete(site);
  const queue = slow.waiting.get(site);
  if (queue === undefined) slow.waiting.set(site, moving);
  else queue.push(...moving);
  next(slow);
}

/**
 * Starts the lane's next check if none runs. Its worker keeps the process alive only while a check
 * runs or waits (a CLI's process that awaits one has nothing else that would), never when idle.
 */
function next(lane: Lane): void {
  step(lane);
  if (lane.worker === undefined) return;
  if (lane.running !== undefined || lane.waiting.size > 0) lane.worker.thread.ref();
  else lane.worker.thread.unref();
}

function step(lane: Lane): void {
  if (lane.running !== undefined || lane.waiting.size === 0) return;
  const current = lane.worker ?? start(lane);
  if (!current.ready) return; // its 'ready' calls next()
  // The first site in line, unless that is the site whose check ran last and another waits (it
  // may have queued again while its check ran).
  let site = lane.waiting.keys().next().value!;
  if (site === lane.lastSite && lane.waiting.size > 1) site = [...lane.waiting.keys()][1]!;
  const queue = lane.waiting.get(site)!;
  lane.lastSite = site;
  const check = queue.shift()!;
  // The site goes to the back of the line, with what it has left.
  lane.waiting.delete(site);
  if (queue.length > 0) lane.waiting.set(site, queue);
  // The deadline counts the worker's own CPU time, not the wall clock: on a busy machine a check
  // that waits for the CPU is not refused for it; the request's own deadline bounds that wait (503).
  const since = current.thread.cpuUsage();
  const running: NonNullable<Lane['running']> = { check, timer: undefined, since };
  lane.running = running;
  const watch = (after: number) => {
    running.timer = setTimeout(async () => {
      const [before, now] = await Promise.all([since, current.thread.cpuUsage()]).catch(() => [undefined, undefined]);
      if (lane.running !== running) return; // answered meanwhile
      const used = before === undefined || now === undefined ? SCHEMA_CHECK_MS : cpuMs(now) - cpuMs(before);
      if (used < SCHEMA_CHECK_MS) return watch(Math.max(10, SCHEMA_CHECK_MS - used));
      lane.running = undefined;
      lane.worker = undefined;
      void current.thread.terminate();
      check.resolve(late(check.pointer));
      suspect(check.site);
      // The first lane's next worker starts now, not at its next check: a site whose checks end
      // in time should not wait for the start that a slow site's check made necessary.
      if (lane === quick) start(lane).thread.unref();
      next(lane);
    }, after);
  };
  watch(SCHEMA_CHECK_MS);
  current.thread.postMessage({ schema: check.schema, metadata: check.metadata, pointer: check.pointer });
}

const cpuMs = (usage: { user: number; system: number }) => (usage.user + usage.system) / 1000;

function start(lane: Lane): NonNullable<Lane['worker']> {
  const thread = new Worker(workerUrl);
  const started = { thread, ready: false };
  lane.worker = started;
  thread.on('message', (message: SchemaFault[] | 'ready') => {
    if (lane.worker !== started) return;
    if (message === 'ready') {
      started.ready = true;
    } else if (lane.running !== undefined) {
      clearTimeout(lane.running.timer);
      const { check, since } = lane.running;
      lane.running = undefined;
      check.resolve(message);
      // Answered, but slowly: the site's next checks go to the slow lane as a late one's do.
      if (lane === quick) {
        void Promise.all([since, thread.cpuUsage()])
          .then(([before, after]) => {
            if (cpuMs(after) - cpuMs(before) < SLOW_CHECK_MS) return void slowInARow.delete(check.site);
            const slow = (slowInARow.get(check.site) ?? 0) + 1;
            if (slow < SLOW_CHECKS) return void slowInARow.set(check.site, slow);
            slowInARow.delete(check.site);
            suspect(check.site);
          })
          .catch(() => {});
      }
    }
    next(lane);
  });
  const fail = (error: unknown) => {
    if (lane.worker !== started) return;
    lane.worker = undefined;
    if (lane.running !== undefined) {
      clearTimeout(lane.running.timer);
      const { check } = lane.running;
      lane.running = undefined;
      check.reject(error);
    }
    // A worker that could not even start (a missing file, a broken build) would fail again: the
    // checks waiting fail with it (500, logged) rather than start workers without end.
    if (!started.ready) {
      for (const queue of lane.waiting.values()) for (const check of queue) check.reject(error);
      lane.waiting.clear();
    }
    next(lane);
  };
  thread.on('error', fail);
  thread.on('exit', (code) => fail(new Error(`the schema worker exited (${code})`)));
  return started;
}
