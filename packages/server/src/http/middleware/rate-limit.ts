import { type ApiError, rateLimited } from '../../errors.ts';
import type { Budget, PolicyState } from '../../limits/rate-limit.ts';
import type { Answer, AnswerHeaders, OpContext } from '../context.ts';
import { problemAnswer } from '../errors.ts';

/** The draft-ietf-httpapi-ratelimit-headers fields for the token's policies. */
function setRateLimitHeaders(headers: AnswerHeaders, states: PolicyState[]): void {
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

/** What was counted, kept for the answer; the 429 (with the fields) when a policy is exceeded. */
export function judgeCount(c: OpContext, states: PolicyState[]): Answer | undefined {
  c.set('rateLimits', states);
  if (!states.some((s) => s.exceeded)) return undefined;
  const answer = problemAnswer(c, overBudget(states));
  setRateLimitHeaders(answer.headers, states);
  return answer;
}

/** The fields of what was counted, on `response`; an answer refused by a limit of its own (verify's lockout) names that limit instead. */
export function addRateLimitHeaders(c: OpContext, answer: Answer): void {
  if (!answer.headers.has('RateLimit')) setRateLimitHeaders(answer.headers, c.get('rateLimits'));
}

/**
 * Counts the request against `budget` where it becomes certain that it spends what the budget
 * bounds (an update learns only once the account is read that it will hash a password), unless
 * the operation was counted against it up front. Over it: throws 429 `rate_limited` with
 * Retry-After; either way the budget's fields join the answer's.
 */
export async function consumeBudget(c: OpContext, budget: Budget): Promise<void> {
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
export async function consumeMore(c: OpContext, budget: Budget, extra: number): Promise<void> {
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
export async function consumeSiteBudget(c: OpContext, budget: Budget, weight: number): Promise<void> {
  if (weight <= 0) return;
  const states = await c.get('deps').limiter.consumeBudget(`site:${c.get('token').site}`, budget, weight);
  if (states.length === 0) return;
  c.set('rateLimits', [...(c.get('rateLimits') ?? []), ...states]);
  if (states.some((s) => s.exceeded)) throw overBudget(states);
}
