// A heavy read's place in its site's bound (limits/heavy-reads.ts), and the 429 when it has none.
import { rateLimited } from '../errors.ts';
import type { HeavyReadGate } from '../limits/heavy-reads.ts';
import type { OpContext } from './context.ts';

export const tooManyHeavyReads = () =>
  rateLimited(
    "Too many of this site's heavy reads (lists, exports, a person's data) are running on this server already; try again after Retry-After seconds.",
    1,
  );

/** A place in `gate` for the request's site (waiting for it, within the request's deadline), or the 429. */
export async function enterHeavyRead(c: OpContext, gate: HeavyReadGate | undefined): Promise<{ leave(): void }> {
  if (gate === undefined) return { leave() {} };
  const place = await gate.enter(c.get('token').site, c.get('deadline').signal);
  if (place === 'refused') throw tooManyHeavyReads();
  return place;
}

/** Runs `work` in a place of `gate` for the request's site, given back when it ends. */
export async function inHeavyRead<T>(
  c: OpContext,
  gate: HeavyReadGate | undefined,
  work: () => Promise<T>,
): Promise<T> {
  const place = await enterHeavyRead(c, gate);
  try {
    return await work();
  } finally {
    place.leave();
  }
}
