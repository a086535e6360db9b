// An attacker's heavy reads (issue 41, F2), shared by the noisy-neighbour test and the bench's
// noisy-neighbour phases: loops of GETs whose answers are megabytes, in a thread of their own so
// that reading them is not the measuring thread's work; and, alike, loops of costly writes.
import { Worker } from 'node:worker_threads';

/**
 * `loops` loops of GETs of `url` with `token`, each answer read to its end and dropped, until told
 * to stop; then it posts how many answers of each status it had (0: failed, -1: abandoned at the stop).
 */
const ATTACKER = `
const { parentPort, workerData } = require('node:worker_threads');
const { url, token, loops } = workerData;
const stop = new AbortController();
const statuses = {};
parentPort.once('message', () => stop.abort());
Promise.all(Array.from({ length: loops }, async () => {
  while (!stop.signal.aborted) {
    const status = await fetch(url, { headers: { authorization: 'Bearer ' + token }, signal: stop.signal })
      .then(async (r) => { await r.arrayBuffer(); return r.status; })
      .catch(() => (stop.signal.aborted ? -1 : 0));
    statuses[status] = (statuses[status] ?? 0) + 1;
  }
})).then(() => parentPort.postMessage(statuses));
`;

/** Starts the loops; `stop()` ends them (requests under way abandoned) and says how many answers of each status came. */
export function heavyReads(url: string, token: string, loops: number): { stop(): Promise<Record<number, number>> } {
  const attacker = new Worker(ATTACKER, { eval: true, workerData: { url, token, loops } });
  const statuses = new Promise<Record<number, number>>((resolve) => attacker.once('message', resolve));
  return {
    async stop() {
      attacker.postMessage('stop');
      const answers = await statuses;
      await attacker.terminate();
      return answers;
    },
  };
}

/** One of postLoops' loops: POSTs of `body` (JSON text, each `%N%` a fresh random word) to `path` with `token`. */
export interface PostLoop {
  path: string;
  token: string;
  body: string;
}

const POSTER = `
const { parentPort, workerData } = require('node:worker_threads');
const { baseUrl, loops } = workerData;
const stop = new AbortController();
parentPort.on('message', () => stop.abort());
Promise.all(loops.map(async ({ path, token, body }) => {
  while (!stop.signal.aborted) {
    const status = await fetch(baseUrl + path, {
      method: 'POST',
      headers: { authorization: 'Bearer ' + token, 'content-type': 'application/json' },
      body: body.replaceAll('%N%', () => Math.random().toString(36).slice(2)),
      signal: stop.signal,
    })
      .then(async (r) => { await r.arrayBuffer(); return r.status; })
      .catch(() => undefined);
    if (status !== undefined) parentPort.postMessage(status);
  }
})).then(() => parentPort.postMessage('done'));
`;

/**
 * An attacker's writes in a thread of their own, as heavyReads' reads are: building, sending and
 * reading them is not the measuring thread's work, so that what the test times is the server.
 * Each loop sends its next request once its last is answered. `answers` grows with each status
 * answered; `stop()` abandons the requests under way and resolves once every loop has ended.
 */
export function postLoops(baseUrl: string, loops: PostLoop[]): { answers: number[]; stop(): Promise<void> } {
  const attacker = new Worker(POSTER, { eval: true, workerData: { baseUrl, loops } });
  const answers: number[] = [];
  // Ends with its loops, or with the thread (an error in it): stop() never waits for nothing.
  const done = new Promise<void>((resolve) => {
    attacker.on('message', (m: number | 'done') => (m === 'done' ? resolve() : answers.push(m)));
    attacker.on('exit', () => resolve());
    attacker.on('error', () => resolve());
  });
  return {
    answers,
    async stop() {
      attacker.postMessage('stop');
      await done;
      await attacker.terminate();
    },
  };
}

/**
 * One account of the site of `token` (write scope) whose person's data is about 6 MB: created with
 * 62 KiB of metadata, then updated `updates` times with 62 KiB more each (one event each, each
 * with the metadata of then). Returns its id.
 */
export async function hoarder(baseUrl: string, token: string, updates = 100): Promise<string> {
  const post = async (path: string, body: unknown, status: number) => {
    const response = await fetch(`${baseUrl}${path}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const text = await response.text();
    if (response.status !== status) throw new Error(`${path} answered ${response.status}: ${text}`);
    return JSON.parse(text) as { result: { _userId: string } };
  };
  const blob = (i: number) => ({ blob: `${i}:`.padEnd(62 * 1024, 'x') });
  const email = `hoarder.${Date.now()}@example.com`;
  const created = await post(
    '/api/1/user/create',
    { email, name: 'Hoarder', password: 'a hoarder passphrase', metadata: blob(0) },
    201,
  );
  const _userId = created.result._userId;
  for (let i = 1; i <= updates; i++) await post('/api/1/user/update', { _userId, metadata: blob(i) }, 200);
  return _userId;
}
