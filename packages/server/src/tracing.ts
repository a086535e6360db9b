// OpenTelemetry traces, the core that any floor may use: the SDK's start (assemble.ts), a child
// span of some work (inSpan: password hashes, passwords/hasher.ts), the active span's
// `traceparent` (kept with each event, sent with its webhook deliveries). The request's server
// span, which joins the caller's `traceparent`, is http/middleware/trace-requests.ts; database
// queries' spans are db/traced.ts. Off unless OTEL_EXPORTER_OTLP_ENDPOINT (or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT) is set: then nothing of it is loaded, installed or run,
// the decision being taken once at start (assemble.ts), never per request.
//
// Never in an attribute: the query string, a header value, a body, a statement's parameters.
import {
  type Context,
  context,
  diag,
  propagation,
  type Span,
  SpanStatusCode,
  type Tracer,
  trace,
} from '@opentelemetry/api';

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
