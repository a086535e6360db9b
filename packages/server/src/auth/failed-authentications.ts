// Failed authentications per client address, counted in this process's memory. Without a limit,
// random tokens cost a database lookup each (8,000 in 3 s were all looked up). Over the limit an
// address is refused before its token is looked up, until its window ends.
//
// Clients behind one proxy or NAT share an address, so a failing client could lock out the
// others. Every token accepted in the last hour is remembered (its SHA-256, computed by the lookup
// anyway; never the token) and still looked up while its address is refused: only tokens this
// process has not accepted lately wait. Successful requests cost a Map update, no hashing.
import { hashToken } from './tokens.ts';

export interface AuthFailureLimit {
  limit: number;
  windowSeconds: number;
}

/** One request's passage through the limit. */
export interface AuthAttempt {
  /** Seconds until the address may try again; 0 when the request may go on to the lookup. */
  readonly retryAfter: number;
  /** How the lookup ended ('abandoned': it threw). True when this failure reached the limit. */
  done(outcome: 'accepted' | 'failed' | 'abandoned', digest?: string): boolean;
}

export interface AuthFailures {
  readonly limit: AuthFailureLimit;
  /** Before the token is looked up: refused, or let through (then call `done`). */
  attempt(address: string | undefined, token: string): AuthAttempt;
  /** Addresses and tokens held in memory (for tests: both are bounded). */
  size(): { addresses: number; tokens: number };
}

export interface AuthFailureOptions {
  /** Addresses kept at most; the one with the oldest failure goes first. */
  maxAddresses?: number;
  /** Accepted tokens remembered at most; the least recently accepted goes first. */
  maxTokens?: number;
  /** How long an address counts as having recent failures, and a token as accepted. */
  memoryMs?: number;
  now?: () => number;
}

interface Entry {
  failures: number;
  /**
   * Lookups under way, counted with the failures, so that a burst from an address that has failed
   * cannot outrun the limit (only the very first burst from an address is counted as it fails).
   */
  pending: number;
  windowEndsAt: number;
  /** When the address stops counting as having recent failures (an hour after its last). */
  forgetAt: number;
}

/**
 * IPv4 addresses as they are; IPv6 by their /64, the block one host or subscriber gets, so that
 * walking through its addresses does not reset the count. IPv4-mapped IPv6 is IPv4.
 */
export function addressKey(address: string | undefined): string {
  if (address === undefined || address === '') return 'unknown';
  if (!address.includes(':')) return address;
  const lower = address.toLowerCase();
  if (lower.startsWith('::ffff:') && lower.includes('.')) return lower.slice(7);
  const zone = lower.indexOf('%');
  const bare = zone < 0 ? lower : lower.slice(0, zone);
  const gap = bare.indexOf('::');
  const groups = (gap < 0 ? bare : bare.slice(0, gap)).split(':').filter((g) => g !== '');
  if (gap >= 0 && groups.length < 4) {
    // The zeros that `::` stands for reach into the first four groups.
    const tail = bare
      .slice(gap + 2)
      .split(':')
      .filter((g) => g !== '');
    const tailGroups = tail.length + (tail.at(-1)?.includes('.') ? 1 : 0); // a dotted quad is two groups
    for (let i = groups.length + tailGroups; i < 8; i++) groups.push('0');
    groups.push(...tail);
  }
  return `${groups
    .slice(0, 4)
    .map((g) => Number.parseInt(g, 16).toString(16))
    .join(':')}::/64`;
}

export function createAuthFailures(limit: AuthFailureLimit, options: AuthFailureOptions = {}): AuthFailures {
  const { maxAddresses = 10_000, maxTokens = 10_000, memoryMs = 3_600_000, now = Date.now } = options;
  const refreshMs = Math.min(1_000, memoryMs / 10);
  const windowMs = limit.windowSeconds * 1000;
  // Both maps are in order of their last refresh, which is also the order of their expiry.
  const addresses = new Map<string, Entry>();
  const accepted = new Map<string, number>();
  // Working out an IPv6 /64 costs a few µs; a busy client's address is asked again and again.
  const keys = new Map<string, string>();
  const keyOf = (address: string | undefined) => {
    if (address === undefined || !address.includes(':')) return addressKey(address);
    let key = keys.get(address);
    if (key === undefined) {
      if (keys.size >= maxAddresses) keys.clear();
      key = addressKey(address);
      keys.set(address, key);
    }
    return key;
  };

  const prune = <V>(map: Map<string, V>, expiry: (v: V) => number, max: number, at: number) => {
    for (const [key, value] of map) {
      if (expiry(value) > at && map.size < max) break;
      map.delete(key);
    }
  };
  const digestOf = (token: string) => (token === '' || token.length > 512 ? undefined : hashToken(token));
  const recent = (key: string, at: number) => {
    const entry = addresses.get(key);
    return entry !== undefined && entry.forgetAt > at ? entry : undefined;
  };
  const isAccepted = (digest: string | undefined, at: number) =>
    digest !== undefined && (accepted.get(digest) ?? 0) > at;

  const recordFailure = (key: string, digest: string | undefined, at: number): boolean => {
    if (digest !== undefined) accepted.delete(digest); // revoked or expired since: no longer a pass
    let entry = addresses.get(key);
    if (entry === undefined) {
      prune(addresses, (e) => e.forgetAt, maxAddresses, at);
      entry = { failures: 0, pending: 0, windowEndsAt: 0, forgetAt: 0 };
    }
    addresses.delete(key);
    addresses.set(key, entry);
    entry.forgetAt = at + memoryMs;
    if (entry.windowEndsAt <= at) {
      entry.failures = 0;
      entry.windowEndsAt = at + windowMs;
    }
    entry.failures += 1;
    return entry.failures === limit.limit;
  };
  const recordAccepted = (digest: string, at: number) => {
    // A token accepted again within the second keeps its place: moving it on every request (a
    // delete and a set) made the map rebuild its table again and again, garbage that outlived the
    // young generation (issue 47). Its memory ends at most a second (a tenth of it) early.
    const until = accepted.get(digest);
    if (until !== undefined && until > at + memoryMs - refreshMs) return;
    accepted.delete(digest);
    prune(accepted, (until) => until, maxTokens, at);
    accepted.set(digest, at + memoryMs);
  };

  return {
    limit,
    attempt(address, token) {
      const at = now();
      // The usual case: no failures from here lately (often from nowhere), nothing to count or remember.
      const key = addresses.size === 0 ? undefined : keyOf(address);
      const entry = key === undefined ? undefined : recent(key, at);
      if (key === undefined || entry === undefined) {
        return {
          retryAfter: 0,
          done: (outcome, accepted) => {
            // Every accepted token is remembered (its digest came with the lookup), so that it
            // still passes from an address that an attacker behind the same proxy gets refused.
            if (outcome === 'accepted' && accepted !== undefined) recordAccepted(accepted, now());
            return outcome === 'failed' ? recordFailure(key ?? keyOf(address), digestOf(token), now()) : false;
          },
        };
      }
      const digest = digestOf(token);
      const counted = !isAccepted(digest, at);
      if (counted) {
        const inWindow = entry.windowEndsAt > at;
        if ((inWindow ? entry.failures : 0) + entry.pending >= limit.limit) {
          return { retryAfter: inWindow ? Math.ceil((entry.windowEndsAt - at) / 1000) : 1, done: () => false };
        }
        entry.pending += 1;
      }
      return {
        retryAfter: 0,
        done: (outcome) => {
          if (counted) entry.pending -= 1;
          const end = now();
          if (outcome === 'failed') return recordFailure(key, digest, end);
          if (outcome === 'accepted' && digest !== undefined) recordAccepted(digest, end);
          return false;
        },
      };
    },
    size: () => ({ addresses: addresses.size, tokens: accepted.size }),
  };
}
