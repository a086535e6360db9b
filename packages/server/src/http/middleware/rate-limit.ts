import type { Context, MiddlewareHandler } from 'hono';
import { type ApiError, rateLimited } from '../../errors.ts';
import type { Budget, PolicyState } from '../../limits/rate-limit.ts';
import type { AppEnv } from '../context.ts';
import { renderProblem } from '../errors.ts';

/** The draft-ietf-httpapi-ratelimit-headers fields for the token's policies. */
function setRateLimitHeaders(headers: Headers, states: PolicyState[]): void {
  if (states.length === 0) return;
  headers.set('RateLimit-Policy', states.map((s) => `"${s.name}";q=${s.limit};w=${s.windowSeconds}`).join(', '));
  headers.set('RateLimit', states.map((s) => `"${s.name}";r=${s.remaining};t=${s.resetSeconds}`).join(', '));
}

/** 429 for the exceeded policies, to wait until the latest of them restarts. */
function overBudget(states: PolicyState[]): ApiError {
  const over = states.filter((s) => s.exceeded);
  const wait = Math.max(...over.map((s) => s.resetSeconds));
  const names = over.map((s) => `"${s.name}"`).join(' and ');
  return rateLimited(`This token is over its ${names} rate limit; try again in ${wait} s.`, wait);
}

/**
 * Counts the request against its token's budgets ("all", and the operation's own budget when it
 * has one); over any of them: 429 with Retry-After. The fields go on every answer, with what
 * consumeBudget() counted later in the request, unless the answer carries its own.
 */
export function rateLimit(budget?: Budget): MiddlewareHandler<AppEnv> {
  return async function rateLimitMiddleware(c, next) {
    const refused = await countRequest(c, budget);
    if (refused !== undefined) return refused;
    await next();
    addRateLimitHeaders(c, c.res);
  };
}

/**
 * rateLimit()'s count as a function (a read's route runs it without a middleware frame): the 429
 * answer, with the fields, when a policy is exceeded; else nothing, the states kept for the answer.
 */
export async function countRequest(c: Context<AppEnv>, budget?: Budget): Promise<Response | undefined> {
  const { limiter } = c.get('deps');
  const tokenId = c.get('token').id;
  return judgeCount(c, limiter.consumeNow?.(tokenId, budget) ?? (await limiter.consume(tokenId, budget)));
}

/** What was counted, kept for the answer; the 429 (with the fields) when a policy is exceeded. */
export function judgeCount(c: Context<AppEnv>, states: PolicyState[]): Response | undefined {
  c.set('rateLimits', states);
  if (!states.some((s) => s.exceeded)) return undefined;
  const response = renderProblem(c, overBudget(states));
  setRateLimitHeaders(response.headers, states);
  return response;
}

/** The fields of what was counted, on `response`; an answer refused by a limit of its own (verify's lockout) names that limit instead. */
export function addRateLimitHeaders(c: Context<AppEnv>, response: Response): void {
  if (!response.headers.has('RateLimit')) setRateLimitHeaders(response.headers, c.get('rateLimits'));
}

/**
 * Counts the request against `budget` where it becomes certain that it spends what the budget
 * bounds (an update learns only once the account is read that it will hash a password), unless
 * the operation was counted against it up front. Over it: throws 429 `rate_limited` with
 * Retry-After; either way the budget's fields join the answer's.
 */
export async function consumeBudget(c: Context<AppEnv>, budget: Budget): Promise<void> {
  const counted = c.get('rateLimits') ?? [];
  if (counted.some((s) => s.name === budget)) return;
  const states = await c.get('deps').limiter.consumeBudget(c.get('token').id, budget);
  c.set('rateLimits', [...counted, ...states]);
  if (states.some((s) => s.exceeded)) throw overBudget(states);
}

/**
 * Counts `extra` more against `budget`, already counted once for this request: an import that
 * hashes n plain passwords spends n hashes. Over it: 429, before any of them is hashed.
 */
export async function consumeMore(c: Context<AppEnv>, budget: Budget, extra: number): Promise<void> {
  if (extra <= 0) return;
  const states = await c.get('deps').limiter.consumeBudget(c.get('token').id, budget, extra);
  if (states.length === 0) return;
  c.set('rateLimits', [...(c.get('rateLimits') ?? []).filter((s) => s.name !== budget), ...states]);
  if (states.some((s) => s.exceeded)) throw overBudget(states);
}

/**
 * Counts `weight` against the site's own `budget`, shared by every token of the site (the rows an
 * import writes). Over it: 429, before anything is written; the budget's fields join the answer's.
 */
export async function consumeSiteBudget(c: Context<AppEnv>, budget: Budget, weight: number): Promise<void> {
  if (weight <= 0) return;
  const states = await c.get('deps').limiter.consumeBudget(`site:${c.get('token').site}`, budget, weight);
  if (states.length === 0) return;
  c.set('rateLimits', [...(c.get('rateLimits') ?? []), ...states]);
  if (states.some((s) => s.exceeded)) throw overBudget(states);
}
