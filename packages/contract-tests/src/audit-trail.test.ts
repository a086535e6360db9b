// GET /api/1/audit: an account's audit trail as its site's support reads it (the console's
// account screen), every answer checked against the spec.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { checkedClient, GHOST, withoutRequestId } from './harness.ts';
import { embeddedServer, type Target } from './targets.ts';

describe('GET /api/1/audit', () => {
  let target: Target;
  let writer: { id: string; token: string };
  let api: ReturnType<typeof checkedClient>;
  beforeAll(async () => {
    target = await embeddedServer();
    writer = await target.createToken({ site: 'default', scopes: ['read', 'write'], label: 'support' });
    api = checkedClient(target.baseUrl, writer.token);
  }, 60_000);
  afterAll(async () => {
    await target?.close();
  });

  async function account(tag: string) {
    const { data } = await api.POST('/api/1/user/create', {
      body: {
        email: `${tag}.${Date.now()}@example.org`,
        name: 'Ada Lovelace',
        password: 'a long and unusual passphrase',
      },
    });
    return data!.result._userId;
  }
  const trail = (
    as: ReturnType<typeof checkedClient>,
    _userId: string,
    page: { limit?: number; before?: string } = {},
  ) => as.GET('/api/1/audit', { params: { query: { _userId, ...page } } });

  it("lists the account's write requests, refused ones too, newest first, with who sent each and how it ended", async () => {
    const id = await account('trail');
    await api.POST('/api/1/user/disable', { body: { _userId: id } });
    await api.POST('/api/1/user/update', { body: { _userId: id, phone: 'not a phone' } });
    await api.POST('/api/1/user/enable', { body: { _userId: id } });
    const { data, response } = await trail(api, id);
    expect(response.status).toBe(200);
    expect(data!.result.next).toBeNull();
    expect(data!.result.entries.map((e) => [e.operation, e.status, e.outcome])).toEqual([
      ['enable', 200, 'user enabled'],
      ['update', 400, 'invalid_request'],
      ['disable', 200, 'user disabled'],
      ['create', 201, 'user created'],
    ]);
    for (const entry of data!.result.entries) {
      expect(entry.tokenId).toBe(writer.id);
      expect(Date.parse(entry.at)).toBeGreaterThan(Date.now() - 60_000);
    }
    // Another account's rows are not in it.
    expect((await trail(api, await account('other'))).data!.result.entries).toHaveLength(1);
  });

  it('pages with next as before, each row once', async () => {
    const id = await account('pages');
    for (let i = 0; i < 4; i++)
      await api.POST(i % 2 ? '/api/1/user/enable' : '/api/1/user/disable', { body: { _userId: id } });
    const first = (await trail(api, id, { limit: 2 })).data!.result;
    expect(first.entries.map((e) => e.operation)).toEqual(['enable', 'disable']);
    const second = (await trail(api, id, { limit: 2, before: first.next! })).data!.result;
    expect(second.entries.map((e) => e.operation)).toEqual(['enable', 'disable']);
    const last = (await trail(api, id, { limit: 2, before: second.next! })).data!.result;
    expect(last).toEqual({ entries: [expect.objectContaining({ operation: 'create' })], next: null });
    const ids = [...first.entries, ...second.entries, ...last.entries].map((e) => e.requestId);
    expect(new Set(ids).size).toBe(5);
  });

  it("answers another site's account, and no account, as get does: 404 user_not_found, the same body", async () => {
    const id = await account('elsewhere');
    const other = checkedClient(
      target.baseUrl,
      (await target.createToken({ site: 'elsewhere', scopes: ['read'], label: 'x' })).token,
    );
    const theirs = await trail(other, id);
    const ghost = await trail(other, GHOST);
    expect(theirs.response.status).toBe(404);
    expect(theirs.error?.code).toBe('user_not_found');
    expect(withoutRequestId(theirs.error)).toEqual(withoutRequestId(ghost.error));
    const get = await other.GET('/api/1/user/get', { params: { query: { _userId: id } } });
    expect(withoutRequestId(theirs.error)).toEqual(withoutRequestId(get.error));
  });

  it('keeps a deleted account readable by the site that deleted it, and by no other', async () => {
    const id = await account('deleted');
    await api.DELETE('/api/1/user/delete', { body: { _userId: id } });
    expect((await api.GET('/api/1/user/get', { params: { query: { _userId: id } } })).response.status).toBe(404);
    const { data } = await trail(api, id);
    expect(data!.result.entries.map((e) => [e.operation, e.outcome])).toEqual([
      ['delete', 'user removed'],
      ['create', 'user created'],
    ]);
    const other = checkedClient(
      target.baseUrl,
      (await target.createToken({ site: 'elsewhere', scopes: ['read'], label: 'y' })).token,
    );
    expect((await trail(other, id)).response.status).toBe(404);
  });

  it('refuses a malformed cursor or limit with 400', async () => {
    const id = await account('bad');
    const raw = (query: string) =>
      fetch(`${target.baseUrl}/api/1/audit?_userId=${id}&${query}`, { headers: { Authorization: writer.token } });
    for (const query of ['before=abc', 'limit=0', 'limit=101', 'before=']) {
      const response = await raw(query);
      expect(response.status, query).toBe(400);
    }
  });
});
