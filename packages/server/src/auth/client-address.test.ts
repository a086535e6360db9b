import { describe, expect, it } from 'vitest';
import {
  canonicalAddress,
  clientAddress,
  parseTrustedProxies,
  TRUST_NOBODY,
  type TrustedProxies,
} from './client-address.ts';

const trust = (list: string) => parseTrustedProxies(list) as TrustedProxies;

describe('TRUSTED_PROXIES', () => {
  // That the variable unset means TRUST_NOBODY: config/env.test.ts (config/ is above auth/).
  it('trusts nobody by default', () => {
    expect(TRUST_NOBODY.entries).toEqual([]);
    expect(TRUST_NOBODY.has('127.0.0.1')).toBe(false);
    expect(clientAddress('127.0.0.1', '198.51.100.9', TRUST_NOBODY)).toBe('127.0.0.1');
  });

  it('takes addresses and CIDR blocks, IPv4 and IPv6; an IPv4 entry matches a mapped peer', () => {
    const trusted = trust(' 127.0.0.1, 10.0.0.0/8 ,2001:db8::/32,::ffff:192.168.0.0/112');
    expect(trusted.entries).toEqual(['127.0.0.1/32', '10.0.0.0/8', '2001:db8::/32', '192.168.0.0/16']);
    for (const address of ['127.0.0.1', '::ffff:127.0.0.1', '10.200.3.4', '2001:db8:ffff::1', '192.168.4.5'])
      expect(trusted.has(address), address).toBe(true);
    for (const address of ['127.0.0.2', '11.0.0.1', '2001:db9::1', '::1', 'garbage'])
      expect(trusted.has(address), address).toBe(false);
  });

  // The start refused, naming the variable: config/env.test.ts.
  it.each(['127.0.0.1/33', '10.0.0.0/x', '2001:db8::/129', 'localhost', '10.0.0.0/8/8', '127.1'])(
    'refuses %j, naming the entry',
    (entry) => {
      const parsed = parseTrustedProxies(`127.0.0.1,${entry}`);
      expect(parsed).toBeInstanceOf(Error);
      expect((parsed as Error).message).toBe(
        `entries must be IP addresses or CIDR blocks like 10.0.0.0/8 (got "${entry}")`,
      );
    },
  );
});

describe('clientAddress', () => {
  const proxy = trust('127.0.0.1,10.0.0.0/8');

  it('is the peer, canonical, when the peer is not trusted, whatever X-Forwarded-For says', () => {
    expect(clientAddress('203.0.113.7', '198.51.100.9', proxy)).toBe('203.0.113.7');
    expect(clientAddress('::ffff:203.0.113.7', '127.0.0.1', proxy)).toBe('203.0.113.7');
    expect(clientAddress('203.0.113.7', '198.51.100.9', TRUST_NOBODY)).toBe('203.0.113.7');
    expect(clientAddress(undefined, '198.51.100.9', proxy)).toBeUndefined();
  });

  it('is the peer when a trusted proxy sent no X-Forwarded-For (its own health check)', () => {
    expect(clientAddress('127.0.0.1', undefined, proxy)).toBe('127.0.0.1');
  });

  it('is the address a trusted proxy appended, not what the client wrote before it', () => {
    // The client sent "X-Forwarded-For: 1.2.3.4"; HAProxy appended the address it saw.
    expect(clientAddress('127.0.0.1', '198.51.100.9', proxy)).toBe('198.51.100.9');
    expect(clientAddress('::ffff:127.0.0.1', '1.2.3.4, 198.51.100.9', proxy)).toBe('198.51.100.9');
    expect(clientAddress('127.0.0.1', '1.2.3.4,::ffff:198.51.100.9', proxy)).toBe('198.51.100.9');
  });

  it('walks a chain of trusted proxies from the right to the first untrusted address', () => {
    expect(clientAddress('127.0.0.1', '1.2.3.4, 198.51.100.9, 10.1.1.1, 10.2.2.2', proxy)).toBe('198.51.100.9');
    // Every hop trusted: the left-most is the client.
    expect(clientAddress('127.0.0.1', '10.9.9.9, 10.1.1.1', proxy)).toBe('10.9.9.9');
  });

  it('stops at the trusted hop that passed on something that is not an address', () => {
    expect(clientAddress('127.0.0.1', '198.51.100.9, unknown, 10.1.1.1', proxy)).toBe('10.1.1.1');
    expect(clientAddress('127.0.0.1', '198.51.100.9:4711', proxy)).toBe('127.0.0.1');
    expect(clientAddress('127.0.0.1', '', proxy)).toBe('127.0.0.1');
  });
});

describe('canonicalAddress (peers, X-Forwarded-For and X-End-User-IP alike)', () => {
  it.each([
    ['203.0.113.77', '203.0.113.77'],
    ['::ffff:203.0.113.77', '203.0.113.77'],
    ['::ffff:cb00:714d', '203.0.113.77'],
    ['::FFFF:CB00:714D', '203.0.113.77'],
    ['0:0:0:0:0:ffff:203.0.113.77', '203.0.113.77'],
    ['0000:0000:0000:0000:0000:ffff:cb00:714d', '203.0.113.77'],
    ['::203.0.113.77', '203.0.113.77'],
    ['::cb00:714d', '203.0.113.77'],
    ['0:0:0:0:0:0:203.0.113.77', '203.0.113.77'],
    [' 2001:db8::1 ', '2001:db8::1'],
    ['2001:DB8:0:0:0:0:0:1', '2001:db8::1'],
    ['2001:0db8:0000:0000:0000:0000:0000:0001', '2001:db8::1'],
    ['2001:db8::0:1', '2001:db8::1'],
    ['::1', '::1'],
    ['0:0:0:0:0:0:0:1', '::1'],
    ['::', '::'],
  ])('%s is %s', (written, canonical) => {
    expect(canonicalAddress(written)).toBe(canonical);
  });

  it.each(['127.1', '0x7f000001', '203.0.113.7:8080', 'fe80::1%eth0', '[2001:db8::1]', 'unknown', ''])(
    'refuses %j',
    (written) => {
      expect(canonicalAddress(written)).toBeUndefined();
    },
  );
});
