// An account's metadata through the client (issue 28, point 1): create, get, list and export give
// it; update merges into it (RFC 7396) in one statement; its bounds; a site's own JSON Schema;
// list's and count's `metadata=` filter with paging and counts, never across sites. Each test
// works in a site of its own. Server targets only.
import type { components } from '@user-accounts/client';
import { describe, expect, it } from 'vitest';
import { API, useTarget } from './harness.ts';
import type { TargetSpec } from './targets.ts';

type User = components['schemas']['User'];
type Json = Record<string, unknown>;

export function defineMetadataSuite(spec: TargetSpec): void {
  if (spec.skip || !spec.stateful) return;

  describe(`${spec.name}: metadata`, () => {
    const h = useTarget(spec);
    let sites = 0;
    const newSite = async (scopes: ('read' | 'write' | 'export')[] = ['read', 'write']) => {
      const site = `meta-${Date.now().toString(36)}-${sites++}`;
      const { token } = await h.target.createToken({ site, scopes, label: 'metadata' });
      return { site, token, client: h.clientFor(token) };
    };
    type Client = Awaited<ReturnType<typeof newSite>>['client'];

    const create = async (client: Client, metadata?: Json) => {
      const body = {
        email: h.uniqueEmail('meta'),
        password: h.password(),
        name: 'Meta Data',
        ...(metadata !== undefined && { metadata }),
      };
      const { data, error, response } = await client.POST('/api/1/user/create', { body });
      return { id: data?.result._userId, error, status: response.status, email: body.email };
    };
    const metadataOf = async (client: Client, id: string) => {
      const { data } = await client.GET('/api/1/user/get', { params: { query: { _userId: id } } });
      return data!.result.metadata;
    };
    const update = (client: Client, id: string, metadata: unknown, ifMatch?: string) =>
      client.POST('/api/1/user/update', {
        body: { _userId: id, metadata: metadata as Json },
        params: { header: ifMatch === undefined ? {} : { 'If-Match': ifMatch } },
      });

    it('is {} when create gives none, and get and list give what create was given', async () => {
      const { client } = await newSite();
      const none = await create(client);
      const some = await create(client, { plan: 'pro', tags: ['a', 'b'], n: 1.5, deep: { on: true }, gone: null });
      expect([none.status, some.status]).toEqual([201, 201]);
      expect(await metadataOf(client, none.id!)).toEqual({});
      expect(await metadataOf(client, some.id!)).toEqual({
        plan: 'pro',
        tags: ['a', 'b'],
        n: 1.5,
        deep: { on: true },
        gone: null,
      });
      const listed = await client.GET('/api/1/user/list', { params: { query: {} } });
      expect(listed.data!.result.users.map((u: User) => u.metadata)).toEqual([
        {},
        { plan: 'pro', tags: ['a', 'b'], n: 1.5, deep: { on: true }, gone: null },
      ]);
    });

    it('get answers metadata in the bytes JSON.stringify writes, and the value list answers, whatever jsonb keeps of it', async () => {
      // The bytes JSON.stringify writes, in get as in list (issue 28): PostgreSQL's text of a jsonb
      // differs in spaces, in the order of keys that are array indexes, and in numbers' notation.
      const { token, client } = await newSite();
      const raw = String.raw`{"big":1e400,"one":1.0,"e21":1e21,"tiny":1e-7,"long":123456789012345678,"neg":-0.5,
        "zero":-0,"10":"ten","2":"two","a":{"":[],"b":{}},"say":"x, y: z \"q\" \\ \\\" \n\t\u0001\u001f\u2028 é 😀 \ud83d\ude00",
        "arr":[1,"two",[3,{"four":[null,true,false]}]],"ü":"key"}`;
      const body = `{"email":${JSON.stringify(h.uniqueEmail('raw'))},"password":${JSON.stringify(h.password())},"name":"Raw","metadata":${raw}}`;
      const created = await fetch(`${h.target.baseUrl}${API}/create`, {
        method: 'POST',
        headers: { Authorization: token, 'Content-Type': 'application/json' },
        body,
      });
      expect(created.status).toBe(201);
      const { id: plain } = await create(client, { plan: 'pro', tags: ['a', 'b'], n: 1.5, deep: { on: true } });
      // As a writer other than the API may leave it: numbers jsonb keeps as written.
      const { id: written } = await create(client);
      await h.target.sql(`update users set metadata = $1::jsonb where id = $2`, [
        `{"one": 1.0, "tenth": 0.10, "big": 1${'0'.repeat(400)}, "7": [1.50, -0.0], "k": "v"}`,
        written,
      ]);
      const listed = await fetch(`${h.target.baseUrl}${API}/list`, { headers: { Authorization: token } });
      const users = ((await listed.json()) as { result: { users: User[] } }).result.users;
      expect(users).toHaveLength(3);
      for (const user of users) {
        const got = await fetch(`${h.target.baseUrl}${API}/get?_userId=${user._userId}`, {
          headers: { Authorization: token },
        });
        const text = await got.text();
        expect(text).toBe(JSON.stringify(JSON.parse(text))); // compact, keys and numbers as JSON.stringify writes them
        expect(JSON.stringify((JSON.parse(text) as { result: User }).result.metadata)).toBe(
          JSON.stringify(user.metadata),
        );
      }
      const byId = new Map(users.map((u: User) => [u._userId, u.metadata]));
      expect(byId.get(plain!)).toEqual({ plan: 'pro', tags: ['a', 'b'], n: 1.5, deep: { on: true } });
      expect(byId.get(written!)).toEqual({ one: 1, tenth: 0.1, big: null, 7: [1.5, 0], k: 'v' });
      const other = [...byId.values()].find((m) => m !== byId.get(plain!) && m !== byId.get(written!)) as Json;
      expect(other).toMatchObject({ big: null, one: 1, e21: 1e21, tiny: 1e-7, long: 123456789012345680, zero: 0 });
      expect(other.say).toBe('x, y: z "q" \\ \\" \n\t\u0001\u001f\u2028 é 😀 😀');
    });

    // RFC 7396, Appendix A: every example whose target and patch are objects (metadata is one).
    it.each([
      [{ a: 'b' }, { a: 'c' }, { a: 'c' }],
      [{ a: 'b' }, { b: 'c' }, { a: 'b', b: 'c' }],
      [{ a: 'b' }, { a: null }, {}],
      [{ a: 'b', b: 'c' }, { a: null }, { b: 'c' }],
      [{ a: ['b'] }, { a: 'c' }, { a: 'c' }],
      [{ a: 'c' }, { a: ['b'] }, { a: ['b'] }],
      [{ a: { b: 'c' } }, { a: { b: 'd', c: null } }, { a: { b: 'd' } }],
      [{ a: [{ b: 'c' }] }, { a: [1] }, { a: [1] }],
      [{ e: null }, { a: 1 }, { e: null, a: 1 }],
      [{}, { a: { bb: { ccc: null } } }, { a: { bb: {} } }],
      [{ a: 'foo' }, {}, { a: 'foo' }],
      [{ a: 'foo' }, { a: { b: null, c: [null] } }, { a: { c: [null] } }],
    ])('update merges %j with the patch %j into %j (RFC 7396)', async (target, patch, merged) => {
      const { client } = await newSite();
      const { id } = await create(client, target);
      const { response, error } = await update(client, id!, patch);
      expect(response.status, JSON.stringify(error)).toBe(200);
      expect(await metadataOf(client, id!)).toEqual(merged);
    });

    it('merges in the update itself: 20 concurrent updates of different keys all stay', async () => {
      const { client } = await newSite();
      const { id } = await create(client, { kept: true });
      const answers = await Promise.all(
        Array.from({ length: 20 }, (_, i) => update(client, id!, { [`k${i}`]: i, nested: { [`n${i}`]: i } })),
      );
      expect(answers.map((a) => a.response.status)).toEqual(Array(20).fill(200));
      const metadata = (await metadataOf(client, id!)) as Json;
      expect(Object.keys(metadata).length).toBe(22);
      expect(Object.keys(metadata.nested as Json).length).toBe(20);
    });

    it('honours If-Match: a stale ETag is 412 and changes nothing', async () => {
      const { client } = await newSite();
      const { id } = await create(client, { v: 1 });
      const read = await client.GET('/api/1/user/get', { params: { query: { _userId: id! } } });
      const etag = read.response.headers.get('etag')!;
      expect((await update(client, id!, { v: 2 }, etag)).response.status).toBe(200);
      const stale = await update(client, id!, { v: 3 }, etag);
      expect(stale.response.status).toBe(412);
      expect(await metadataOf(client, id!)).toEqual({ v: 2 });
    });

    describe('bounds', () => {
      const nested = (levels: number): Json => (levels === 1 ? { leaf: 1 } : { d: nested(levels - 1) });

      it('takes 16 levels and refuses 17 with a 400 at /metadata, creating nothing', async () => {
        const { client } = await newSite();
        expect((await create(client, nested(16))).status).toBe(201);
        const deep = await create(client, nested(17));
        expect(deep.status).toBe(400);
        expect(deep.error).toMatchObject({
          code: 'invalid_request',
          errors: [{ pointer: '/metadata', code: 'not_allowed' }],
        });
        const counted = await client.GET('/api/1/user/count', { params: { query: {} } });
        expect(counted.data!.result.count).toBe(1);
      });

      it('refuses U+0000 in a value or a key, pointing at it', async () => {
        const { client } = await newSite();
        const value = await create(client, { a: { b: 'x\u0000y' } });
        expect(value.status).toBe(400);
        expect(value.error?.errors).toEqual([
          expect.objectContaining({ pointer: '/metadata/a/b', code: 'invalid_format' }),
        ]);
        const key = await create(client, { 'k\u0000': 1 });
        expect(key.status).toBe(400);
        expect(key.error?.errors?.[0]?.pointer).toBe('/metadata');
      });

      it('refuses metadata that is not an object, and a patch that is not one', async () => {
        const { client } = await newSite();
        const array = await create(client, ['a'] as unknown as Json);
        expect(array.status).toBe(400);
        expect(array.error?.errors?.[0]).toMatchObject({ pointer: '/metadata', code: 'invalid_type' });
        const { id } = await create(client, { a: 1 });
        for (const patch of [null, ['x'], 'text', 3]) {
          const { response, error } = await update(client, id!, patch);
          expect(response.status, JSON.stringify(patch)).toBe(400);
          expect(error?.errors?.[0]?.pointer).toBe('/metadata');
        }
        expect(await metadataOf(client, id!)).toEqual({ a: 1 });
      });

      it('refuses an update whose merged metadata would pass 64 KiB, and leaves it as it was', async () => {
        const { client } = await newSite();
        const half = 'x'.repeat(40 * 1024);
        const { id } = await create(client, { first: half });
        const { response, error } = await update(client, id!, { second: half });
        expect(response.status).toBe(400);
        expect(error).toMatchObject({ code: 'invalid_request', errors: [{ pointer: '/metadata', code: 'too_long' }] });
        expect(await metadataOf(client, id!)).toEqual({ first: half });
        // Exactly at the bound is within it.
        const fill = 64 * 1024 - JSON.stringify({ first: half, second: '' }).length;
        expect((await update(client, id!, { second: 'y'.repeat(fill) })).response.status).toBe(200);
      });

      // The spec's Metadata: in one create or update body, metadata near the bound meets the
      // body's own 64 KiB first.
      it('refuses a create whose metadata passes 64 KiB as 413 payload_too_large, creating nothing', async () => {
        const { site, client } = await newSite();
        const { status, error } = await create(client, { big: 'x'.repeat(64 * 1024) });
        expect(status).toBe(413);
        expect(error?.code).toBe('payload_too_large');
        const { data } = await client.GET('/api/1/user/count', { params: { query: {} } });
        expect(data!.result.count, site).toBe(0);
      });

      it('refuses an import row whose metadata passes 64 KiB, at its index, and imports the others', async () => {
        const { client } = await newSite();
        const row = (metadata: Json) => ({
          email: h.uniqueEmail('imp'),
          name: 'Imp',
          password: h.password(),
          metadata,
        });
        const { data } = await client.POST('/api/1/user/import', {
          body: { users: [row({ big: 'x'.repeat(64 * 1024) }), row({ small: true })] },
        });
        expect(data!.result).toMatchObject({ created: 1, failed: 1 });
        expect(data!.result.items[0]).toMatchObject({
          index: 0,
          error: { code: 'invalid_request', errors: [{ pointer: '/users/0/metadata', code: 'too_long' }] },
        });
        const created = data!.result.items[1] as { _userId: string };
        expect(await metadataOf(client, created._userId)).toEqual({ small: true });
      });
    });

    describe("the site's metadata schema", () => {
      const schema = {
        type: 'object',
        required: ['plan'],
        properties: { plan: { enum: ['free', 'pro'] }, seats: { type: 'integer', minimum: 1 } },
      };
      const withSchema = async () => {
        const site = await newSite();
        const { id: before } = await create(site.client, { legacy: true });
        await h.target.sql('insert into metadata_schemas (site, schema) values ($1, $2::jsonb)', [
          site.site,
          JSON.stringify(schema),
        ]);
        return { ...site, before: before! };
      };

      it('refuses a create whose metadata it refuses (none at all included), pointing into /metadata', async () => {
        const { client } = await withSchema();
        const none = await create(client);
        expect(none.status).toBe(400);
        expect(none.error).toMatchObject({
          code: 'invalid_metadata',
          errors: [{ pointer: '/metadata/plan', code: 'required' }],
        });
        const bad = await create(client, { plan: 'gold', seats: 0 });
        expect(bad.status).toBe(400);
        // The first fault only (issue 41: allErrors is off, so a site's schema keeps Ajv's early exits).
        expect(bad.error?.errors?.map((e) => e.pointer)).toEqual(['/metadata/plan']);
        expect((await create(client, { plan: 'pro', seats: 3 })).status).toBe(201);
        const counted = await client.GET('/api/1/user/count', { params: { query: {} } });
        expect(counted.data!.result.count).toBe(2); // the one made before the schema, and the good one
      });

      it('holds an update to it after the merge, and leaves older accounts alone until their metadata is written', async () => {
        const { client, before } = await withSchema();
        // An account older than the schema: readable, and writable without metadata.
        expect(await metadataOf(client, before)).toEqual({ legacy: true });
        const rename = await client.POST('/api/1/user/update', { body: { _userId: before, name: 'Renamed' } });
        expect(rename.response.status).toBe(200);
        // A write of its metadata must leave it valid.
        const half = await update(client, before, { seats: 2 });
        expect(half.response.status).toBe(400);
        expect(half.error).toMatchObject({ code: 'invalid_metadata', errors: [{ pointer: '/metadata/plan' }] });
        expect(await metadataOf(client, before)).toEqual({ legacy: true });
        expect((await update(client, before, { plan: 'free' })).response.status).toBe(200);
        // A patch that removes a required key is refused.
        const removing = await update(client, before, { plan: null });
        expect(removing.error?.code).toBe('invalid_metadata');
        expect(await metadataOf(client, before)).toEqual({ legacy: true, plan: 'free' });
      });

      it("refuses an import row at its index, and is no other site's rule", async () => {
        const { client } = await withSchema();
        const row = (metadata?: Json) => ({
          email: h.uniqueEmail('imp'),
          name: 'Imp',
          password: h.password(),
          ...(metadata !== undefined && { metadata }),
        });
        const { data } = await client.POST('/api/1/user/import', {
          body: { users: [row({ plan: 'gold' }), row({ plan: 'free' }), row()] },
        });
        expect(data!.result).toMatchObject({ created: 1, failed: 2 });
        expect(data!.result.items[0]).toMatchObject({
          error: { code: 'invalid_metadata', errors: [{ pointer: '/users/0/metadata/plan' }] },
        });
        expect(data!.result.items[2]).toMatchObject({
          error: { code: 'invalid_metadata', errors: [{ pointer: '/users/2/metadata/plan', code: 'required' }] },
        });
        const other = await newSite();
        expect((await create(other.client, { plan: 'gold' })).status).toBe(201);
      });
    });

    describe('the metadata filter of list and count', () => {
      it('gives the accounts whose metadata contains it, page by page, with count agreeing, never another site’s', async () => {
        const { client } = await newSite();
        const shapes: Json[] = [
          { plan: 'pro', tags: ['beta', 'vip'], n: 1 },
          { plan: 'free' },
          { plan: 'pro', org: { id: 7, name: 'Acme' } },
          { plan: 'Pro' },
          { plan: 'pro', tags: ['vip'], n: 1.0 },
          {},
          { plan: 'pro', org: { id: 8 } },
        ];
        const ids: string[] = [];
        for (const metadata of shapes) ids.push((await create(client, metadata)).id!);
        // The same metadata in another site is never seen.
        const other = await newSite();
        for (const metadata of shapes) await create(other.client, metadata);

        const cases: [Json, number[]][] = [
          [{ plan: 'pro' }, [0, 2, 4, 6]],
          [{ tags: ['vip'] }, [0, 4]],
          [{ tags: ['beta'], plan: 'pro' }, [0]],
          [{ org: { id: 7 } }, [2]],
          [{ n: 1 }, [0, 4]],
          [{ plan: 'enterprise' }, []],
          [{}, [0, 1, 2, 3, 4, 5, 6]],
        ];
        for (const [filter, expected] of cases) {
          const metadata = JSON.stringify(filter);
          const seen: string[] = [];
          let after: string | undefined;
          for (let page = 0; page < 10; page++) {
            const { data, response } = await client.GET('/api/1/user/list', {
              params: { query: { metadata, limit: 2, ...(after !== undefined && { after }) } },
            });
            expect(response.status, metadata).toBe(200);
            seen.push(...data!.result.users.map((u: User) => u._userId));
            if (data!.result.next === null) break;
            after = data!.result.next;
          }
          expect(seen, metadata).toEqual(expected.map((i) => ids[i]));
          const counted = await client.GET('/api/1/user/count', { params: { query: { metadata } } });
          expect(counted.data!.result.count, metadata).toBe(expected.length);
        }
        // Combined with another filter, newest first.
        const desc = await client.GET('/api/1/user/list', {
          params: { query: { metadata: '{"plan":"pro"}', order: 'desc', createdAfter: '2000-01-01T00:00:00Z' } },
        });
        expect(desc.data!.result.users.map((u: User) => u._userId)).toEqual([ids[6], ids[4], ids[2], ids[0]]);
      });

      it('pages a filter few accounts match beyond the first walk, in both orders, ties on the creation time split by id', async () => {
        // 4,000 accounts, so that the server's first walk (1,000 rows) does not fill a page and it
        // reads the matches through the index instead (fewMatchesPage); 8 matches in 4 pairs
        // created in the same second, so that a page can end between the two of a pair.
        const { site, client } = await newSite();
        const chosen = [500, 501, 1700, 1701, 2900, 2901, 3990, 3991];
        await h.target.sql(
          `insert into users (site, email, name, origin, created_at, metadata)
           select $1, 'few' || i || '@example.com', 'Few ' || i, 'api',
             timestamptz '2026-01-01T00:00:00Z' + (i / 2) * interval '1 second',
             case when i = any($2::int[]) then '{"few": true}'::jsonb else '{}'::jsonb end
           from generate_series(1, 4000) as i`,
          [site, `{${chosen.join(',')}}`],
        );
        const inOrder = (
          await h.target.sql(
            `select id::text from users where site = $1 and metadata @> '{"few": true}' order by created_at, id`,
            [site],
          )
        ).map((r) => r.id as string);
        expect(inOrder).toHaveLength(chosen.length);
        for (const order of ['asc', 'desc'] as const) {
          const seen: string[] = [];
          let after: string | undefined;
          for (let page = 0; page < 10; page++) {
            const { data, response } = await client.GET('/api/1/user/list', {
              params: { query: { metadata: '{"few":true}', order, limit: 3, ...(after !== undefined && { after }) } },
            });
            expect(response.status, order).toBe(200);
            seen.push(...data!.result.users.map((u: User) => u._userId));
            if (data!.result.next === null) break;
            after = data!.result.next;
          }
          expect(seen, order).toEqual(order === 'asc' ? inOrder : [...inOrder].reverse());
        }
        const counted = await client.GET('/api/1/user/count', { params: { query: { metadata: '{"few":true}' } } });
        expect(counted.data!.result.count).toBe(chosen.length);
      });

      it('refuses a cursor given for another metadata filter', async () => {
        const { client } = await newSite();
        for (let i = 0; i < 3; i++) await create(client, { plan: 'pro' });
        const first = await client.GET('/api/1/user/list', {
          params: { query: { metadata: '{"plan":"pro"}', limit: 1 } },
        });
        const other = await client.GET('/api/1/user/list', {
          params: { query: { metadata: '{"plan":"free"}', limit: 1, after: first.data!.result.next! } },
        });
        expect(other.response.status).toBe(400);
        expect(other.error?.code).toBe('invalid_cursor');
      });

      it.each([
        ['not JSON', '{plan:pro}', 'invalid_format'],
        ['an array', '["pro"]', 'invalid_type'],
        ['a string', '"pro"', 'invalid_type'],
      ])('answers 400 at /metadata to a filter that is %s', async (_, metadata, code) => {
        for (const op of ['list', 'count']) {
          const response = await h.raw(`${API}/${op}?metadata=${encodeURIComponent(metadata)}`);
          expect(response.status, op).toBe(400);
          expect(await response.json()).toMatchObject({
            code: 'invalid_request',
            errors: [{ pointer: '/metadata', code }],
          });
        }
      });
    });

    it('is on every export line, {} when none, and an import of the export brings it back', async () => {
      const { token, client } = await newSite(['read', 'write', 'export']);
      await create(client, { plan: 'pro', org: { id: 7 } });
      await create(client);
      const response = await fetch(`${h.target.baseUrl}/api/1/user/export`, { headers: { Authorization: token } });
      const rows = (await response.text())
        .split('\n')
        .filter((line) => line !== '')
        .map((line) => JSON.parse(line) as Json);
      expect(rows.map((r) => r.metadata)).toEqual([{ org: { id: 7 }, plan: 'pro' }, {}]);
      const elsewhere = await newSite();
      const imported = await elsewhere.client.POST('/api/1/user/import', { body: { users: rows as never } });
      expect(imported.data!.result).toMatchObject({ created: 2, failed: 0 });
      const listed = await elsewhere.client.GET('/api/1/user/list', { params: { query: {} } });
      // One import, one creation time: rows of the same millisecond list in no set order.
      const brought = listed.data!.result.users.map((u: User) => u.metadata);
      expect(brought).toHaveLength(2);
      expect(brought).toEqual(expect.arrayContaining([{ org: { id: 7 }, plan: 'pro' }, {}]));
    });
  });
}
