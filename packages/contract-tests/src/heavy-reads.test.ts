// Heavy reads bounded per site (issue 41, F2): a list page stops at 2 MB of answer and says
// `next`; a site's exports (and lists, person's-data reads) run HEAVY_READS_PER_SITE at once,
// a few more wait 2 s at most, the rest are 429 rate_limited; another site is never held back.
import { request } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bigAccounts } from './big-accounts.ts';
import { checkedClient } from './harness.ts';
import { embeddedServer, type Target } from './targets.ts';

const PAGE_BYTES = 2 * 1024 * 1024;

describe('list pages', () => {
  let target: Target;
  let token: (site: string, scopes?: string[]) => Promise<string>;
  beforeAll(async () => {
    target = await embeddedServer({ env: {} });
    token = async (site, scopes = ['read']) =>
      (await target.createToken({ site, scopes: scopes as never, label: site })).token;
  });
  afterAll(async () => {
    await target?.close();
  });

  it('stop at 2 MB of answer with fewer accounts than limit and next set; following next gives every account once, in order', async () => {
    // 80 accounts of 64 KiB of metadata: 5 MB, where limit asks for all of them on one page.
    await bigAccounts(target, 'heavy', 80, 64);
    const client = checkedClient(target.baseUrl, await token('heavy'));
    const seen: string[] = [];
    const sizes: number[] = [];
    let after: string | undefined;
    for (let page = 0; page < 10; page++) {
      const { data, response } = await client.GET('/api/1/user/list', {
        params: { query: { limit: 1000, ...(after === undefined ? {} : { after }) } },
        parseAs: 'text',
      });
      expect(response.status).toBe(200);
      const text = data as unknown as string;
      const body = JSON.parse(text) as { result: { users: { email: string }[]; next: string | null } };
      sizes.push(body.result.users.length);
      // The users' JSON within 2 MB; the envelope and the cursor are a few hundred bytes more.
      expect(Buffer.byteLength(text)).toBeLessThanOrEqual(PAGE_BYTES + 1024);
      seen.push(...body.result.users.map((u) => u.email));
      if (body.result.next === null) break;
      after = body.result.next;
    }
    // About 31 accounts of 66 KB fit in 2 MB: before, one page of all 80 and next null.
    expect(sizes[0]).toBeGreaterThanOrEqual(25);
    expect(sizes[0]).toBeLessThan(40);
    expect(sizes.length).toBeGreaterThanOrEqual(3);
    expect(seen).toEqual(Array.from({ length: 80 }, (_, i) => `big.${i + 1}@example.com`));
  }, 60_000);

  it('hold limit accounts when they are small, read from the database in more than one batch', async () => {
    await bigAccounts(target, 'small', 250, 0, 'small');
    const client = checkedClient(target.baseUrl, await token('small'));
    const all = await client.GET('/api/1/user/list', { params: { query: { limit: 1000 } } });
    expect(all.data?.result.users).toHaveLength(250);
    expect(all.data?.result.next).toBeNull();
    const emails: string[] = [];
    let after: string | undefined;
    const sizes: number[] = [];
    for (;;) {
      const { data } = await client.GET('/api/1/user/list', {
        params: { query: { limit: 120, order: 'desc', ...(after === undefined ? {} : { after }) } },
      });
      sizes.push(data!.result.users.length);
      emails.push(...data!.result.users.map((u) => u.email));
      if (data!.result.next === null) break;
      after = data!.result.next;
    }
    expect(sizes).toEqual([120, 120, 10]);
    expect(emails).toEqual(Array.from({ length: 250 }, (_, i) => `small.${250 - i}@example.com`));
  }, 60_000);
});

/** An export of `token`'s site read as raw HTTP: its status, and the response paused after its first bytes. */
function openExport(baseUrl: string, token: string) {
  return new Promise<{ status: number; retryAfter: unknown; close(): void; text(): Promise<string> }>(
    (resolve, reject) => {
      const req = request(`${baseUrl}/api/1/user/export`, { headers: { authorization: `Bearer ${token}` } }, (res) => {
        resolve({
          status: res.statusCode ?? 0,
          retryAfter: res.headers['retry-after'],
          close: () => res.destroy(),
          text: async () => {
            let text = '';
            for await (const chunk of res) text += chunk;
            return text;
          },
        });
      });
      req.on('error', reject);
      req.end();
    },
  );
}

describe('exports', () => {
  it('run HEAVY_READS_PER_SITE at once per site, each until its stream ends: one more waits 2 s, then 429 rate_limited with Retry-After: 1; another site exports meanwhile', async () => {
    const target = await embeddedServer({ env: { HEAVY_READS_PER_SITE: '1' } });
    try {
      const token = async (site: string) =>
        (await target.createToken({ site, scopes: ['export'] as never, label: site })).token;
      // 300 accounts of 32 KiB: pages of about 2 MB, more than the sockets hold while nobody reads.
      await bigAccounts(target, 'evil', 300, 32);
      await bigAccounts(target, 'shop', 3, 1, 'shop');
      const [evil, shop] = [await token('evil'), await token('shop')];
      const first = await openExport(target.baseUrl, evil);
      expect(first.status).toBe(200);
      // The first export is still streaming (its client does not read): the second waits, then 429.
      const started = performance.now();
      const second = await openExport(target.baseUrl, evil);
      const waited = performance.now() - started;
      expect(second.status).toBe(429);
      expect(second.retryAfter).toBe('1');
      const problem = JSON.parse(await second.text()) as { code: string };
      expect(problem.code).toBe('rate_limited');
      expect(waited).toBeGreaterThan(1_800);
      // Shop's export is not held back by evil's.
      const shops = await openExport(target.baseUrl, shop);
      expect(shops.status).toBe(200);
      expect((await shops.text()).trim().split('\n')).toHaveLength(3);
      // The place comes back when the first export's client goes away.
      first.close();
      await expect
        .poll(
          async () => {
            const again = await openExport(target.baseUrl, evil);
            if (again.status !== 200) {
              await again.text();
              return again.status;
            }
            expect((await again.text()).trim().split('\n')).toHaveLength(300);
            return 200;
          },
          { timeout: 10_000 },
        )
        .toBe(200);
    } finally {
      await target.close();
    }
  }, 60_000);

  // Found by review: Hono runs a GET's handler for HEAD and drops the body unread, so the stream
  // was never pulled nor cancelled and a HEAD held its export place for good (HEAVY_READS_PER_SITE
  // HEADs, and every later export of the site waited 2 s, then 429).
  it('answer HEAD with the headers alone, holding no place: a GET after two HEADs streams at once', async () => {
    const target = await embeddedServer({ env: { HEAVY_READS_PER_SITE: '1' } });
    try {
      const { token } = await target.createToken({ site: 'shop', scopes: ['export'] as never, label: 'shop' });
      await bigAccounts(target, 'shop', 3, 1, 'shop');
      const headers = { authorization: `Bearer ${token}` };
      for (let i = 0; i < 2; i++) {
        const head = await fetch(`${target.baseUrl}/api/1/user/export`, { method: 'HEAD', headers });
        expect(head.status).toBe(200);
        expect(head.headers.get('content-type')).toBe('application/x-ndjson');
        expect(head.headers.get('export-omits')).toContain('second-factors');
      }
      const started = performance.now();
      const get = await fetch(`${target.baseUrl}/api/1/user/export`, { headers });
      expect(get.status).toBe(200);
      expect((await get.text()).trim().split('\n')).toHaveLength(3);
      expect(performance.now() - started).toBeLessThan(1_500);
    } finally {
      await target.close();
    }
  }, 60_000);
});
