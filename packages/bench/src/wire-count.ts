// What a server says to PostgreSQL, counted on the wire (issue 63, point 1): a TCP proxy between
// the server and PostgreSQL that reads the protocol's messages as they pass, and counts, per
// statement text, the statements run (an Execute of the extended protocol, or a simple Query) and
// the round trips (a ReadyForQuery from the server: the client waited for it). These counts do not
// depend on the machine's load, unlike every timing: they are what the write bench shows first.
// Only for a counting pass (a few hundred requests), never in a timed round: the proxy costs time.
import { connect, createServer, type Server, type Socket } from 'node:net';

export interface WireCounts {
  /** Execute messages and simple Queries. */
  statements: number;
  /** Parse messages: statements parsed and planned (a named one once per connection, an unnamed one each time). */
  parses: number;
  /** ReadyForQuery messages after the start-up (each one the end of a round trip). */
  roundTrips: number;
  /** Statements by their text (a Parse's, or the simple Query's), the most frequent first. */
  byText: [string, number][];
}

export interface WireCounter {
  /** The PostgreSQL URL to give the server: this proxy's address, the same user and database. */
  url: string;
  /** What passed since the last reset. */
  counts(): WireCounts;
  reset(): void;
  stop(): Promise<void>;
}

/** Reads a stream of protocol messages (type byte, int32 length including itself, body). */
class MessageReader {
  #buffer: Buffer = Buffer.alloc(0);
  /** The client's first message (start-up or SSLRequest) has no type byte. */
  #untyped: boolean;
  constructor(untypedFirst: boolean) {
    this.#untyped = untypedFirst;
  }
  push(chunk: Buffer, onMessage: (type: number, body: Buffer) => void): void {
    this.#buffer = this.#buffer.length === 0 ? chunk : Buffer.concat([this.#buffer, chunk]);
    for (;;) {
      if (this.#untyped) {
        if (this.#buffer.length < 4) return;
        const length = this.#buffer.readInt32BE(0);
        if (this.#buffer.length < length) return;
        const code = this.#buffer.readInt32BE(4);
        this.#buffer = this.#buffer.subarray(length);
        // SSLRequest (80877103) or GSSENCRequest: the start-up message follows, untyped too.
        if (code !== 80877103 && code !== 80877104) this.#untyped = false;
        continue;
      }
      if (this.#buffer.length < 5) return;
      const length = this.#buffer.readInt32BE(1);
      if (this.#buffer.length < 1 + length) return;
      onMessage(this.#buffer[0]!, this.#buffer.subarray(5, 1 + length));
      this.#buffer = this.#buffer.subarray(1 + length);
    }
  }
}

/** A proxy to the PostgreSQL of `target` (a postgres:// URL), counting what passes. */
export async function startWireCounter(target: string): Promise<WireCounter> {
  const to = new URL(target);
  let statements = 0;
  let roundTrips = 0;
  let parses = 0;
  const byText = new Map<string, number>();
  const sockets = new Set<Socket>();
  const server: Server = createServer((client) => {
    const upstream = connect(Number(to.port || 5432), to.hostname);
    sockets.add(client);
    sockets.add(upstream);
    // Prepared statements by name (a named Parse is executed many times): the text of each.
    const named = new Map<string, string>();
    let unnamed = '';
    let started = false;
    const fromClient = new MessageReader(true);
    const fromServer = new MessageReader(false);
    const count = (text: string) => {
      statements++;
      const key = text.replace(/\s+/g, ' ').trim();
      byText.set(key, (byText.get(key) ?? 0) + 1);
    };
    client.on('data', (chunk: Buffer) => {
      fromClient.push(chunk, (type, body) => {
        if (type === 0x50 /* P */) {
          parses++;
          const nameEnd = body.indexOf(0);
          const name = body.toString('utf8', 0, nameEnd);
          const text = body.toString('utf8', nameEnd + 1, body.indexOf(0, nameEnd + 1));
          if (name === '') unnamed = text;
          else named.set(name, text);
        } else if (type === 0x42 /* B */) {
          const portalEnd = body.indexOf(0);
          const name = body.toString('utf8', portalEnd + 1, body.indexOf(0, portalEnd + 1));
          unnamed = name === '' ? unnamed : (named.get(name) ?? name);
        } else if (type === 0x45 /* E */) count(unnamed);
        else if (type === 0x51 /* Q */) {
          parses++;
          count(body.toString('utf8', 0, body.length - 1));
        }
      });
      upstream.write(chunk);
    });
    upstream.on('data', (chunk: Buffer) => {
      fromServer.push(chunk, (type) => {
        if (type !== 0x5a /* Z */) return;
        if (started) roundTrips++;
        started = true;
      });
      client.write(chunk);
    });
    const close = () => {
      client.destroy();
      upstream.destroy();
      sockets.delete(client);
      sockets.delete(upstream);
    };
    client.on('close', close);
    upstream.on('close', close);
    client.on('error', close);
    upstream.on('error', close);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as import('node:net').AddressInfo).port;
  const url = new URL(target);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    counts: () => ({
      statements,
      parses,
      roundTrips,
      byText: [...byText.entries()].sort((a, b) => b[1] - a[1]),
    }),
    reset() {
      statements = 0;
      roundTrips = 0;
      parses = 0;
      byText.clear();
    },
    async stop() {
      for (const s of sockets) s.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}
