// One delivery attempt: a signed POST (Standard Webhooks: webhook-id, webhook-timestamp,
// webhook-signature), judged by its status alone. The body is a CloudEvent, sent in the
// CloudEvents HTTP binding's structured mode (its Content-Type says so; the signature covers the
// body's bytes and nothing of the headers, so the two standards do not touch). Redirects are not followed: a 3xx would send
// the event, signed, to a place the operator never checked, so it counts as a failure.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import https from 'node:https';
import { Webhook } from 'standardwebhooks';
import { checkWebhookUrl, safeLookup } from './target.ts';

/** A delivery's Content-Type: a CloudEvent in the JSON event format, structured mode. */
export const WEBHOOK_CONTENT_TYPE = 'application/cloudevents+json';

/** What is read of an answer's body (and thrown away) before the connection is dropped. */
const MAX_ANSWER_BYTES = 64 * 1024;

export interface Attempt {
  /** A 2xx answer. */
  ok: boolean;
  /** The answer's status, when there was one. */
  status?: number;
  /** Why the attempt failed, when no status says it (refused URL, network error, timeout). */
  error?: string;
  ms: number;
}

/** A signing secret in the Standard Webhooks form: whsec_ and 32 random bytes in base64. */
export function newWebhookSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

// Keep-alive pools, so that a busy endpoint is not a TLS handshake per event. A pooled socket was
// checked by the lookup of the request that opened it, and Node reuses it without a lookup, so
// the pools are split by that policy: a socket opened while private targets were allowed never
// carries a request that forbids them. In a server the policy is fixed, so one pool per scheme.
const agentOptions = { keepAlive: true, maxSockets: 32 };
const agents = new Map<string, http.Agent>();

function agentFor(protocol: string, allowPrivate: boolean): http.Agent {
  const key = `${protocol}${allowPrivate}`;
  let agent = agents.get(key);
  if (agent === undefined) {
    agent = protocol === 'https:' ? new https.Agent(agentOptions) : new http.Agent(agentOptions);
    agents.set(key, agent);
  }
  return agent;
}

/**
 * Sends `body` once to `url`; never throws. One time limit (default 10 s) covers the whole
 * attempt: connecting, the answer's head and its body.
 */
export async function sendWebhook(options: {
  url: string;
  secret: string;
  id: string;
  timestamp: Date;
  body: string;
  allowPrivate: boolean;
  timeoutMs?: number;
  /** The delivery's W3C trace context, when tracing is on (webhooks/worker.ts). */
  traceparent?: string | undefined;
}): Promise<Attempt> {
  const started = performance.now();
  const elapsed = () => performance.now() - started;
  const timeoutMs = options.timeoutMs ?? 10_000;
  const refused = checkWebhookUrl(options.url, options.allowPrivate);
  if (refused !== undefined) return { ok: false, error: refused, ms: elapsed() };
  const url = new URL(options.url);
  let signature: string;
  try {
    signature = new Webhook(options.secret).sign(options.id, options.timestamp, options.body);
  } catch (error) {
    return { ok: false, error: `cannot sign with the endpoint's secret: ${reason(error)}`, ms: elapsed() };
  }
  const headers = {
    // Structured mode: without it the CloudEvents SDK's HTTP.toEvent finds "no cloud event".
    'content-type': WEBHOOK_CONTENT_TYPE,
    'content-length': Buffer.byteLength(options.body),
    'user-agent': 'user-accounts-webhooks/1',
    'webhook-id': options.id,
    'webhook-timestamp': String(Math.floor(options.timestamp.getTime() / 1000)),
    'webhook-signature': signature,
    ...(options.traceparent === undefined ? {} : { traceparent: options.traceparent }),
  };

  return new Promise<Attempt>((resolve) => {
    let request: http.ClientRequest | undefined;
    let settled = false;
    const finish = (outcome: Omit<Attempt, 'ms'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...outcome, ms: elapsed() });
    };
    const timer = setTimeout(() => {
      finish({ ok: false, error: `timed out after ${timeoutMs} ms` });
      request?.destroy();
    }, timeoutMs);
    const send = url.protocol === 'https:' ? https.request : http.request;
    try {
      request = send(
        url,
        {
          method: 'POST',
          headers,
          agent: agentFor(url.protocol, options.allowPrivate),
          lookup: safeLookup(options.allowPrivate),
        },
        (response) => {
          const status = response.statusCode ?? 0;
          const answer = { ok: status >= 200 && status < 300, status };
          let read = 0;
          response.on('data', (chunk: Buffer) => {
            read += chunk.length;
            if (read <= MAX_ANSWER_BYTES) return;
            finish(answer);
            response.destroy();
          });
          response.on('end', () => finish(answer));
          response.on('error', (error) => finish({ ok: false, status, error: reason(error) }));
          response.on('close', () => finish({ ok: false, status, error: 'the connection closed during the answer' }));
        },
      );
    } catch (error) {
      finish({ ok: false, error: reason(error) });
      return;
    }
    request.on('error', (error) => finish({ ok: false, error: reason(error) }));
    request.end(options.body);
  });
}

/** A network error in a line: Node's messages name the code ("connect ECONNREFUSED 10.0.0.1:443"). */
function reason(error: unknown): string {
  // With several addresses Node tries each and fails with an AggregateError whose message is empty.
  if (error instanceof AggregateError && error.errors.length > 0) return error.errors.map(reason).join('; ');
  if (error instanceof Error) return error.message || (error as NodeJS.ErrnoException).code || error.name;
  return String(error);
}
