// The HTTP server around the app. Node and @hono/node-server answer some requests themselves,
// before any middleware runs (headers over the limits, broken request lines, a bad Host, a
// backslash in the path), with a bare status and no body; here they get the same problem+json
// as every other error. Targets are routed as sent: a path that URL parsing would turn into
// another (dot segments, percent-encoded `/` or unreserved characters) is refused, so that a
// proxy that filters by the raw path sees the path that is routed.
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Duplex } from 'node:stream';
import { getRequestListener, RequestError } from '@hono/node-server';
import { ApiError, internalError, invalidRequest } from '../errors.ts';
import { uuidv7 } from '../kernel/ids.ts';
import { problemBody } from './errors.ts';
import { requestIdFrom } from './middleware/request-id.ts';
import type { NodeRoutes } from './pipeline.ts';

/**
 * The spec's limit on what Node counts of a request's head: the target, and each header's name
 * and value (not the method, the version or the separators).
 */
export const HEADER_BYTES = 16 * 1024;
/** The spec's limit on header fields (Node's default, 2,000 names and values, made explicit). */
export const HEADER_FIELDS = 1000;

const HEADERS_TOO_LARGE =
  `The request target and headers must be at most ${HEADER_BYTES.toLocaleString('en-US')} bytes (names and ` +
  `values), in at most ${HEADER_FIELDS.toLocaleString('en-US')} header fields.`;

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
      ? new ApiError('headers_too_large', HEADERS_TOO_LARGE)
      : invalidRequest('The request is not well-formed HTTP/1.1.');
  // The head could not be read, so neither could the caller's X-Request-Id.
  const { headers, body } = problemAnswer(problem, uuidv7());
  socket.end(
    `HTTP/1.1 ${problem.status} ${REASONS[problem.status]}\r\n` +
      Object.entries(headers)
        .map(([name, value]) => `${name}: ${value}\r\n`)
        .join('') +
      `\r\n${body}`,
  );
}

/** A problem as the app renders one, with the headers every answer carries; the connection then closes. */
function problemAnswer(problem: ApiError, requestId: string) {
  const body = JSON.stringify(problemBody(problem, requestId));
  const headers = {
    'Content-Type': 'application/problem+json',
    'Content-Length': String(Buffer.byteLength(body)),
    'X-Request-Id': requestId,
    'X-Content-Type-Options': 'nosniff',
    'Cache-Control': 'no-store',
    Connection: 'close',
  };
  return { headers, body };
}

const HOST = /^(?:[A-Za-z0-9._-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]{1,5})?$/;
const DOT_SEGMENT = /(?:^|\/)\.{1,2}(?:\/|$)/;
const ENCODED = /%([0-9A-Fa-f]{2})/g;
const UNRESERVED_OR_SLASH = /^[A-Za-z0-9._~/-]$/;

/**
 * Why the request cannot be routed as sent, or undefined when it can. The path is the target's,
 * up to its query (an absolute-form target's path too); the query is left to the operations.
 */
function refusal(incoming: IncomingMessage): string | undefined {
  const host = incoming.headers.host;
  // RFC 9112: an HTTP/1.1 request without a Host is 400; HTTP/1.0 needs none.
  if (host === undefined ? incoming.httpVersion !== '1.0' : !HOST.test(host)) {
    return 'The Host header must be a host name or address, with an optional port.';
  }
  const target = incoming.url ?? '';
  if (target.includes('#')) return 'The request target must not contain a fragment (#).';
  const absolute = /^https?:\/\/[^/?]*/i.exec(target);
  const path = (absolute === null ? target : target.slice(absolute[0].length)).split('?', 1)[0]!;
  if (path.includes('\\')) return 'The request path must not contain a backslash.';
  if (DOT_SEGMENT.test(path)) return 'The request path must not contain . or .. segments.';
  if (!path.includes('%')) return undefined;
  for (const [, hex] of path.matchAll(ENCODED)) {
    if (UNRESERVED_OR_SLASH.test(String.fromCharCode(Number.parseInt(hex!, 16)))) {
      return 'The request path must not percent-encode / or an unreserved character (A-Z a-z 0-9 - . _ ~).';
    }
  }
  return undefined;
}

/** How long, and how much of a body, a connection is read on after its answer (see lingerOnClose). */
export const LINGER_MS = 5_000;
export const LINGER_BYTES = 16 * 1024 * 1024;

/**
 * A request answered before its body was read (413, or any refusal before the body) closes its
 * connection with the rest of the body on its way: closing at once would reset the connection
 * (TCP sends RST for data never read), and a client that reads only once it has sent its body
 * would lose the answer with it (issue 41: a chunked 2 MB body got a reset instead of its 413).
 * So, as nginx's lingering close: once the answer is written, our side is shut (FIN) and what the
 * client still sends is read and dropped until its body ends, LINGER_BYTES were read, or
 * LINGER_MS passed; only then is the socket destroyed. Node closes a `Connection: close` answer's
 * socket with destroySoon once the answer is written: that is the step replaced, per socket.
 */
function lingerOnClose(incoming: IncomingMessage): void {
  const socket = incoming.socket as LingeringSocket;
  // Once per socket, reading the socket's latest request with a body: a wrapper per request would
  // chain on a kept-alive connection (each holding its request) until the close unwound them all
  // at once, past the stack's depth (10,000 POSTs on one connection crashed the process).
  socket[LATEST_WITH_BODY] = incoming;
  if (socket[LINGER_INSTALLED]) return;
  const destroySoon = socket.destroySoon;
  if (typeof destroySoon !== 'function') return;
  socket[LINGER_INSTALLED] = true;
  let lingering = false;
  socket.destroySoon = function lingeringClose() {
    if (lingering) return;
    const latest = socket[LATEST_WITH_BODY];
    if (latest === undefined || latest.complete || socket.destroyed) {
      destroySoon.call(socket);
      return;
    }
    lingering = true;
    socket.end();
    let read = 0;
    const stop = () => {
      clearTimeout(timer);
      socket.destroy();
    };
    const timer = setTimeout(stop, LINGER_MS);
    timer.unref();
    // The body's reader (the app's, now gone) would pause the stream as its buffer fills.
    latest.removeAllListeners('data');
    latest.on('data', (chunk: Buffer) => {
      read += chunk.byteLength;
      if (read > LINGER_BYTES) stop();
    });
    latest.once('end', stop);
    latest.once('error', stop);
    socket.once('close', () => clearTimeout(timer));
    latest.resume();
  };
}

const LATEST_WITH_BODY = Symbol('latest request with a body');
const LINGER_INSTALLED = Symbol('lingering close installed');
type LingeringSocket = IncomingMessage['socket'] & {
  destroySoon?: () => void;
  [LATEST_WITH_BODY]?: IncomingMessage;
  [LINGER_INSTALLED]?: boolean;
};

function sendProblem(outgoing: ServerResponse, problem: ApiError, requestId: string): void {
  const { headers, body } = problemAnswer(problem, requestId);
  outgoing.writeHead(problem.status, headers).end(body);
}

export function serveApp(
  app: { fetch: (request: Request) => Response | Promise<Response>; operations?: NodeRoutes },
  options: { port: number; hostname: string; draining?: () => boolean },
  onListening: (info: AddressInfo) => void,
): Server {
  const listener = getRequestListener(app.fetch, {
    // For an HTTP/1.0 request without a Host.
    hostname: options.hostname,
    // What @hono/node-server cannot make a URL of, though `refusal` let it through (a port out
    // of range, say); and, were it ever to happen, an error thrown out of the app.
    errorHandler(error) {
      const problem =
        error instanceof RequestError
          ? invalidRequest('The request target or Host header is not valid.')
          : internalError();
      const { headers, body } = problemAnswer(problem, uuidv7());
      return new Response(body, { status: problem.status, headers });
    },
  });
  const server = createServer(
    // Node counts a head equal to maxHeaderSize as too large: one more, and the spec's limit holds exactly.
    { maxHeaderSize: HEADER_BYTES + 1, requireHostHeader: false },
    function routeAsSent(incoming, outgoing) {
      // While draining, no connection is kept alive: a proxy's idle connection closed under it
      // by our exit would fail the request it had just sent on it.
      if (options.draining?.()) outgoing.shouldKeepAlive = false;
      // Only a request with a body can be answered before it is read.
      if (incoming.headers['transfer-encoding'] !== undefined || Number(incoming.headers['content-length']) > 0) {
        lingerOnClose(incoming);
      }
      const refused = refusal(incoming);
      if (refused === undefined) {
        // A row of the operation table is served by its pipeline (pipeline.ts), before Hono's router.
        if (app.operations?.(incoming, outgoing)) return;
        return void listener(incoming, outgoing);
      }
      const id = incoming.headers['x-request-id'];
      const requestId = requestIdFrom(typeof id === 'string' ? id : undefined);
      sendProblem(outgoing, invalidRequest(refused), requestId);
    },
  );
  server.maxHeadersCount = HEADER_FIELDS;
  server.on('clientError', answerClientError);
  server.listen(options.port, options.hostname, () => onListening(server.address() as AddressInfo));
  return server;
}
