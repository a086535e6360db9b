// What enterprise sign-in needs from the deployment (issue 61): where this service is reached
// (our SP's entity id and metadata URL are under it), and the TXT lookups of domain verification
// through the operator's DNS servers (DNS_RESOLVER) or the system's.
import { Resolver } from 'node:dns/promises';

export interface SsoDeps {
  /** PUBLIC_URL, without a trailing slash. */
  publicUrl: string;
  /** The TXT records at `name`, each as its strings; a DNS error's code (ENOTFOUND, ENODATA…) thrown. */
  resolveTxt(name: string): Promise<string[][]>;
}

/** A lookup of this many seconds at most, tried twice: verification answers within seconds. */
const LOOKUP_TIMEOUT_MS = 3000;

export function createSsoDeps(options: { publicUrl: string; dnsResolvers: readonly string[] }): SsoDeps {
  const resolver = new Resolver({ timeout: LOOKUP_TIMEOUT_MS, tries: 2 });
  if (options.dnsResolvers.length > 0) resolver.setServers([...options.dnsResolvers]);
  return { publicUrl: options.publicUrl, resolveTxt: (name) => resolver.resolveTxt(name) };
}
