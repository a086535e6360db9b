// Idempotency-Key (draft-ietf-httpapi-idempotency-key-header) for create and update: the first
// request with a key claims it; its answer is stored and replayed to every retry with the same
// key and body for 24 hours. Stored in the database, so every replica agrees.
//
// Two steps of the pipeline (http/pipeline.ts), with the operation's parse between them:
// readIdempotencyKey checks the header and fingerprints the body as sent; idempotentWrites' claim
// takes the key only for a request that parse accepted. A refused request is not kept (anyone could otherwise fill the table with 400s),
// and its retry with the same key is checked afresh.
//
// The fingerprint is an HMAC under the deployment's key (kernel/deployment-keys.ts; issue 41,
// F4): a body holds a password, and a plain hash kept for a day let a copy of the database try
// guesses at SHA-256's speed. A fingerprint made before (a SHA-256) or under an older key of the
// ring still matches its request until the row expires.
import { createHash } from 'node:crypto';
import { and, eq, inArray, sql } from 'drizzle-orm';
import { parseItem } from 'structured-headers';
import { idempotencyKeys } from '../../db/schema.ts';
import { ApiError, describeError, invalidRequest } from '../../errors.ts';
import { deploymentKeysOf } from '../../kernel/deployment-keys.ts';
import { keepAnswer } from '../../kernel/unit-of-work.ts';
import type { Answer, OpContext, StepContext } from '../context.ts';
import { answerCode } from '../errors.ts';

/**
 * How long a claim holds without an answer before a retry may take over (a process died
 * mid-request): as long as the request may run, so that a retry meanwhile is 409, not a second run.
 */
const leaseFor = (ms: number) => sql`now() + ${`${Math.ceil(ms / 1000)} seconds`}::interval`;
/** The response headers that are part of the answer (the rest belong to each delivery). */
const KEPT_HEADERS = ['content-type', 'location', 'etag'];
/**
 * The largest answer body kept, in bytes. Ours are far smaller; a larger one would let a caller
 * turn each key into that much disk for a day, so it is not kept and its retry runs again.
 */
export const MAX_STORED_BODY = 4 * 1024;

/** A request's key, and the fingerprint of what it asks (method, path, body as sent). */
export interface IdempotencyRequest {
  key: string;
  /** An HMAC of the method, path and canonical body under the deployment's current key: what is stored. */
  fingerprint: string;
  /** Every fingerprint this request may have been stored with: one per key held, and the SHA-256 of rows made before. */
  fingerprints: string[];
  /** Set once the claim step took the key: the write then keeps its answer in its own transaction. */
  claimed?: { maxBody: number };
}

/** JSON with object keys sorted: the same body in any key order has the same fingerprint. */
export function canonicalJson(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalJson).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const entries = Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalJson((value as Record<string, unknown>)[k])}`);
    return `{${entries.join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** The longest key, in characters of the key itself (a quoted key's escapes and quotes not counted). */
const MAX_KEY = 255;

/**
 * The key an Idempotency-Key field names: the draft makes the field a Structured Field String
 * (RFC 8941 §3.3.3: `"8e03978e-40d5-43e8-bc93-6894a57f9324"`), read here with a complete parser;
 * its parameters, which the draft defines none of, are ignored as RFC 8941 would have a
 * recipient do. A value not starting with `"` is the bare key clients have sent until now, taken
 * as it is, so `abc` and `"abc"` name one key. undefined when the field is not a valid key.
 */
export function parseIdempotencyKey(field: string): string | undefined {
  const value = field.trim();
  if (!value.startsWith('"')) return /^[\x21-\x7E]{1,255}$/.test(value) ? value : undefined;
  let item: ReturnType<typeof parseItem>;
  try {
    item = parseItem(value);
  } catch {
    return undefined; // a bad escape, an unterminated quote, a character outside printable ASCII
  }
  const [key] = item;
  return typeof key === 'string' && key.length >= 1 && key.length <= MAX_KEY ? key : undefined;
}

/** The request's Idempotency-Key, checked against the spec's schema and read; 400 when malformed. */
export function idempotencyKeyOf(c: StepContext): string | undefined {
  const field = c.req.header('idempotency-key');
  if (field === undefined) return undefined;
  const key = c.get('validators').idempotencyKey(field) ? parseIdempotencyKey(field) : undefined;
  if (key === undefined) {
    throw invalidRequest('The Idempotency-Key header is not valid.', [
      {
        pointer: 'Idempotency-Key',
        code: 'invalid_format',
        message: 'must be a string ("…", RFC 8941) or a bare key of 1 to 255 printable ASCII characters',
      },
    ]);
  }
  return key;
}

/**
 * The key step: checks the Idempotency-Key (400 when malformed) and fingerprints the body before
 * anything normalizes it, so that "the same body" means the body as sent. Claims nothing.
 */
export async function readIdempotencyKey(c: OpContext): Promise<void> {
  const key = idempotencyKeyOf(c);
  if (key === undefined) return;
  const { database, factorKeys } = c.get('deps');
  const keys = await deploymentKeysOf(database.db, factorKeys);
  const request = `${c.req.method} ${c.req.path}\n${canonicalJson(c.get('body'))}`;
  const fingerprints = keys.macs('idempotency_fingerprint', request);
  fingerprints.push(createHash('sha256').update(request).digest('hex'));
  c.set('idempotency', { key, fingerprint: fingerprints[0]!, fingerprints });
}

/** The claim step of an operation's key, and the keeping of its answer (see idempotentWrites). */
export interface IdempotentWrites {
  /**
   * Replays the answer kept for the request's key, or claims the key (undefined: the handler
   * runs); 422 for a key used with another request, 409 while its first request runs. Goes after
   * the operation's parse: only valid requests take a key.
   */
  claim(c: OpContext): Promise<Answer | undefined>;
  /** Keeps the handler's answer for the key it claimed (unless the write kept it with itself), or frees the key. */
  keep(c: OpContext, answer: Answer): Promise<void>;
}

export function idempotentWrites(maxStoredBody = MAX_STORED_BODY, leaseMs = 60_000): IdempotentWrites {
  const LEASE = leaseFor(leaseMs);
  const thisKey = (tokenId: string, key: string) =>
    and(eq(idempotencyKeys.tokenId, tokenId), eq(idempotencyKeys.key, key));
  return {
    async claim(c) {
      const { key, fingerprint, fingerprints } = c.get('idempotency')!;
      const db = c.get('deps').database.db;
      const tokenId = c.get('token').id;
      const claimed = await db
        .insert(idempotencyKeys)
        .values({ tokenId, key, fingerprint, lockedUntil: LEASE })
        .onConflictDoUpdate({
          target: [idempotencyKeys.tokenId, idempotencyKeys.key],
          set: { fingerprint, status: null, body: null, headers: null, createdAt: sql`now()`, lockedUntil: LEASE },
          // Take the key over only when it has expired, or its first request was abandoned.
          setWhere: sql`${idempotencyKeys.createdAt} < now() - interval '24 hours'
            or (${idempotencyKeys.status} is null and ${idempotencyKeys.lockedUntil} < now()
                and ${inArray(idempotencyKeys.fingerprint, fingerprints)})`,
        })
        .returning({ key: idempotencyKeys.key });
      if (claimed.length > 0) {
        c.get('idempotency')!.claimed = { maxBody: maxStoredBody };
        return undefined;
      }
      const [row] = await db.select().from(idempotencyKeys).where(thisKey(tokenId, key)).limit(1);
      if (row !== undefined && !fingerprints.includes(row.fingerprint)) {
        throw new ApiError(
          'idempotency_key_reused',
          'This Idempotency-Key was used with a different request; use a new key for a new request.',
        );
      }
      if (row === undefined || row.status === null) {
        throw new ApiError(
          'idempotency_key_in_use',
          'A request with this Idempotency-Key is still running; retry shortly.',
          { headers: { 'Retry-After': '1' } },
        );
      }
      let body = row.body ?? '';
      const headers: Record<string, string> = { ...row.headers, 'Idempotent-Replayed': 'true' };
      if (headers['content-type'] === 'application/problem+json') {
        // A problem's requestId names the response it is in: this delivery's.
        body = JSON.stringify({ ...JSON.parse(body), requestId: c.get('requestId') });
      }
      return c.body(body, row.status, headers);
    },
    async keep(c, answer) {
      // A write kept its answer with itself, in one transaction (kernel/unit-of-work.ts).
      if (c.get('write')?.answerKept) return;
      const { key } = c.get('idempotency')!;
      const db = c.get('deps').database.db;
      const tokenId = c.get('token').id;
      try {
        // A refusal or a dry run, which changed no account, so that a crash before this point
        // leaves a retry that runs again and is answered alike; or an answer over the bound, never kept.
        // A 429 (a budget the handler counted, as update's hash budget) says "not now", not "no";
        // so does a 409 `conflict` (a write that collided with others, rolled back).
        const kept =
          answer.status < 500 &&
          answer.status !== 429 &&
          !(answer.status === 409 && answerCode(c, answer) === 'conflict');
        const body = kept ? answer.text() : undefined;
        if (body === undefined || Buffer.byteLength(body) > maxStoredBody) {
          // Not an answer to keep: the retry should run again.
          await db.delete(idempotencyKeys).where(thisKey(tokenId, key));
          return;
        }
        const headers: Record<string, string> = {};
        for (const name of KEPT_HEADERS) {
          const value = answer.headers.get(name);
          if (value !== null) headers[name] = value;
        }
        await keepAnswer(db, tokenId, key, answer.status, { body, headers });
      } catch (error) {
        c.get('log').warn({ err: describeError(error) }, 'idempotent answer not stored');
      }
    },
  };
}
