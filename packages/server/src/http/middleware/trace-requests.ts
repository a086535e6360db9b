// The request's SERVER span (HTTP semantic conventions), in the caller's trace when it sent a
// `traceparent`; the tracing core it builds on is ../../tracing.ts.
//
// Never in an attribute: the query string, a header value, a body.
import {
  context,
  propagation,
  ROOT_CONTEXT,
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
