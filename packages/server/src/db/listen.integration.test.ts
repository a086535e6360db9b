// The PostgreSQL listener: it says when it may miss notifications (its connection killed) and
// when it hears them again. Needs TEST_DATABASE_URL; skipped, saying so, without it.
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { postgresUnavailable } from '../testing/postgres.ts';
import { listenPostgres } from './listen.ts';

const URL = process.env.TEST_DATABASE_URL;

const skip = await postgresUnavailable();
if (skip !== undefined) console.warn(`\n[listen.test] the PostgreSQL listener: SKIPPED, ${skip}\n`);

const admin = URL && skip === undefined ? postgres(URL, { max: 1, onnotice: () => {} }) : undefined;
afterAll(() => admin?.end({ timeout: 1 }));

/** Resolves when `check` holds, polling every 10 ms; fails after `ms`. */
async function until(check: () => boolean, ms = 5_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error('timed out');
    await new Promise((resolve) => setTimeout(resolve, 10));
  }
}

describe.skipIf(skip !== undefined)('listening on PostgreSQL', () => {
  it('is listening once it returns: a notification sent right after is heard', async () => {
    const channel = `ua_test_${process.pid}_${Date.now()}_first`;
    const states: boolean[] = [];
    const heard: string[] = [];
    const listening = await listenPostgres(URL!, channel, {
      notified: (payload) => heard.push(payload),
      live: (up) => states.push(up),
      confirmed: () => {},
    });
    try {
      expect(states).toEqual([true]);
      await admin!`select pg_notify(${channel}, 'shop')`;
      await until(() => heard.includes('shop'));
    } finally {
      await listening.close();
    }
  });

  it('hears notifications, reports the loss of its connection at once, and listens again by itself', async () => {
    const channel = `ua_test_${process.pid}_${Date.now()}`;
    const states: boolean[] = [];
    let heard = 0;
    let confirmations = 0;
    const listening = await listenPostgres(URL!, channel, {
      notified: () => heard++,
      live: (up) => states.push(up),
      confirmed: () => confirmations++,
    });
    try {
      await until(() => states.at(-1) === true);
      // Its own heartbeat comes back through LISTEN, again and again; another server's changes nothing.
      await until(() => confirmations >= 3);
      await admin!`select pg_notify(${channel}, 'beat:another server:1')`;
      await admin!`select pg_notify(${channel}, '')`;
      await until(() => heard === 1);

      await admin!`select pg_terminate_backend(pid) from pg_stat_activity
        where application_name = ${`user-accounts listen ${channel}`}`;
      await until(() => states.length >= 2);
      expect(states.slice(0, 2)).toEqual([true, false]);
      await until(() => states.at(-1) === true);
      await admin!`select pg_notify(${channel}, '')`;
      await until(() => heard === 2);
    } finally {
      await listening.close();
    }
    expect(states).toEqual([true, false, true, false]);
    expect(heard).toBe(2);
  });
});
