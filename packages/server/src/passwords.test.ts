import { verify } from '@node-rs/argon2';
import { describe, expect, it } from 'vitest';
import { ApiError } from './errors.ts';
import { createPasswordHasher, type PasswordHasher } from './passwords.ts';

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

  it("serves the sites' waiting hashes in turn, each site's in the order they came", async () => {
    const hasher = createPasswordHasher({ concurrency: 1, maxWaiting: 100 });
    const order: string[] = [];
    const hashes = [
      ...['a1', 'a2', 'a3', 'a4', 'a5'].map((p) => hashAs(hasher, 'a', p, order)),
      ...['b1', 'b2'].map((p) => hashAs(hasher, 'b', p, order)),
      hashAs(hasher, 'c', 'c1', order),
    ];
    expect(hasher.load).toEqual({ running: 1, waiting: 7 });
    await Promise.all(hashes);
    // a1 held the slot when the others came; then a, b and c take turns while each has some waiting.
    expect(order).toEqual(['a1', 'a2', 'b1', 'c1', 'a3', 'b2', 'a4', 'a5']);
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
    expect(order.filter((o) => !o.includes(':'))).toEqual(['a1', 'a2', 'b1']);
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
});
