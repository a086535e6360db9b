// HTTP/1.1 written by hand on a socket, for what fetch would not send as written: paths with `..`
// or percent-encoded letters (fetch normalizes them), a bad or missing Host, a thousand headers.
import { connect } from 'node:net';

export interface RawAnswer {
  status: number;
  /** Header names in lower case. */
  headers: Record<string, string>;
  body: string;
}

/**
 * Sends `head` (the request line and any headers, without the final blank line) to the server,
 * adds `Connection: close` and the blank line, and reads the answer until the server closes.
 */
export function sendRaw(baseUrl: string, head: string): Promise<RawAnswer> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    // Written, not ended: a client that half-closes its side is taken as gone, and its request dropped.
    const socket = connect(Number(port), hostname, () => socket.write(`${head}\r\nConnection: close\r\n\r\n`));
    const chunks: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', reject);
    socket.on('end', () => {
      resolve(parseAnswer(chunks));
    });
  });
}

/** The request line and a Host header for `baseUrl`'s server. */
export const requestLine = (baseUrl: string, method: string, target: string) =>
  `${method} ${target} HTTP/1.1\r\nHost: ${new URL(baseUrl).host}`;

/**
 * Sends `head` (with its headers, without the final blank line) and then `body`, framed chunked
 * in `chunkBytes` pieces with `pauseMs` between them, and only then reads the answer, as many
 * HTTP clients do (the answer waits in the socket meanwhile); the answer as read when the server
 * closes. A connection reset rejects (ECONNRESET, EPIPE): what such a client sees when a server
 * closes on a body it has not read, the answer lost with it.
 */
export function sendRawChunked(
  baseUrl: string,
  head: string,
  body: Buffer,
  { chunkBytes = 32 * 1024, pauseMs = 0 }: { chunkBytes?: number; pauseMs?: number } = {},
): Promise<RawAnswer> {
  const { hostname, port } = new URL(baseUrl);
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    const socket = connect(Number(port), hostname, async () => {
      socket.pause();
      socket.write(`${head}\r\nTransfer-Encoding: chunked\r\n\r\n`);
      for (let at = 0; at < body.length && !socket.destroyed; at += chunkBytes) {
        const piece = body.subarray(at, at + chunkBytes);
        socket.write(`${piece.length.toString(16)}\r\n`);
        socket.write(piece);
        if (!socket.write('\r\n')) await new Promise((next) => socket.once('drain', next).once('close', next));
        if (pauseMs > 0) await new Promise((next) => setTimeout(next, pauseMs));
      }
      if (!socket.destroyed) socket.write('0\r\n\r\n');
      socket.resume();
    });
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (error) => {
      socket.destroy();
      reject(error);
    });
    socket.on('end', () => {
      socket.destroy();
      resolve(parseAnswer(chunks));
    });
  });
}

/** An HTTP/1.1 answer read whole off a socket: its status, headers (names in lower case) and body. */
function parseAnswer(chunks: Buffer[]) {
  const text = Buffer.concat(chunks).toString('utf8');
  const split = text.indexOf('\r\n\r\n');
  const [statusLine = '', ...lines] = text.slice(0, split).split('\r\n');
  const headers: Record<string, string> = {};
  for (const line of lines) {
    const colon = line.indexOf(':');
    headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
  }
  return { status: Number(statusLine.split(' ')[1]), headers, body: text.slice(split + 4) };
}
