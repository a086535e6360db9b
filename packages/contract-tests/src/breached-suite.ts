// Breached-password screening through the client (issue 30, point 4), against a local range API
// that answers as Have I Been Pwned's does (`SUFFIX:COUNT` lines, zero-count padding): create, a
// password update, a reset and an import refuse a breached password with nothing changed; a count
// below BREACHED_PASSWORDS_MIN_COUNT passes; a right password at verify marks the account and
// sends user.password_breached; a range API that hangs is fail-open (the default) or fail-closed
// (503 breach_check_unavailable) within the timeout; and the range API never sees more than the
// first five hex digits of a password's SHA-1. Server targets only.
import { createHash, pbkdf2Sync } from 'node:crypto';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Problem } from '@user-accounts/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { issuedTicket, useTarget } from './harness.ts';
import type { TargetSpec } from './targets.ts';

const sha1 = (text: string) => createHash('sha1').update(text, 'utf8').digest('hex').toUpperCase();
const TIMEOUT_MS = 600;
const MIN_COUNT = 10;

export function defineBreachedSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: breached-password screening`, () => {
    const h = useTarget(spec);
    // The corpus: full SHA-1 → count. Every other suffix of an asked prefix is answered too, as
    // padding with count 0 (HIBP's Add-Padding), so a range is never empty.
    const corpus = new Map<string, number>();
    const asked: { url: string; headers: IncomingHttpHeaders }[] = [];
    let hang = false;
    let range: Server;
    const used = new Set<string>();
    const breached = (count = 3_645_804) => {
      const password = `leaked ${Math.random().toString(36).slice(2)} passphrase`;
      corpus.set(sha1(password), count);
      used.add(password);
      return password;
    };
    const fresh = () => {
      const password = h.password();
      used.add(password);
      return password;
    };

    beforeAll(async () => {
      range = createServer((request, response) => {
        asked.push({ url: request.url!, headers: request.headers });
        if (hang) return; // never answers
        const prefix = /^\/range\/([0-9A-F]{5})$/.exec(request.url!)?.[1];
        if (prefix === undefined) return void response.writeHead(404).end();
        const lines = [...corpus]
          .filter(([hash]) => hash.startsWith(prefix))
          .map(([hash, count]) => `${hash.slice(5)}:${count}`);
        for (let i = 0; i < 40; i++)
          lines.push(`${createHash('sha1').update(`${prefix}${i}`).digest('hex').toUpperCase().slice(5)}:0`);
        response.writeHead(200, { 'Content-Type': 'text/plain' }).end(lines.sort().join('\r\n'));
      });
      await new Promise<void>((resolve) => range.listen(0, '127.0.0.1', resolve));
      await h.target.restart({
        env: {
          BREACHED_PASSWORDS_URL: `http://127.0.0.1:${(range.address() as AddressInfo).port}/`,
          BREACHED_PASSWORDS_MIN_COUNT: String(MIN_COUNT),
          BREACHED_PASSWORDS_TIMEOUT_MS: String(TIMEOUT_MS),
        },
      });
      h.reconnect();
    }, 120_000);
    afterAll(() => {
      range?.closeAllConnections();
      range?.close();
    });

    const get = async (id: string) =>
      (await h.client.GET('/api/1/user/get', { params: { query: { _userId: id } } })).data!.result;
    const byEmail = async (email: string) =>
      (await h.client.GET('/api/1/user/get', { params: { query: { email } } })).response.status;
    const expectBreached = (error: unknown, status: number, pointer = '/password') => {
      expect(status, JSON.stringify(error)).toBe(400);
      expect(error as Problem).toMatchObject({ code: 'breached', errors: [{ pointer, code: 'breached' }] });
    };
    const resetTicket = async (id: string) => {
      const { data, response } = await h.client.POST('/api/1/user/ticket', {
        body: { _userId: id, purpose: 'reset_password' },
      });
      expect(response.status).toBe(201);
      return issuedTicket(data!.result);
    };
    const signsIn = async (email: string, password: string) =>
      (await h.client.POST('/api/1/user/verify', { body: { email, password } })).response.status === 200;

    it('refuses a breached password on create, update, reset and import (400 breached at /password), changing nothing', async () => {
      // create
      const email = h.uniqueEmail('breached');
      const created = await h.client.POST('/api/1/user/create', {
        body: { email, name: 'Ada Lovelace', password: breached() },
      });
      expectBreached(created.error, created.response.status);
      expect(await byEmail(email)).toBe(404);

      // update
      const user = await h.createUser();
      const before = await get(user.id);
      const updated = await h.client.POST('/api/1/user/update', { body: { _userId: user.id, password: breached() } });
      expectBreached(updated.error, updated.response.status);
      expect(await get(user.id)).toEqual(before);
      expect(await signsIn(user.email, user.password)).toBe(true);

      // reset: refused, the ticket stays usable for a password that is not breached
      const ticket = await resetTicket(user.id);
      const reset = await h.client.POST('/api/1/user/ticket/redeem', {
        body: { ticket, purpose: 'reset_password', password: breached() },
      });
      expectBreached(reset.error, reset.response.status);
      expect(await signsIn(user.email, user.password)).toBe(true);
      const next = fresh();
      const redeemed = await h.client.POST('/api/1/user/ticket/redeem', {
        body: { ticket, purpose: 'reset_password', password: next },
      });
      expect(redeemed.response.status).toBe(200);
      expect(await signsIn(user.email, next)).toBe(true);

      // import: the breached row fails at its index, the others go on
      const [leaked, clean] = [h.uniqueEmail('import-leaked'), h.uniqueEmail('import-clean')];
      const imported = await h.client.POST('/api/1/user/import', {
        body: {
          users: [
            { email: leaked, name: 'Leaked', password: breached() },
            { email: clean, name: 'Clean', password: fresh() },
          ],
        },
      });
      expect(imported.response.status).toBe(200);
      expect(imported.data!.result).toMatchObject({ created: 1, failed: 1 });
      expect(imported.data!.result.items[0]).toMatchObject({
        index: 0,
        error: { code: 'breached', errors: [{ pointer: '/users/0/password', code: 'breached' }] },
      });
      expect(imported.data!.result.items[1]).toMatchObject({ index: 1, status: 'user created' });
      expect(await byEmail(leaked)).toBe(404);
      expect(await byEmail(clean)).toBe(200);
    });

    it('accepts a password seen fewer times than BREACHED_PASSWORDS_MIN_COUNT', async () => {
      const password = breached(MIN_COUNT - 1);
      const { response } = await h.client.POST('/api/1/user/create', {
        body: { email: h.uniqueEmail('rare'), name: 'Ada Lovelace', password },
      });
      expect(response.status).toBe(201);
      const refused = await h.client.POST('/api/1/user/create', {
        body: { email: h.uniqueEmail('common'), name: 'Ada Lovelace', password: breached(MIN_COUNT) },
      });
      expectBreached(refused.error, refused.response.status);
    });

    it('marks an account at a verify with its breached password (passwordBreached, user.password_breached, no secret), until the password changes', async () => {
      // An account brought over with its hash (never screened): its password is in the corpus.
      const password = breached();
      const email = h.uniqueEmail('marked');
      const salt = 'breachsalt';
      const hash = pbkdf2Sync(password, salt, 1000, 32, 'sha256').toString('base64');
      const { data } = await h.client.POST('/api/1/user/import', {
        body: { users: [{ email, name: 'Marked', passwordHash: `pbkdf2_sha256$1000$${salt}$${hash}` }] },
      });
      const id = (data!.result.items[0] as { _userId: string })._userId;
      expect(await get(id)).toMatchObject({ passwordBreached: false });
      const { data: feed } = await h.client.GET('/api/1/events', { params: { query: { limit: 1000 } } });
      let after = feed!.result.next;

      const verified = await h.client.POST('/api/1/user/verify', { body: { email, password } });
      expect(verified.response.status).toBe(200);
      // The mark is made beside the login: its event is read with a long-poll, not a sleep.
      let event: Record<string, unknown> | undefined;
      for (let i = 0; i < 10 && event === undefined; i++) {
        const { data: page } = await h.client.GET('/api/1/events', { params: { query: { after, wait: 5 } } });
        event = page!.result.events.find((e) => e.type === 'user.password_breached' && e.subject === id);
        after = page!.result.next;
      }
      expect(event).toBeDefined();
      const account = await get(id);
      expect(account.passwordBreached).toBe(true);
      expect(event!.data).toEqual(account);
      expect(JSON.stringify(event)).not.toContain(password);
      expect(JSON.stringify(event)).not.toContain('$argon2');
      const { data: listed } = await h.client.GET('/api/1/user/list', { params: { query: { email } } });
      expect(listed!.result.users[0]).toMatchObject({ _userId: id, passwordBreached: true });
      const { data: trail } = await h.client.GET('/api/1/audit', { params: { query: { _userId: id } } });
      expect(trail!.result.entries.map((e) => e.operation)).toContain('password_breached');

      // A second verify changes nothing more: one mark, one event.
      expect(await signsIn(email, password)).toBe(true);
      // A new password clears the mark.
      const updated = await h.client.POST('/api/1/user/update', { body: { _userId: id, password: fresh() } });
      expect(updated.response.status).toBe(200);
      expect(await get(id)).toMatchObject({ passwordBreached: false });
      const { data: rest } = await h.client.GET('/api/1/events', { params: { query: { after, limit: 1000 } } });
      expect(rest!.result.events.filter((e) => e.type === 'user.password_breached')).toEqual([]);
    });

    it('fail-open (the default): a range API that hangs lets create through within the timeout, and never holds up verify', async () => {
      hang = true;
      try {
        const password = fresh();
        const email = h.uniqueEmail('open');
        const started = performance.now();
        const { response } = await h.client.POST('/api/1/user/create', {
          body: { email, name: 'Ada Lovelace', password },
        });
        const took = performance.now() - started;
        expect(response.status).toBe(201);
        expect(took).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
        expect(took).toBeLessThan(TIMEOUT_MS + 2_000);
        expect(h.target.logs.some((line) => line.includes('password accepted unchecked'))).toBe(true);
        // verify with a range never asked (a new password) answers without waiting for it.
        const other = await h.createUser();
        const at = performance.now();
        expect(await signsIn(other.email, other.password)).toBe(true);
        expect(performance.now() - at).toBeLessThan(TIMEOUT_MS);
      } finally {
        hang = false;
      }
    });

    it('fail-closed: a range API that hangs is 503 breach_check_unavailable with Retry-After within the timeout, nothing created; verify still signs in', async () => {
      const user = await h.createUser(); // before the restart, while the range answers
      await h.target.restart({ env: { BREACHED_PASSWORDS_FAIL: 'closed' } });
      h.reconnect();
      hang = true;
      try {
        const email = h.uniqueEmail('closed');
        const started = performance.now();
        const { error, response } = await h.client.POST('/api/1/user/create', {
          body: { email, name: 'Ada Lovelace', password: fresh() },
        });
        const took = performance.now() - started;
        expect(response.status).toBe(503);
        expect((error as Problem).code).toBe('breach_check_unavailable');
        expect(Number(response.headers.get('retry-after'))).toBeGreaterThan(0);
        expect(took).toBeGreaterThanOrEqual(TIMEOUT_MS - 50);
        expect(took).toBeLessThan(TIMEOUT_MS + 2_000);
        expect(await byEmail(email)).toBe(404);
        const imported = await h.client.POST('/api/1/user/import', {
          body: { users: [{ email, name: 'Ada Lovelace', password: fresh() }] },
        });
        expect(imported.response.status).toBe(503);
        expect((imported.error as Problem).code).toBe('breach_check_unavailable');
        expect(await byEmail(email)).toBe(404);
        // A right password is never refused for the corpus, whatever BREACHED_PASSWORDS_FAIL says.
        expect(await signsIn(user.email, user.password)).toBe(true);
      } finally {
        hang = false;
      }
    });

    it('never sends the range API more than the first five hex digits of the SHA-1', () => {
      expect(asked.length).toBeGreaterThan(0);
      const sent = JSON.stringify(asked);
      for (const { url, headers } of asked) {
        expect(url).toMatch(/^\/range\/[0-9A-F]{5}$/);
        expect(headers['add-padding']).toBe('true');
      }
      for (const password of used) {
        expect(sent).not.toContain(password);
        expect(sent).not.toContain(sha1(password).slice(5, 15));
        expect(sent.toLowerCase()).not.toContain(sha1(password).slice(5, 15).toLowerCase());
      }
    });
  });
}
