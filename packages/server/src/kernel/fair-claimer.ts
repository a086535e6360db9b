// The shared outbox claimer (issue 60; the stop 68 note's first mend): what the webhook worker
// (events/webhooks/worker.ts) and the message worker (messages/worker.ts) both do to share their
// queues between every server, fairly between sites. Each keeps its own table, its own cap and its
// own attempt; this file is the rest:
// - claim: due items (`next_attempt_at` passed, no live `leased_until`) are leased in one
//   statement, FOR UPDATE SKIP LOCKED, so that two servers never take one item at once; a server
//   that dies mid-attempt leaves a lease that runs out, and another takes the item again (at
//   least once). A claim counts an attempt (`attempts`), which is how a late record tells that
//   another server took over since.
// - the cap: an owner (a webhook endpoint; a site's senders) has at most `cap` items leased at
//   once, counted across servers. The claim's first statement holds the owners' rows (SKIP
//   LOCKED), and the second, whose snapshot begins once it holds them, sees every lease another
//   server's claim of them committed, so that two claims never both see room.
// - fairness: each owner's first `room` due items, then each site's first turn of each of its
//   owners, then their second turns…: sites in turn, then a site's owners. A site with a backlog
//   of 10,000 holds `cap` slots per owner; another site's item is first in line for the next one.
// - the loop (startClaimLoop): at most `concurrency` items in flight on this server; a finished
//   one frees its slot and claims again at once, the poll finds retries that came due.
// - backoff: the delay before the next attempt, after n failures (a fixed schedule, or doubling).
// Why not graphile-worker or pg-boss: both need a node-postgres pool and LISTEN of their own, so
// neither runs on the embedded database (PGlite, one in-process connection).
import { type SQL, sql } from 'drizzle-orm';
import type { Logger } from 'pino';
import { type Db, rows } from '../db/client.ts';
import { sqlArray } from '../db/sql-array.ts';
import { describeError } from '../errors.ts';

/** A queue as the claimer sees it. The item's alias is `d`, its owner's `o`. */
export interface FairQueue {
  /** The items' table: columns id, next_attempt_at, leased_until, attempts and `ownerColumn`. */
  items: string;
  /** The items' column naming their owner. */
  ownerColumn: string;
  /** The owners' table, its key (`ownerColumn`'s target, of type `keyType`) and its site column. */
  owners: { table: string; key: string; keyType: 'text' | 'uuid'; site: string; where?: SQL };
  /** An item still waiting (alias given: `d`, or `l` for the leases counted). */
  waiting(alias: string): SQL;
  /** More that makes an item due (alias `d`): the webhooks' order per account. */
  alsoDue?: SQL;
  /** More to set on the claimed rows (alias `d`). */
  alsoSet?: SQL;
  /** More tables joined into the update (`from claimed, …`) and their condition. */
  join?: { from: SQL; on: SQL };
  /** What a claim answers (alias `d`). */
  returning: SQL;
}

const due = (q: FairQueue) =>
  sql`${q.waiting('d')} and d.next_attempt_at <= now() and (d.leased_until is null or d.leased_until < now())`;

/** Leases up to `limit` due items fairly (see the top), at most `cap` leased per owner. */
export async function claimFairly<T extends Record<string, unknown>>(
  db: Db,
  q: FairQueue,
  limit: number,
  leaseSeconds: number,
  cap: number,
): Promise<T[]> {
  const items = sql.raw(q.items);
  const ownerColumn = sql.raw(q.ownerColumn);
  const owners = sql.raw(q.owners.table);
  const key = sql.raw(q.owners.key);
  const site = sql.raw(q.owners.site);
  return db.transaction(async (tx) => {
    const held = await rows<{ owner: string }>(
      tx,
      sql`select o.${key}::text as owner from ${owners} o
        where ${q.owners.where ?? sql`true`} and exists (
          select 1 from ${items} d where d.${ownerColumn} = o.${key} and ${q.waiting('d')} and d.next_attempt_at <= now()
        )
        for update of o skip locked`,
    );
    if (held.length === 0) return [];
    return rows<T>(
      tx,
      sql`with room as (
        select o.${key} as owner, o.${site} as site, ${cap}::int - (
          select count(*)::int from ${items} l
          where l.${ownerColumn} = o.${key} and ${q.waiting('l')} and l.leased_until is not null and l.leased_until >= now()
        ) as room
        from ${owners} o where o.${key} = any (${sqlArray(
          held.map((h) => h.owner),
          q.owners.keyType,
        )})
      ), turns as (
        -- Each owner's first items, as many as it has room for: a backlog is never read further.
        select c.id, room.site, c.next_attempt_at,
          row_number() over (partition by room.owner order by c.next_attempt_at, c.id) as turn
        from room cross join lateral (
          select d.id, d.next_attempt_at from ${items} d
          where d.${ownerColumn} = room.owner and ${due(q)} ${q.alsoDue === undefined ? sql`` : sql`and ${q.alsoDue}`}
          order by d.next_attempt_at, d.id
          limit greatest(room.room, 0)
        ) c
      ), fair as (
        -- Each site's first turn of each owner, then their second turns…: sites in turn, then owners.
        select id, next_attempt_at, row_number() over (partition by site order by turn, next_attempt_at, id) as site_turn
        from turns
      ), claimed as (
        -- By primary key, whatever the planner guesses of the turns (it hashed the whole table);
        -- still due once locked (a row another claim changed is checked again as it is now).
        select d.id from ${items} d
        where d.id = any (array(select id from fair order by site_turn, next_attempt_at, id limit ${limit})) and ${due(q)}
        for update of d skip locked
      )
      update ${items} d
      set leased_until = now() + make_interval(secs => ${leaseSeconds}), attempts = d.attempts + 1
        ${q.alsoSet === undefined ? sql`` : sql`, ${q.alsoSet}`}
      from claimed ${q.join === undefined ? sql`` : sql`, ${q.join.from}`}
      where d.id = claimed.id ${q.join === undefined ? sql`` : sql`and ${q.join.on}`}
      returning ${q.returning}`,
    );
  });
}

/** The delay before attempt n + 1 after n failures: a fixed schedule, its last step repeating. */
export const scheduledDelayMs = (failures: number, scheduleSeconds: readonly number[]) =>
  scheduleSeconds[Math.min(Math.max(failures, 1) - 1, scheduleSeconds.length - 1)]! * 1000;

/** The delay before attempt n + 1 after n failures: doubling from baseMs, capped, with jitter (half to all of it). */
export function doublingDelayMs(failures: number, baseMs: number, maxMs: number, random = Math.random): number {
  const full = Math.min(maxMs, baseMs * 2 ** Math.min(failures - 1, 40));
  return Math.round(full / 2 + (random() * full) / 2);
}

export interface ClaimLoopOptions<T> {
  logger: Logger;
  /** Items in flight at once on this server. */
  concurrency: number;
  /** How often to look for due items (a kick looks at once). */
  pollMs: number;
  /** Before each round of claims (the webhooks' fan-out); a throw ends the round, logged. */
  prepare?(): Promise<void>;
  /** At each poll, before it looks. */
  onPoll?(): void;
  claim(room: number): Promise<T[]>;
  /** One item's attempt and its record; a throw is logged, and the lease runs out. */
  attempt(item: T): Promise<void>;
  /** The logs' words: "webhook delivery", "message". */
  what: string;
}

export interface ClaimLoop {
  /** Looks for work now. */
  kick(): void;
  /** Stops taking work and waits for what is in flight. */
  stop(): Promise<void>;
}

/** The loop both workers run: claims as many as there is room for, again as each one ends. */
export function startClaimLoop<T>(options: ClaimLoopOptions<T>): ClaimLoop {
  const { logger, concurrency, what } = options;
  const inFlight = new Set<Promise<void>>();
  let running = false;
  let again = false;
  let stopped = false;
  let current: Promise<void> | undefined;
  function cycle(): Promise<void> {
    if (running) {
      again = true;
      return current!;
    }
    running = true;
    current = work();
    return current;
  }
  async function work(): Promise<void> {
    try {
      do {
        again = false;
        await options.prepare?.();
        const room = concurrency - inFlight.size;
        if (room <= 0 || stopped) break;
        const claimed = await options.claim(room);
        for (const item of claimed) {
          const attempt: Promise<void> = options
            .attempt(item)
            .catch((error: unknown) =>
              logger.warn(
                { err: describeError(error) },
                `${what} not recorded; its lease will run out and it is sent again`,
              ),
            )
            .finally(() => {
              inFlight.delete(attempt);
              if (!stopped) void cycle();
            });
          inFlight.add(attempt);
        }
        if (claimed.length === room) again = true;
      } while (again && !stopped);
    } catch (error) {
      logger.warn({ err: describeError(error) }, `${what}: the claim failed; will retry`);
    } finally {
      running = false;
    }
  }
  const kick = () => {
    if (!stopped) void cycle();
  };
  const timer = setInterval(() => {
    options.onPoll?.();
    kick();
  }, options.pollMs);
  timer.unref();
  kick();
  return {
    kick,
    async stop() {
      stopped = true;
      clearInterval(timer);
      // A cycle in progress may still be claiming: what it claims is attempted, and waited for, here.
      await current;
      await Promise.allSettled([...inFlight]);
    },
  };
}
