// The token cache: what it keeps, and every way it lets go (a change heard, the listener lost, a
// lookup overtaken by a change, expiry), over the embedded database with its trigger.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Database } from '../db/client.ts';
import { openMigratedPglite } from '../testing/templates.ts';
import { createToken, createTokenVerifier, revokeToken, TOKENS_CHANNEL } from './tokens.ts';

let database: Database;
beforeAll(async () => {
  database = await openMigratedPglite();
});
afterAll(() => database?.close());

const newToken = (expiresAt?: Date) =>
  createToken(database.db, { site: 'default', scopes: ['read'], label: 'cache test', expiresAt });

/** Revokes behind the cache's back: the trigger off, so that no change is heard. */
async function revokeUnheard(id: string) {
  const client = database.sql;
  await client.unsafe('alter table api_tokens disable trigger api_tokens_notify');
  try {
    await revokeToken(database.db, id);
  } finally {
    await client.unsafe('alter table api_tokens enable trigger api_tokens_notify');
  }
}

/** Live, and hearing its heartbeat for good (as the embedded database's listener says). */
function trust(verifier: ReturnType<typeof createTokenVerifier>) {
  verifier.setLive(true);
  verifier.confirmed(Number.POSITIVE_INFINITY);
}

describe('the token cache', () => {
  it('stops trusting what it holds once the heartbeat is overdue, though the listener never said it was lost', async () => {
    const verifier = createTokenVerifier(database.db, []);
    verifier.setLive(true);
    // A second: room for the five statements below on a busy machine (100 ms was not, beside
    // another test file), then a wait until it is over.
    const heardUntil = performance.now() + 1_000;
    verifier.confirmed(heardUntil);
    const { id, token } = await newToken();
    expect((await verifier.verify(token))?.id).toBe(id);
    await revokeUnheard(id);
    expect((await verifier.verify(token))?.id).toBe(id); // from memory, within the confirmed time
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, heardUntil - performance.now()) + 50));
    expect(await verifier.verify(token)).toBeUndefined();
  });

  it('answers a token it accepted from memory while changes are heard, and forgets it when told', async () => {
    const verifier = createTokenVerifier(database.db, []);
    trust(verifier);
    const { id, token } = await newToken();
    expect((await verifier.verify(token))?.id).toBe(id);
    await revokeUnheard(id);
    expect((await verifier.verify(token))?.id).toBe(id); // from memory: the revocation was not heard
    verifier.invalidate();
    expect(await verifier.verify(token)).toBeUndefined();
  });

  it('reads the database on every request while changes are not heard', async () => {
    const verifier = createTokenVerifier(database.db, []);
    const { id, token } = await newToken();
    expect((await verifier.verify(token))?.id).toBe(id);
    await revokeUnheard(id);
    expect(await verifier.verify(token)).toBeUndefined();
  });

  it('drops what it holds when the listener is lost, and caches nothing until it is back', async () => {
    const verifier = createTokenVerifier(database.db, []);
    trust(verifier);
    const first = await newToken();
    await verifier.verify(first.token);
    verifier.setLive(false);
    await revokeUnheard(first.id);
    expect(await verifier.verify(first.token)).toBeUndefined();

    const second = await newToken();
    await verifier.verify(second.token); // while not live: not cached
    trust(verifier);
    await revokeUnheard(second.id);
    expect(await verifier.verify(second.token)).toBeUndefined();
  });

  it('does not cache a lookup that a change overtook', async () => {
    const verifier = createTokenVerifier(database.db, []);
    trust(verifier);
    const { id, token } = await newToken();
    const reading = verifier.verify(token);
    verifier.invalidate(); // heard while the lookup was on its way
    expect((await reading)?.id).toBe(id);
    await revokeUnheard(id);
    expect(await verifier.verify(token)).toBeUndefined();
  });

  it('stops accepting a cached token when it expires, with no change heard', async () => {
    const verifier = createTokenVerifier(database.db, []);
    trust(verifier);
    const { id, token } = await newToken(new Date(Date.now() + 600));
    expect((await verifier.verify(token))?.id).toBe(id);
    await new Promise((resolve) => setTimeout(resolve, 700));
    expect(await verifier.verify(token)).toBeUndefined();
  });

  it('is told of a revocation by the database as it commits, and not of a last-used flush', async () => {
    const verifier = createTokenVerifier(database.db, []);
    let heard = 0;
    const listening = await database.listen(TOKENS_CHANNEL, {
      notified() {
        heard++;
        verifier.invalidate();
      },
      live: (up) => verifier.setLive(up),
      confirmed: (until) => verifier.confirmed(until),
    });
    try {
      const { id, token } = await newToken();
      expect((await verifier.verify(token))?.id).toBe(id);
      await verifier.flushLastUsed();
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(heard).toBe(0);
      await revokeToken(database.db, id);
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(heard).toBe(1);
      expect(await verifier.verify(token)).toBeUndefined();
    } finally {
      await listening.close();
    }
  });

  it('is told when the table is truncated (last: it empties the table)', async () => {
    const verifier = createTokenVerifier(database.db, []);
    const listening = await database.listen(TOKENS_CHANNEL, {
      notified: () => verifier.invalidate(),
      live: (up) => verifier.setLive(up),
      confirmed: (until) => verifier.confirmed(until),
    });
    try {
      const { id, token } = await newToken();
      expect((await verifier.verify(token))?.id).toBe(id);
      await database.sql.unsafe('truncate api_tokens');
      await new Promise((resolve) => setTimeout(resolve, 50));
      expect(await verifier.verify(token)).toBeUndefined();
    } finally {
      await listening.close();
    }
  });
});
