// LISTEN on one channel, for caches that must drop what they hold when another server (or the
// CLI) changes it. What matters as much as the notifications is knowing when they may have been
// missed: a cache may only be trusted while its listener is known to be connected, so `live`
// reports every change of that state, and the cache bypasses itself while it is false.
import type { PGlite } from '@electric-sql/pglite';

export interface ChannelHandlers {
  /** A NOTIFY on the channel arrived (its payload is not used: receivers drop what they cache). */
  notified(): void;
  /** true once the LISTEN is in place (again); false as soon as notifications may be missed. */
  live(up: boolean): void;
}

export interface Listening {
  close(): Promise<void>;
}

/** How often the listening connection is asked to answer, and how long it has to. */
export const HEARTBEAT_MS = 1_000;
const HEARTBEAT_TIMEOUT_MS = 1_000;

const quoted = (channel: string) => `"${channel.replace(/"/g, '""')}"`;
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * A connection of its own (a pooled one would lose its LISTEN when the pool recycles it), made
 * anew after every loss. postgres.js's own `sql.listen` re-listens after a drop but says nothing
 * of the drop, and gives up silently when the first attempt to reconnect fails; hence this.
 * A connection that stays open but stops answering (a network partition) is caught by the
 * heartbeat within HEARTBEAT_MS + HEARTBEAT_TIMEOUT_MS.
 */
export async function listenPostgres(url: string, channel: string, handlers: ChannelHandlers): Promise<Listening> {
  const { default: postgres } = await import('postgres');
  type Sql = ReturnType<typeof postgres>;
  let closed = false;
  let current: Sql | undefined;
  let heartbeat: NodeJS.Timeout | undefined;
  let connecting: Promise<void> | undefined;

  const open = (): Sql => {
    const sql: Sql = postgres(url, {
      max: 1,
      idle_timeout: 0,
      max_lifetime: 0,
      connect_timeout: 2,
      fetch_types: false,
      onnotice: () => {},
      onnotify: (name: string) => {
        if (name === channel && sql === current) handlers.notified();
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
      try {
        await sql.unsafe(`listen ${quoted(channel)}`);
        if (closed) {
          await sql.end({ timeout: 0 });
          break;
        }
        current = sql;
        connecting = undefined;
        heartbeat = setInterval(() => void beat(sql), HEARTBEAT_MS);
        heartbeat.unref();
        handlers.live(true);
        return;
      } catch {
        await sql.end({ timeout: 0 }).catch(() => {});
        await sleep(Math.min(50 * 2 ** attempt, 1_000));
      }
    }
    connecting = undefined;
  }

  async function beat(sql: Sql): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('heartbeat timed out')), HEARTBEAT_TIMEOUT_MS);
    });
    try {
      await Promise.race([sql`select 1`, late]);
    } catch {
      if (sql === current) lost();
    } finally {
      clearTimeout(timer);
    }
  }

  connecting = connect();
  return {
    async close() {
      closed = true;
      clearInterval(heartbeat);
      const sql = current;
      current = undefined;
      await sql?.end({ timeout: 1 });
      await connecting;
    },
  };
}

/** The embedded database lives in this process: a LISTEN there cannot be lost. */
export async function listenPglite(client: PGlite, channel: string, handlers: ChannelHandlers): Promise<Listening> {
  const unlisten = await client.listen(channel, () => handlers.notified());
  handlers.live(true);
  return {
    async close() {
      await unlisten().catch(() => {}); // the database may be closed first
    },
  };
}
