// The request's SERVER span (HTTP semantic conventions), in the caller's trace when it sent a
// `traceparent`; the tracing core it builds on is ../../tracing.ts.
//
// Never in an attribute: the query string, a header value, a body.
import type { IncomingHttpHeaders } from 'node:http';
import {
  type Context,
  context,
  propagation,
  ROOT_CONTEXT,
  type Span,
  SpanKind,
  SpanStatusCode,
  type TextMapGetter,
  type Tracer,
  trace,
} from '@opentelemetry/api';
import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../context.ts';

const headerGetter: TextMapGetter<Headers> = {
  get: (headers, key) => headers.get(key) ?? undefined,
  keys: (headers) => [...headers.keys()],
};

/** The same, on Node's request (the operations' pipeline, http/pipeline.ts). */
export const incomingGetter: TextMapGetter<IncomingHttpHeaders> = {
  get: (headers, key) => headers[key],
  keys: (headers) => Object.keys(headers),
};

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);

/**
 * The request's SERVER span, started in the caller's trace when its headers carry a valid
 * `traceparent` (the SDK's propagators, OTEL_PROPAGATORS: W3C Trace Context by default), and the
 * context its work runs in.
 */
export function startServerSpan<H>(
  tracer: Tracer,
  method: string,
  https: boolean,
  headers: H,
  getter: TextMapGetter<H>,
): { span: Span; context: Context; method: string } {
  const parent = propagation.extract(ROOT_CONTEXT, headers, getter);
  const name = METHODS.has(method) ? method : '_OTHER';
  const span = tracer.startSpan(
    name,
    { kind: SpanKind.SERVER, attributes: { 'http.request.method': name, 'url.scheme': https ? 'https' : 'http' } },
    parent,
  );
  return { span, context: trace.setSpan(parent, span), method: name };
}

/**
 * Ends the span with its answer: named `METHOD route`, the route being the operation's path
 * template, never the path as sent, and never the query; a catch-all (`*`, `/api/*`: a path the
 * table does not have) names no route.
 */
export function endServerSpan(
  span: Span,
  method: string,
  route: string,
  status: number,
  requestId: string | undefined,
): void {
  if (!route.endsWith('*')) {
    span.setAttribute('http.route', route);
    span.updateName(`${method} ${route}`);
  }
  span.setAttribute('http.response.status_code', status);
  if (requestId !== undefined) span.setAttribute('user_accounts.request_id', requestId);
  if (status >= 500) {
    span.setAttribute('error.type', String(status));
    span.setStatus({ code: SpanStatusCode.ERROR });
  }
  span.end();
}

/** The span of a request outside the operation table (health, docs, console, a 404), as the pipeline's. */
export function traceRequests(tracer: Tracer): MiddlewareHandler<AppEnv> {
  return async function traceRequestsMiddleware(c, next) {
    const started = startServerSpan(
      tracer,
      c.req.method,
      c.req.url.startsWith('https:'),
      c.req.raw.headers,
      headerGetter,
    );
    try {
      await context.with(started.context, next);
    } finally {
      endServerSpan(started.span, started.method, c.req.routePath, c.res.status, c.get('requestId'));
    }
  };
}
