// Where a webhook may go. An endpoint's URL is chosen by whoever configures the site, and the
// server sends from inside the deployment's network, so without a check a URL could reach the
// database, an admin port or the cloud's metadata service (SSRF). Two checks, both needed:
// - checkWebhookUrl, when an endpoint is added and before each attempt: the URL's shape, and its
//   host when it is an IP literal (Node connects to a literal without calling `lookup`);
// - safeLookup, at each new connection: the addresses a host name resolves to. The socket
//   connects to the address checked, so a name that resolves differently later (DNS rebinding)
//   gains nothing.
// WEBHOOK_ALLOW_PRIVATE=true (receivers on a private network, tests) turns both off and allows http.
import dns from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import ipaddr from 'ipaddr.js';

const MAX_URL_LENGTH = 2048;
const IPV4_COMPATIBLE = ipaddr.IPv6.parseCIDR('::/96');

/** Undefined when `url` may receive webhooks, else why not, in a line for an operator. */
export function checkWebhookUrl(url: string, allowPrivate: boolean): string | undefined {
  if (url.length > MAX_URL_LENGTH) return `the URL is longer than ${MAX_URL_LENGTH} characters`;
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return 'not a URL';
  }
  if (parsed.protocol === 'http:' && !allowPrivate)
    return 'the URL must use https (http only with private targets allowed)';
  if (parsed.protocol !== 'https:' && parsed.protocol !== 'http:')
    return `the URL must use https, not ${parsed.protocol}`;
  if (parsed.username !== '' || parsed.password !== '') return 'the URL must not contain a user name or password';
  // `hash` is '' for a bare trailing '#' too; in a serialized URL a '#' can only start a fragment.
  if (parsed.href.includes('#')) return 'the URL must not have a fragment';
  // The URL parser has already normalized the host: 2130706433 and 0x7f.1 are 127.0.0.1 here.
  const host = parsed.hostname.replace(/^\[(.*)\]$/, '$1');
  if (!allowPrivate && isIP(host) !== 0 && forbiddenAddress(host))
    return `${host} is not a public address (loopback, private, link-local or reserved)`;
  return undefined;
}

/**
 * True for an address webhooks must not reach: anything but public unicast, and anything that is
 * not an address. IPv4-mapped IPv6 (::ffff:a.b.c.d) is judged as the IPv4 address it reaches.
 */
export function forbiddenAddress(address: string): boolean {
  // net.isIP first: ipaddr.js also reads forms such as "127.1" or "0x7f000001", which no
  // resolver answers; an address that is not written the usual way is refused, not guessed at.
  if (isIP(address) === 0) return true;
  let parsed: ipaddr.IPv4 | ipaddr.IPv6;
  try {
    parsed = ipaddr.process(address);
  } catch {
    return true;
  }
  // ipaddr.js names every special-purpose block it knows (private, loopback, linkLocal,
  // carrierGradeNat, uniqueLocal, 6to4, teredo, rfc6052 …) and calls the rest 'unicast'. The
  // deprecated IPv4-compatible block ::/96 is part of that rest; it is refused here as well.
  if (parsed instanceof ipaddr.IPv6 && parsed.match(IPV4_COMPATIBLE)) return true;
  return parsed.range() !== 'unicast';
}

/** The error a refused lookup fails with; its code says why the connection was not made. */
export class PrivateAddressError extends Error {
  readonly code = 'EWEBHOOKPRIVATE';
  readonly hostname: string;
  readonly address: string;
  constructor(hostname: string, address: string) {
    super(`${hostname} resolves to ${address}, which is not a public address`);
    this.name = 'PrivateAddressError';
    this.hostname = hostname;
    this.address = address;
  }
}

/**
 * A `lookup` for http.request and net.connect that refuses a host when any of its addresses is
 * forbidden (not only the one Node would pick: with several, Node may try each in turn). Node
 * calls it with `{all: true}` when it races the address families (autoSelectFamily, the
 * default) and expects the list back; otherwise it expects one address and its family.
 */
export function safeLookup(allowPrivate: boolean): LookupFunction {
  return function webhookLookup(hostname, options, callback) {
    dns.lookup(hostname, { ...options, all: true }, (error, addresses) => {
      if (error) return callback(error, options.all ? [] : '');
      const refused = allowPrivate ? undefined : addresses.find((entry) => forbiddenAddress(entry.address));
      if (refused !== undefined)
        return callback(new PrivateAddressError(hostname, refused.address), options.all ? [] : '');
      if (options.all) return callback(null, addresses);
      const [first] = addresses;
      if (first === undefined)
        return callback(Object.assign(new Error(`${hostname} has no address`), { code: 'ENOTFOUND' }), '');
      callback(null, first.address, first.family);
    });
  };
}
