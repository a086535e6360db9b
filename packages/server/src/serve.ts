// The HTTP server around the app. Node answers some malformed requests itself, before any
// middleware runs (headers over 16 KiB, broken request lines), with a bare status and no body;
// here they get the same problem+json as every other error.
import type { Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { serve } from '@hono/node-server';
import { ApiError, problemBody } from './errors.ts';
import { uuidv7 } from './ids.ts';

/** Node's default limit on the request line plus headers (--max-http-header-size). */
const HEADER_LIMIT = 16 * 1024;

const REASONS: Record<number, string> = {
  400: 'Bad Request',
  408: 'Request Timeout',
  431: 'Request Header Fields Too Large',
};

function answerClientError(error: Error & { code?: string }, socket: Duplex): void {
  // Nothing to answer: the peer went away, or a response has already started on this socket.
  if (error.code === 'ECONNRESET' || !socket.writable || (socket as { _httpMessage?: unknown })._httpMessage) {
    socket.destroy();
    return;
  }
  const problem =
    error.code === 'HPE_HEADER_OVERFLOW'
      ? new ApiError(431, 'headers_too_large', `The request line and headers must be at most ${HEADER_LIMIT} bytes.`)
      : new ApiError(400, 'invalid_request', 'The request is not well-formed HTTP/1.1.');
  const requestId = uuidv7();
  const body = JSON.stringify(problemBody(problem, requestId));
  socket.end(
    `HTTP/1.1 ${problem.status} ${REASONS[problem.status]}\r\n` +
      'Content-Type: application/problem+json\r\n' +
      `Content-Length: ${Buffer.byteLength(body)}\r\n` +
      `X-Request-Id: ${requestId}\r\n` +
      'X-Content-Type-Options: nosniff\r\n' +
      'Cache-Control: no-store\r\n' +
      'Connection: close\r\n\r\n' +
      body,
  );
}

export function serveApp(
  app: { fetch: (request: Request) => Response | Promise<Response> },
  options: { port: number; hostname: string },
  onListening: (info: AddressInfo) => void,
): Server {
  const server = serve({ fetch: app.fetch, port: options.port, hostname: options.hostname }, onListening) as Server;
  server.on('clientError', answerClientError);
  return server;
}
