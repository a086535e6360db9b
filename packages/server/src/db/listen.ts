// LISTEN on one channel, for caches that must drop what they hold when another server (or the
// CLI) changes it. What matters as much as the notifications is knowing when they may have been
// missed: a cache may only be trusted while its listener is known to be connected, so `live`
// reports every change of that state, and the cache bypasses itself while it is false.
import type { Sql } from 'postgres';

export interface ChannelHandlers {
  /** A NOTIFY on the channel arrived, with its payload (events: the site; tokens: unused). */
  notified(payload: string): void;
  /**
   * true once the LISTEN is in place (again); false as soon as notifications may be missed.
   * `closed`: false because the listener was closed on purpose (the server stops), not lost.
   */
  live(up: boolean, closed?: boolean): void;
  /**
   * Notifications are known to arrive until `until` (on performance.now()'s clock): the listener's
   * own heartbeat came back through LISTEN. Past it, a receiver must not trust what it caches.
   */
  confirmed(until: number): void;
}

export interface Listening {
  close(): Promise<void>;
}

/**
 * Every HEARTBEAT_MS the listener notifies itself and hears its own heartbeat come back: proof
 * that LISTEN works end to end (a connection that answers queries but lost its LISTEN, as behind
 * a transaction-mode pooler, would not pass), valid for CONFIRMED_FOR_MS. So a silent connection
 * is distrusted within CONFIRMED_FOR_MS of its last heartbeat, under the 1 s the spec promises
 * for revocations, whatever the event loop does meanwhile.
 */
export const HEARTBEAT_MS = 250;
export const CONFIRMED_FOR_MS = 800;
const STATEMENT_TIMEOUT_MS = 1_000;
const BEAT = 'beat:';

const quoted = (channel: string) => `"${channel.replace(/"/g, '""')}"`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** `work`, or a rejection once `ms` have passed. */
async function within<T>(ms: number, work: Promise<T>): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([work, late]);
  } finally {
    clearTimeout(timer);
  }
}

/**
 * A connection of its own (a pooled one would lose its LISTEN when the pool recycles it), made
 * anew after every loss. postgres.js's own `sql.listen` re-listens after a drop but says nothing
 * of the drop, and gives up silently when the first attempt to reconnect fails; hence this.
 */
/** How long a start waits for its LISTEN to be live (listenPostgres). */
const FIRST_CONNECT_WAIT_MS = 2_000;

export async function listenPostgres(url: string, channel: string, handlers: ChannelHandlers): Promise<Listening> {
  const { default: postgres } = await import('postgres');
  type Sql = ReturnType<typeof postgres>;
  let closed = false;
  let current: Sql | undefined;
  let trying: Sql | undefined;
  let heartbeat: NodeJS.Timeout | undefined;
  let connecting: Promise<void> | undefined;
  let beats = 0;
  const token = `${BEAT}${process.pid}:${Math.random().toString(36).slice(2)}:`;

  const open = (): Sql => {
    const sql: Sql = postgres(url, {
      max: 1,
      idle_timeout: 0,
      max_lifetime: 0,
      connect_timeout: 2,
      fetch_types: false,
      onnotice: () => {},
      onnotify: (name: string, payload: string) => {
        if (name !== channel || sql !== current) return;
        // Heartbeats (ours and other servers') change nothing; ours prove the LISTEN works.
        if (payload.startsWith(BEAT)) {
          if (payload.startsWith(token)) handlers.confirmed(performance.now() + CONFIRMED_FOR_MS);
          return;
        }
        handlers.notified(payload);
      },
      onclose: () => {
        if (sql === current) lost();
      },
      connection: { application_name: `user-accounts listen ${channel}`.slice(0, 63) },
    } as Parameters<typeof postgres>[1]);
    return sql;
  };

  function lost(): void {
    const sql = current;
    if (sql === undefined) return;
    current = undefined;
    clearInterval(heartbeat);
    handlers.live(false);
    void sql.end({ timeout: 0 }).catch(() => {});
    if (!closed) connecting ??= connect();
  }

  async function connect(): Promise<void> {
    for (let attempt = 0; !closed; attempt++) {
      const sql = open();
      trying = sql;
      try {
        // connect_timeout ends at the first ReadyForQuery: a server that stops answering after
        // that would leave LISTEN waiting for ever.
        await within(STATEMENT_TIMEOUT_MS + 2_000, sql.unsafe(`listen ${quoted(channel)}`));
        trying = undefined;
        if (closed) {
          await sql.end({ timeout: 0 });
          break;
        }
        current = sql;
        connecting = undefined;
        heartbeat = setInterval(() => void beat(sql), HEARTBEAT_MS);
        heartbeat.unref();
        handlers.live(true);
        void beat(sql);
        return;
      } catch {
        trying = undefined;
        await sql.end({ timeout: 0 }).catch(() => {});
        if (!closed) await sleep(Math.min(50 * 2 ** attempt, 1_000));
      }
    }
    connecting = undefined;
  }

  async function beat(sql: Sql): Promise<void> {
    try {
      await within(STATEMENT_TIMEOUT_MS, sql`select pg_notify(${channel}, ${token + beats++})`);
    } catch {
      if (sql === current) lost();
    }
  }

  connecting = connect();
  // A server that starts serving before it listens misses what others tell it in the meantime
  // (webhooks waited for the sender's poll, up to a second, after each start): the first attempt
  // is waited for, up to a bound, so that a database slow to answer still lets the server start.
  await Promise.race([connecting, new Promise((resolve) => setTimeout(resolve, FIRST_CONNECT_WAIT_MS).unref())]);
  return {
    async close() {
      if (closed) return; // a second close (the service's, then the database's) changes nothing
      closed = true;
      clearInterval(heartbeat);
      const sql = current ?? trying;
      current = undefined;
      handlers.live(false, true);
      await sql?.end({ timeout: 0 }).catch(() => {});
      await connecting?.catch(() => {});
    },
  };
}

/**
 * The embedded database (db/client.ts, openPglite): PGlite has one session, which its one
 * connection holds, and a NOTIFY comes back on the connection whose statement sent it. So each
 * channel is LISTENed on that connection and heard through its onnotify. The session lives in
 * this process and keeps its LISTENs across reconnects: they cannot be lost.
 */
export function sharedListeners() {
  const channels = new Map<string, ChannelHandlers>();
  return {
    onnotify(channel: string, payload: string): void {
      channels.get(channel)?.notified(payload);
    },
    async listen(sql: Sql, channel: string, handlers: ChannelHandlers): Promise<Listening> {
      channels.set(channel, handlers);
      await sql.unsafe(`listen ${quoted(channel)}`);
      handlers.live(true);
      handlers.confirmed(Number.POSITIVE_INFINITY);
      return {
        async close() {
          channels.delete(channel);
          await sql.unsafe(`unlisten ${quoted(channel)}`).catch(() => {}); // the database may be closed first
        },
      };
    },
  };
}
