// The client's address: the connection's peer, unless that peer is a proxy the operator said to
// trust (TRUSTED_PROXIES), in which case it is the address that proxy put in X-Forwarded-For.
// Nobody is trusted by default: a forwarded header is something any client can write.
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

type Range = [ipaddr.IPv4 | ipaddr.IPv6, number];

/** Addresses and CIDR blocks of the proxies whose X-Forwarded-For is believed. */
export interface TrustedProxies {
  /** As the operator wrote them, canonical (for logs and tests). */
  readonly entries: readonly string[];
  has(address: string): boolean;
}

function parse(address: string): ipaddr.IPv4 | ipaddr.IPv6 | undefined {
  // net.isIP first: ipaddr.js also reads forms such as "127.1" or "0x7f000001", which no proxy
  // writes and which would let one address go by several names.
  if (isIP(address) === 0 || address.includes('%')) return undefined;
  try {
    return ipaddr.process(address); // an IPv4-mapped IPv6 address is its IPv4 address
  } catch {
    return undefined;
  }
}

/**
 * One address in one written form, so that no spelling of an address escapes its count (the
 * failed-authentication limit, verify's per-address lockout): IPv4 dotted; IPv6 in RFC 5952's
 * short form; an IPv4-mapped address (`::ffff:203.0.113.7`, `::ffff:cb00:7107`, fully expanded;
 * how a dual-stack socket reports an IPv4 peer) and an IPv4-compatible one (`::203.0.113.7`,
 * deprecated by RFC 4291 but still written) as the IPv4 address; `::` and `::1` stay the IPv6
 * unspecified and loopback addresses. Undefined for anything that is not an IP address (a zone
 * index, a port).
 */
export function canonicalAddress(address: string): string | undefined {
  // Remembered: every request of a token check asks for its peer's (ipaddr.js was about 1% of a
  // get's CPU, issue 33); bounded, and cleared when full, so that many peers cost only a miss.
  const known = canonical.get(address);
  if (known !== undefined || canonical.has(address)) return known;
  const written = canonicalFormOf(address);
  if (canonical.size >= CANONICAL_CACHE_MAX_ENTRIES) canonical.clear();
  canonical.set(address, written);
  return written;
}

const CANONICAL_CACHE_MAX_ENTRIES = 10_000;
const canonical = new Map<string, string | undefined>();

function canonicalFormOf(address: string): string | undefined {
  const parsed = parse(address.trim());
  if (parsed === undefined || parsed.kind() === 'ipv4') return parsed?.toString();
  const [a, b, c, d, e, f, high, low] = (parsed as ipaddr.IPv6).parts as [number, ...number[]];
  if (a === 0 && b === 0 && c === 0 && d === 0 && e === 0 && f === 0 && (high! > 0 || low! > 1)) {
    return new ipaddr.IPv4([high! >> 8, high! & 0xff, low! >> 8, low! & 0xff]).toString();
  }
  return parsed.toString();
}

/** TRUSTED_PROXIES: comma-separated addresses or CIDR blocks; an Error naming the bad entry. */
export function parseTrustedProxies(list: string): TrustedProxies | Error {
  const ranges: Range[] = [];
  for (const raw of list.split(',')) {
    const entry = raw.trim();
    if (entry === '') continue;
    const [written = '', bits, ...extra] = entry.split('/');
    const base = parse(written);
    const max = written.includes(':') ? 128 : 32;
    // A mapped IPv6 block (::ffff:10.0.0.0/112) became IPv4: its length counts from bit 96.
    const length = bits === undefined ? max : Number(bits) - (base?.kind() === 'ipv4' ? max - 32 : 0);
    if (
      base === undefined ||
      extra.length > 0 ||
      (bits !== undefined && !/^\d{1,3}$/.test(bits)) ||
      length < 0 ||
      length > (base.kind() === 'ipv4' ? 32 : 128)
    ) {
      return new Error(`entries must be IP addresses or CIDR blocks like 10.0.0.0/8 (got "${entry}")`);
    }
    ranges.push([base, length]);
  }
  return {
    entries: ranges.map(([base, length]) => `${base.toString()}/${length}`),
    has(address) {
      if (ranges.length === 0) return false;
      const parsed = parse(address);
      return (
        parsed !== undefined &&
        ranges.some(([base, length]) => base.kind() === parsed.kind() && parsed.match(base, length))
      );
    },
  };
}

export const TRUST_NOBODY: TrustedProxies = { entries: [], has: () => false };

/**
 * Who sent the request. `peer` is the connection's remote address; `forwardedFor` the
 * X-Forwarded-For header (several headers joined by commas, as Node joins them). When the peer is
 * trusted, the chain is read from the right, each hop added by the one after it: the first address
 * that is not itself a trusted proxy is the client. When every address is trusted, the left-most
 * is. An entry that is not an address stops the walk at the trusted hop that passed it on: what
 * lies beyond it cannot be believed.
 */
export function clientAddress(
  peer: string | undefined,
  forwardedFor: string | undefined,
  trusted: TrustedProxies,
): string | undefined {
  if (peer === undefined) return undefined;
  let client = canonicalAddress(peer) ?? peer;
  if (forwardedFor === undefined || !trusted.has(client)) return client;
  const hops = forwardedFor.split(',');
  for (let i = hops.length - 1; i >= 0; i--) {
    const hop = canonicalAddress(hops[i]!);
    if (hop === undefined) return client;
    client = hop;
    if (!trusted.has(hop)) return hop;
  }
  return client;
}
