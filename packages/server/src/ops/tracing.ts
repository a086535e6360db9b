// OpenTelemetry traces: a server span per request (HTTP semantic conventions), child spans for
// database queries (db/traced.ts) and password hashes (passwords/hasher.ts), the caller's `traceparent`
// joined, a delivery's `traceparent` sent with each webhook. Off unless OTEL_EXPORTER_OTLP_ENDPOINT
// (or OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set: then nothing of it is loaded, installed or run,
// the decision being taken once at start (assemble.ts), never per request.
//
// Never in an attribute: the query string, a header value, a body, a statement's parameters.
import {
  type Context,
  context,
  diag,
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
import type { AppEnv } from '../http/context.ts';

export const TRACER_NAME = 'user-accounts';

export interface Tracing {
  tracer: Tracer;
  /** Exports what is still buffered, then stops the SDK. */
  shutdown(): Promise<void>;
}

/**
 * Starts the OpenTelemetry SDK for traces only (metrics stay Prometheus, logs stay pino): it reads
 * the standard OTEL_* variables itself (endpoint, protocol, headers, sampler, batch delay).
 */
export async function startTracing(options: { serviceName: string }): Promise<Tracing> {
  const { startNodeSdk } = await import('@opentelemetry/sdk-node');
  const sdk = startNodeSdk({
    resourceAttributes: { 'service.name': options.serviceName },
    metricReaders: [],
    logRecordProcessors: [],
    instrumentations: [],
  });
  return {
    tracer: trace.getTracer(TRACER_NAME),
    async shutdown() {
      await sdk.shutdown();
      trace.disable();
      propagation.disable();
      context.disable();
      diag.disable();
    },
  };
}

const headerGetter: TextMapGetter<Headers> = {
  get: (headers, key) => headers.get(key) ?? undefined,
  keys: (headers) => [...headers.keys()],
};

const METHODS = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'TRACE', 'CONNECT']);

/**
 * The request's SERVER span, in the caller's trace when it sent a valid `traceparent` (the SDK's
 * propagators, OTEL_PROPAGATORS: W3C Trace Context by default). Named `METHOD route`; the route is
 * the operation's path template, never the path as sent, and never the query.
 */
export function traceRequests(tracer: Tracer): MiddlewareHandler<AppEnv> {
  return async function traceRequestsMiddleware(c, next) {
    const parent = propagation.extract(ROOT_CONTEXT, c.req.raw.headers, headerGetter);
    const method = METHODS.has(c.req.method) ? c.req.method : '_OTHER';
    const span = tracer.startSpan(
      method,
      {
        kind: SpanKind.SERVER,
        attributes: { 'http.request.method': method, 'url.scheme': c.req.url.startsWith('https:') ? 'https' : 'http' },
      },
      parent,
    );
    try {
      await context.with(trace.setSpan(parent, span), next);
    } finally {
      const status = c.res.status;
      const route = c.req.routePath;
      // A path the table does not have ends at a catch-all (`*`, `/api/*`): no route to name.
      if (!route.endsWith('*')) {
        span.setAttribute('http.route', route);
        span.updateName(`${method} ${route}`);
      }
      span.setAttribute('http.response.status_code', status);
      const requestId = c.get('requestId');
      if (requestId !== undefined) span.setAttribute('user_accounts.request_id', requestId);
      if (status >= 500) {
        span.setAttribute('error.type', String(status));
        span.setStatus({ code: SpanStatusCode.ERROR });
      }
      span.end();
    }
  };
}

/** A span of `work`, child of `parent`, ended when it settles (an error marks it, without its message). */
export async function inSpan<T>(
  tracer: Tracer,
  name: string,
  parent: Context,
  attributes: Record<string, string | number>,
  work: (span: Span) => Promise<T>,
): Promise<T> {
  const span = tracer.startSpan(name, { attributes }, parent);
  try {
    return await context.with(trace.setSpan(parent, span), () => work(span));
  } catch (error) {
    span.setAttribute('error.type', error instanceof Error ? error.name : 'error');
    span.setStatus({ code: SpanStatusCode.ERROR });
    throw error;
  } finally {
    span.end();
  }
}

/** The W3C `traceparent` of the active span, or undefined outside one. */
export function activeTraceparent(): string | undefined {
  const span = trace.getSpan(context.active());
  if (span === undefined) return undefined;
  const { traceId, spanId, traceFlags } = span.spanContext();
  return `00-${traceId}-${spanId}-${(traceFlags & 0xff).toString(16).padStart(2, '0')}`;
}
