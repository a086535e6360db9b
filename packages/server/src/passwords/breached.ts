// Breached-password screening (NIST SP 800-63B rev. 4, 3.1.1.2: refuse passwords known from
// breaches) against a Have I Been Pwned–compatible range API. k-anonymity: only the first five hex
// digits of the password's SHA-1 leave the server; the range answer lists every suffix under that
// prefix with its count, and the match is made here. `Add-Padding: true` asks the API to pad the
// answer with zero-count suffixes, so that its size does not tell an observer the prefix either.
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';

export interface BreachScreenOptions {
  /** The API's base: `{url}/range/{prefix}` is asked (https://api.pwnedpasswords.com, or a mirror). */
  url: string;
  /** A password seen at least this many times is breached. */
  threshold: number;
  /** How long one range request may take before the answer is "unknown". */
  timeoutMs: number;
  /** How many range answers are kept (each ~1,000 lines, ~35 KB), and for how long. */
  cacheSize?: number;
  cacheTtlMs?: number;
  /**
   * Range requests in flight at once, every site together, and one site's share of them: the range
   * API is one resource every site shares, so a site's flood of sign-ups waits (within its own
   * timeout) for its own slots, and the other sites' checks still get theirs.
   */
  concurrency?: number;
  perSite?: number;
  fetch?: typeof fetch;
}

/** How often a password was seen in breaches, or `unknown` when the range API did not answer in time. */
export type BreachCount = number | 'unknown';

export interface BreachScreen {
  /** How often `password` was seen; `site` is whose slot a range request takes. */
  count(password: string, site?: string, signal?: AbortSignal): Promise<BreachCount>;
  threshold: number;
}

/**
 * Slots for range requests: at most `total` at once, at most `perSite` of them one site's. A
 * request waits in line (first come, first served among the sites under their share) until a slot
 * is free or its signal aborts.
 */
export function createSlots(total: number, perSite: number) {
  let active = 0;
  const bySite = new Map<string, number>();
  const waiting: { site: string; start: () => void }[] = [];
  const take = (site: string) => {
    active += 1;
    bySite.set(site, (bySite.get(site) ?? 0) + 1);
  };
  const free = (site: string) => () => {
    active -= 1;
    const left = (bySite.get(site) ?? 1) - 1;
    if (left === 0) bySite.delete(site);
    else bySite.set(site, left);
    const next = waiting.findIndex((w) => (bySite.get(w.site) ?? 0) < perSite);
    if (next >= 0 && active < total) waiting.splice(next, 1)[0]!.start();
  };
  return {
    acquire(site: string, signal: AbortSignal): Promise<() => void> {
      if (active < total && (bySite.get(site) ?? 0) < perSite) {
        take(site);
        return Promise.resolve(free(site));
      }
      return new Promise((resolve, reject) => {
        const entry = {
          site,
          start: () => {
            signal.removeEventListener('abort', onAbort);
            take(site);
            resolve(free(site));
          },
        };
        const onAbort = () => {
          const at = waiting.indexOf(entry);
          if (at >= 0) waiting.splice(at, 1);
          reject(signal.reason);
        };
        if (signal.aborted) return onAbort();
        signal.addEventListener('abort', onAbort, { once: true });
        waiting.push(entry);
      });
    },
    /** Requests in flight, and of one site. */
    active: (site?: string) => (site === undefined ? active : (bySite.get(site) ?? 0)),
  };
}

/** The range answer, as suffix → count (padding lines have count 0 and are dropped). */
function parseRange(text: string): Map<string, number> {
  const counts = new Map<string, number>();
  for (const line of text.split('\n')) {
    const colon = line.indexOf(':');
    if (colon !== 35) continue; // SHA-1 is 40 hex digits: the answer carries the last 35.
    const count = Number.parseInt(line.slice(36), 10);
    if (count > 0) counts.set(line.slice(0, 35).toUpperCase(), count);
  }
  return counts;
}

export function createBreachScreen(options: BreachScreenOptions): BreachScreen {
  const base = options.url.replace(/\/+$/, '');
  const fetchRange = options.fetch ?? fetch;
  const ranges = new LRUCache<string, Map<string, number>>({
    max: options.cacheSize ?? 4_096,
    ttl: options.cacheTtlMs ?? 60 * 60 * 1000,
  });
  // One request per prefix at a time: a burst of sign-ups with the same password asks once.
  const inFlight = new Map<string, Promise<Map<string, number> | undefined>>();

  const slots = createSlots(options.concurrency ?? 16, options.perSite ?? 4);

  async function range(prefix: string, site: string, signal?: AbortSignal): Promise<Map<string, number> | undefined> {
    const cached = ranges.get(prefix);
    if (cached !== undefined) return cached;
    let pending = inFlight.get(prefix);
    if (pending === undefined) {
      pending = (async () => {
        // The timeout counts the wait for a slot too: a caller never waits longer than it says.
        const timeout = AbortSignal.timeout(options.timeoutMs);
        const stop = signal === undefined ? timeout : AbortSignal.any([timeout, signal]);
        let release: (() => void) | undefined;
        try {
          release = await slots.acquire(site, stop);
          const answer = await fetchRange(`${base}/range/${prefix}`, {
            headers: { 'Add-Padding': 'true', 'User-Agent': 'user-accounts' },
            signal: stop,
          });
          if (!answer.ok) return undefined;
          const parsed = parseRange(await answer.text());
          ranges.set(prefix, parsed);
          return parsed;
        } catch {
          return undefined; // timed out, refused, or the caller went away: not known
        } finally {
          release?.();
          inFlight.delete(prefix);
        }
      })();
      inFlight.set(prefix, pending);
    }
    return pending;
  }

  return {
    threshold: options.threshold,
    async count(password, site = '', signal) {
      const digest = createHash('sha1').update(password, 'utf8').digest('hex').toUpperCase();
      const counts = await range(digest.slice(0, 5), site, signal);
      if (counts === undefined) return 'unknown';
      return counts.get(digest.slice(5)) ?? 0;
    },
  };
}
