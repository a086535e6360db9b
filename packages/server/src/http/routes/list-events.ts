import type { components } from '@user-accounts/client';
import { ApiError, eventsExpired, invalidRequest } from '../../errors.ts';
import {
  type CloudEvent,
  feedBounds,
  formatSequence,
  lastQueued,
  numberedUpTo,
  readEvents,
} from '../../events/queue.ts';
import type { OpContext } from '../context.ts';
import { defineOperation } from '../define-operation.ts';
import { validQuery } from './shared.ts';

type ListEventsResponse = components['schemas']['ListEventsResponse'];
type EventsQuery = { after?: string; limit?: number; wait?: number; subject?: string };
type Read = { after: number | undefined; limit: number; wait: number; subject: string | undefined };

const LIST_EVENTS_PATH = '/api/1/events';
export const MAX_WAIT_S = 30;
/** A long-poll re-reads at least this often, should a notification be missed (a listener reconnecting). */
const POLL_MS = 1_000;
/** How long a read waits at most for the events its site had queued when it came (waitForQueued). */
const QUEUED_WAIT_MS = 2_000;
/** How often it looks again meanwhile, should it miss the sequencer's notification. */
const QUEUED_POLL_MS = 20;

const tooManyLongPolls = (which: 'token' | 'site', limit: number) =>
  new ApiError(
    'too_many_long_polls',
    `This ${which} already has ${limit} long-polls waiting on this server; try again after Retry-After seconds.`,
    { headers: { 'Retry-After': '1' } },
  );

const expired = (after: number, first: CloudEvent | undefined) =>
  eventsExpired(
    `Events after ${after} were removed (they are kept for the retention time)` +
      (first === undefined ? '.' : `; the oldest kept is ${Number(first.sequence)}.`) +
      ' Resynchronize from list, then read on without after.',
  );

export const listEvents = defineOperation({
  name: 'listEvents',
  method: 'GET',
  path: LIST_EVENTS_PATH,
  scope: 'events',
  request: { query: true },
  waitsMs: MAX_WAIT_S * 1000,
  parse(c) {
    const query = validQuery<EventsQuery>(c, LIST_EVENTS_PATH);
    return {
      after: query.after === undefined ? undefined : Number(query.after),
      limit: query.limit ?? 100,
      wait: query.wait ?? 0,
      // Lower case: the same account however the caller wrote its id (the column is a uuid).
      subject: query.subject?.toLowerCase(),
    };
  },
  async handle(c, read) {
    const { wait } = read;
    const { longPolls } = c.get('deps');
    const { id: token, site } = c.get('token');
    const place = wait > 0 ? longPolls?.enter(token, site) : undefined;
    if (place !== undefined && 'refused' in place) throw tooManyLongPolls(place.refused, place.limit);
    try {
      return await answer(c, site, read);
    } finally {
      place?.leave();
    }
  },
});

/** The events after `after`, waiting up to `wait` seconds for one. */
async function answer(c: OpContext, site: string, { after, limit, wait, subject }: Read) {
  const { database, wake } = c.get('deps');
  await waitForQueued(c, site);
  const bounds = await feedBounds(database.db, site);
  if (after !== undefined && after > bounds.last) {
    throw invalidRequest(`after is past this site's last event (${bounds.last}).`, [
      { pointer: '/after', code: 'invalid_format', message: `is past the last event, ${bounds.last}` },
    ]);
  }
  const until = performance.now() + wait * 1000;
  for (;;) {
    // A filtered read covers the site's events up to `upto`, read first: every event up to it had
    // committed then (the sequencer records last with its events), so a short page may answer it
    // as `next` and the reader skips the other accounts' events for good, not only this time.
    const upto = subject === undefined ? undefined : (await feedBounds(database.db, site)).last;
    const events = await readEvents(database.db, site, after, limit, { subject, upto });
    // pruned_through read after the events: a prune that committed between the two is seen.
    bounds.prunedThrough = (await feedBounds(database.db, site)).prunedThrough;
    if (after !== undefined && after < bounds.prunedThrough)
      throw expired(after, subject === undefined ? events[0] : undefined);
    const left = until - performance.now();
    if (events.length > 0 || left <= 0 || c.req.raw.signal.aborted) {
      const next =
        upto !== undefined && events.length < limit
          ? formatSequence(Math.max(upto, after ?? bounds.prunedThrough))
          : (events.at(-1)?.sequence ?? formatSequence(after ?? bounds.prunedThrough));
      return c.json({ result: { events, next } } as ListEventsResponse, 200);
    }
    await (wake?.next(Math.min(left, POLL_MS), c.req.raw.signal, site) ??
      new Promise((resolve) => setTimeout(resolve, Math.min(left, POLL_MS))));
  }
}

/**
 * Whatever committed before this read is answered: the events its site had queued when it came
 * are waited for, until the sequencer has numbered them (milliseconds; QUEUED_WAIT_MS at most,
 * should no sequencer run), so that a client reads its own writes. Only reads, so that the feed
 * stays a read that a replica can serve; the numbering is the sequencer's (events/sequencer.ts).
 */
async function waitForQueued(c: OpContext, site: string) {
  const { database, wake, sequencer } = c.get('deps');
  const pos = await lastQueued(database.db, site);
  if (pos === undefined) return;
  // This server's sequencer numbers them in its next run: the wait is one run, not a kick's delay.
  await sequencer?.numberNow();
  const until = performance.now() + QUEUED_WAIT_MS;
  const signal = c.req.raw.signal;
  while (!(await numberedUpTo(database.db, site, pos)) && performance.now() < until && !signal.aborted) {
    await (wake?.next(QUEUED_POLL_MS, signal, site) ?? new Promise((resolve) => setTimeout(resolve, QUEUED_POLL_MS)));
  }
}
