import type { MiddlewareHandler } from 'hono';
import type { AppEnv } from '../context.ts';
import { ApiError, renderProblem } from '../errors.ts';
import type { Budget, PolicyState } from '../rate-limit.ts';

/** The draft-ietf-httpapi-ratelimit-headers fields for the token's policies. */
function setRateLimitHeaders(headers: Headers, states: PolicyState[]): void {
  if (states.length === 0) return;
  headers.set('RateLimit-Policy', states.map((s) => `"${s.name}";q=${s.limit};w=${s.windowSeconds}`).join(', '));
  headers.set('RateLimit', states.map((s) => `"${s.name}";r=${s.remaining};t=${s.resetSeconds}`).join(', '));
}

/**
 * Counts the request against its token's budgets ("all", and the operation's own budget when it
 * has one); over any of them: 429 with Retry-After.
 */
export function rateLimit(budget?: Budget): MiddlewareHandler<AppEnv> {
  return async function rateLimitMiddleware(c, next) {
    const states = await c.get('deps').limiter.consume(c.get('token').id, budget);
    const over = states.filter((s) => s.exceeded);
    if (over.length > 0) {
      const wait = Math.max(...over.map((s) => s.resetSeconds));
      const names = over.map((s) => `"${s.name}"`).join(' and ');
      const response = renderProblem(
        c,
        new ApiError(429, 'rate_limited', `This token is over its ${names} rate limit; try again in ${wait} s.`, {
          headers: { 'Retry-After': String(wait) },
        }),
      );
      setRateLimitHeaders(response.headers, states);
      return response;
    }
    await next();
    setRateLimitHeaders(c.res.headers, states);
  };
}
