import { randomBytes } from 'node:crypto';
import { verify } from '@node-rs/argon2';
import { describe, expect, it } from 'vitest';
import { ApiError } from '../errors.ts';
import { createPasswordHasher, type PasswordHasher } from './hasher.ts';

/** Hashes `password` for `site`, noting in `order` when it finished, and how. */
function hashAs(hasher: PasswordHasher, site: string, password: string, order: string[]) {
  return hasher.hash(password, site).then(
    (phc) => {
      order.push(password);
      return phc;
    },
    (error: unknown) => {
      order.push(`${password}: ${error instanceof ApiError ? error.status : String(error)}`);
      return undefined;
    },
  );
}

describe('createPasswordHasher', () => {
  it('answers an argon2id hash (m=19456, t=2, p=1) of the NFC form that verifies', async () => {
    const hasher = createPasswordHasher({ concurrency: 1 });
    const phc = await hasher.hash('Cafe\u0301 au lait, s’il vous plaît', 'shop');
    expect(phc).toMatch(/^\$argon2id\$v=19\$m=19456,t=2,p=1\$/);
    expect(await verify(phc, 'Caf\u00e9 au lait, s’il vous plaît')).toBe(true);
    expect(hasher.load).toEqual({ running: 0, waiting: 0 });
  });

  it("serves first the waiting sites that have hashed least lately, each site's hashes in the order they came", async () => {
    const hasher = createPasswordHasher({ concurrency: 1, maxWaiting: 100 });
    const order: string[] = [];
    const hashes = [
      ...['a1', 'a2', 'a3', 'a4', 'a5'].map((p) => hashAs(hasher, 'a', p, order)),
      ...['b1', 'b2'].map((p) => hashAs(hasher, 'b', p, order)),
      hashAs(hasher, 'c', 'c1', order),
    ];
    expect(hasher.load).toEqual({ running: 1, waiting: 7 });
    await Promise.all(hashes);
    // a1 held the slot when the others came; b and c, which had used no time, go before a's next.
    expect(order.slice(0, 3)).toEqual(['a1', 'b1', 'c1']);
    for (const site of ['a', 'b']) {
      const own = order.filter((o) => o.startsWith(site));
      expect(own).toEqual([...own].sort());
    }
    expect(order).toHaveLength(8);
    expect(hasher.load).toEqual({ running: 0, waiting: 0 });
  });

  it("lets a quieter site in when the waiting room is full, refusing the busiest site's newest hash", async () => {
    const hasher = createPasswordHasher({ concurrency: 1, maxWaiting: 2 });
    const order: string[] = [];
    const hashes = ['a1', 'a2', 'a3'].map((p) => hashAs(hasher, 'a', p, order));
    expect(hasher.load).toEqual({ running: 1, waiting: 2 });
    // The busiest site itself gets no further: it already holds the whole room.
    hashes.push(hashAs(hasher, 'a', 'a4', order));
    hashes.push(hashAs(hasher, 'b', 'b1', order));
    expect(hasher.load).toEqual({ running: 1, waiting: 2 });
    // b now has as many waiting as a: neither may push the other out.
    hashes.push(hashAs(hasher, 'b', 'b2', order));
    hashes.push(hashAs(hasher, 'a', 'a5', order));
    const results = await Promise.all(hashes);
    expect(order.filter((o) => o.endsWith(': 503')).sort()).toEqual(['a3: 503', 'a4: 503', 'a5: 503', 'b2: 503']);
    expect(order.filter((o) => !o.includes(':'))).toEqual(['a1', 'b1', 'a2']);
    expect(results.filter((r) => r !== undefined)).toHaveLength(3);
  });

  it('refuses with 503 service_unavailable and Retry-After, and nothing waits, when there is no waiting room', async () => {
    const hasher = createPasswordHasher({ concurrency: 1, maxWaiting: 0 });
    const first = hasher.hash('a first passphrase', 'a');
    const refused = await hasher.hash('a second passphrase', 'b').catch((error: unknown) => error);
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused).toMatchObject({ status: 503, code: 'service_unavailable', headers: { 'Retry-After': '1' } });
    await first;
    expect(hasher.load).toEqual({ running: 0, waiting: 0 });
  });

  it('frees the slot of a hash that failed, for the next site in turn', async () => {
    const hasher = createPasswordHasher({ concurrency: 1, maxWaiting: 4 });
    // A lone surrogate cannot be encoded as UTF-8 for argon2; whatever it does, the slot comes back.
    const odd = hasher.hash('\ud800'.repeat(4), 'a').catch(() => undefined);
    const next = hasher.hash('a next passphrase', 'b');
    await odd;
    expect(await next).toMatch(/^\$argon2id\$/);
    expect(hasher.load).toEqual({ running: 0, waiting: 0 });
  });

  it('checks a hash costing far more than its own in a lane of its own: it never holds a shared slot', async () => {
    // Found by attack (issue 26): imported PBKDF2 hashes of 10,000,000 rounds held every shared
    // slot for seconds, and every site's logins waited behind them.
    const hasher = createPasswordHasher({ concurrency: 1, maxWaiting: 8 });
    const b64 = (n: number) => randomBytes(n).toString('base64').replaceAll('=', '').replaceAll('+', '.');
    const costly = `$pbkdf2-sha512$2000000$${b64(16)}$${b64(64)}`;
    const started = performance.now();
    const slow = hasher.verify(costly, 'a wrong guess', 'evil').then(() => performance.now() - started);
    const slower = hasher.verify(costly, 'another wrong guess', 'evil').then(() => performance.now() - started);
    const own = hasher.hash('a passphrase of the shop', 'shop').then(() => performance.now() - started);
    const [slowMs, slowerMs, ownMs] = await Promise.all([slow, slower, own]);
    // The costly checks ran one after the other in their own lane; the shop's hash did not wait.
    expect(slowMs).toBeGreaterThan(4 * ownMs);
    // One after the other, the second ends a whole check after the first (side by side, both end
    // together); 1.25x, not 2x, because a neighbour on the cores can slow the first check alone.
    expect(slowerMs).toBeGreaterThan(1.25 * slowMs);
    expect(hasher.load).toEqual({ running: 0, waiting: 0 });
  }, 30_000);

  it("chooses an imported hash's lane by costReference, not by the cost of new hashes (the test profile)", async () => {
    const b64 = (n: number) => randomBytes(n).toString('base64').replaceAll('=', '').replaceAll('+', '.');
    // About 29 ms: over 8x the test profile's hash, under 8x OWASP's baseline.
    const imported = `$pbkdf2-sha512$100000$${b64(16)}$${b64(64)}`;
    const cheap = { memoryCost: 1024, timeCost: 1, parallelism: 1 };
    const production = { memoryCost: 19456, timeCost: 2, parallelism: 1 };
    // Two shared slots; the costly lane has one and no waiting room: a second costly check is refused.
    const lanes = { concurrency: 2, costlyConcurrency: 1, costlyMaxWaiting: 0 };
    const twoAtOnce = async (hasher: PasswordHasher) =>
      (
        await Promise.allSettled([hasher.verify(imported, 'one guess', 'x'), hasher.verify(imported, 'another', 'x')])
      ).map((r) => r.status);
    expect(await twoAtOnce(createPasswordHasher({ ...lanes, params: cheap }))).toEqual(['fulfilled', 'rejected']);
    const testProfile = createPasswordHasher({ ...lanes, params: cheap, costReference: production });
    expect(await twoAtOnce(testProfile)).toEqual(['fulfilled', 'fulfilled']);
    expect(await testProfile.hash('a passphrase', 'x')).toMatch(/^\$argon2id\$v=19\$m=1024,t=1,p=1\$/);
  });

  // Found by review (issue 42's test profile): needsRehash was "not made as new hashes are now",
  // so a server with a cheaper setting (the test profile pointed at a real database, by mistake)
  // rewrote every production hash it verified down to its own cost.
  it('never rehashes down: an argon2id hash costing at least its own is kept, a cheaper one replaced', async () => {
    const cheap = createPasswordHasher({ params: { memoryCost: 1024, timeCost: 1, parallelism: 1 } });
    const production = createPasswordHasher({});
    const strong = await production.hash('a passphrase', 'x');
    const weak = await cheap.hash('a passphrase', 'x');
    expect(cheap.needsRehash(strong)).toBe(false);
    expect(cheap.needsRehash(weak)).toBe(false);
    expect(production.needsRehash(weak)).toBe(true);
    expect(production.needsRehash(strong)).toBe(false);
    // More memory but fewer passes is not "at least": replaced.
    expect(production.needsRehash(strong.replace('m=19456,t=2', 'm=65536,t=1'))).toBe(true);
    expect(production.needsRehash('$2b$10$abcdefghijklmnopqrstuuFJ9Vf8MSzNVQPuTkz2NSrKMhBFaM5YO')).toBe(true);
  });
});
