import { IncomingMessage } from 'node:http';
import type { MiddlewareHandler } from 'hono';
import { ApiError } from '../../errors.ts';
import type { AppEnv } from '../context.ts';

export const BODY_LIMIT = 64 * 1024;
/** Our bodies are flat objects; anything this deep is an attack on recursive code, not a request. */
export const MAX_DEPTH = 32;

// The rest of the body is never read, so the connection cannot be reused: say so.
const tooLarge = (limit: number) =>
  new ApiError(413, 'payload_too_large', `The request body must be at most ${limit} bytes.`, {
    headers: { Connection: 'close' },
  });
const invalidJson = (detail = 'The request body is not valid JSON.') => new ApiError(400, 'invalid_json', detail);
// The request stream fails only through the client: it hung up mid-body, or framed the body in
// a way Node's parser refuses (an unknown Transfer-Encoding), and Node then drops the connection.
// Its fault, not an outage of ours (the stream's ECONNRESET would otherwise read as one). Most
// often nobody is left to read this answer; the log, metrics and audit trail still see a 400.
const bodyNotRead = (cause: unknown) =>
  new ApiError(400, 'invalid_request', 'The request body could not be read to its end.', {
    headers: { Connection: 'close' },
    cause,
  });

function isJsonMediaType(contentType: string | undefined): boolean {
  if (contentType === undefined) return false;
  const [type, ...params] = contentType.split(';').map((s) => s.trim().toLowerCase());
  if (type !== 'application/json') return false;
  // A quoted value is the same value (RFC 9110 §5.6.6): charset="utf-8" is charset=utf-8.
  return params.every(
    (p) => !p.startsWith('charset=') || p.replace(/^charset="(.*)"$/, 'charset=$1') === 'charset=utf-8',
  );
}

/**
 * Reads the body as JSON: 415 unless it is application/json, 413 past the limit whether or not a
 * Content-Length was sent (the stream is counted, so chunked bodies cannot slip past), 400 unless
 * it is UTF-8 JSON. Not hono/body-limit: it believes a Content-Length sent without
 * Transfer-Encoding and then counts nothing (a body that understates it is read to its end), and a
 * client hanging up mid-body reaches it as an unexpected error, not our 400.
 */
export function jsonBody(limit = BODY_LIMIT): MiddlewareHandler<AppEnv> {
  return async function jsonBodyMiddleware(c, next) {
    const contentType = c.req.header('content-type');
    if (!isJsonMediaType(contentType)) {
      // The usual mistake: the input in the query string, as get takes it.
      const inQuery = contentType === undefined && new URL(c.req.url).search !== '';
      throw new ApiError(
        415,
        'unsupported_media_type',
        inQuery
          ? 'This operation takes its input as a JSON body (Content-Type application/json), not in the query string.'
          : 'The request body must be sent with Content-Type application/json.',
      );
    }
    const declared = c.req.header('content-length');
    if (declared !== undefined && Number(declared) > limit) throw tooLarge(limit);

    // With a Content-Length and no Transfer-Encoding, Node's parser itself ends the body at that
    // length, checked against the limit above (a Request made in-process, as tests make, has no
    // such parser and keeps the counted read): the adapter's direct read (no web stream) is safe
    // and about 0.2 ms cheaper a request. Otherwise (chunked) the stream is counted as it comes.
    const bytes =
      declared !== undefined && c.req.header('transfer-encoding') === undefined && fromNodeParser(c.env)
        ? await readDeclared(c.req.raw)
        : await readLimited(c.req.raw.body, limit);
    let text: string;
    try {
      text = new TextDecoder('utf-8', { fatal: true, ignoreBOM: false }).decode(bytes);
    } catch {
      throw invalidJson('The request body is not valid UTF-8.');
    }
    if (text.trim() === '') throw invalidJson('A JSON request body is required.');
    if (nestingDepth(text) > MAX_DEPTH) {
      throw new ApiError(400, 'invalid_request', `The request body is nested more than ${MAX_DEPTH} levels deep.`, {
        errors: [
          { pointer: '', code: 'not_allowed', message: `must not be nested more than ${MAX_DEPTH} levels deep` },
        ],
      });
    }
    try {
      c.set('body', JSON.parse(text));
    } catch {
      throw invalidJson();
    }
    await next();
  };
}

/** The deepest nesting of arrays and objects in JSON text, counted without parsing (or recursing). */
export function nestingDepth(text: string): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i);
    if (inString) {
      if (ch === 0x5c)
        i++; // backslash: skip the escaped character
      else if (ch === 0x22) inString = false;
    } else if (ch === 0x22) {
      inString = true;
    } else if (ch === 0x5b || ch === 0x7b) {
      if (++depth > max) max = depth;
    } else if (ch === 0x5d || ch === 0x7d) {
      depth--;
    }
  }
  return max;
}

/** Whether the request came through @hono/node-server, whose bindings carry Node's request. */
function fromNodeParser(env: unknown): boolean {
  return typeof env === 'object' && env !== null && 'incoming' in env && env.incoming instanceof IncomingMessage;
}

async function readDeclared(request: Request): Promise<Uint8Array> {
  try {
    return new Uint8Array(await request.arrayBuffer());
  } catch (error) {
    throw bodyNotRead(error);
  }
}

async function readLimited(stream: ReadableStream<Uint8Array> | null, limit: number): Promise<Uint8Array> {
  if (stream === null) return new Uint8Array();
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  let size = 0;
  for (;;) {
    let chunk: ReadableStreamReadResult<Uint8Array>;
    try {
      chunk = await reader.read();
    } catch (error) {
      throw bodyNotRead(error);
    }
    const { done, value } = chunk;
    if (done) break;
    size += value.byteLength;
    if (size > limit) {
      await reader.cancel().catch(() => {});
      throw tooLarge(limit);
    }
    chunks.push(value);
  }
  const out = new Uint8Array(size);
  let offset = 0;
  for (const chunk of chunks) {
    out.set(chunk, offset);
    offset += chunk.byteLength;
  }
  return out;
}
