// When no answer comes, the client throws one documented class, TransportError, whatever broke:
// a refused connection, a socket closed before the answer, an answer cut short in its body.
// Every answer the server does give resolves as { data, error, response }, as before.
import { createServer, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createClient, TransportError } from './index.ts';

const servers: Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((server) => new Promise((resolve) => server.close(resolve))));
});

async function serve(answer: (response: ServerResponse) => void): Promise<string> {
  const server = createServer((_request, response) => answer(response));
  servers.push(server);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
}

/** A port nothing listens on: one that was just listened on and closed. */
async function closedPort(): Promise<string> {
  const server = createServer();
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return `http://127.0.0.1:${port}`;
}

const user = {
  _userId: '0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b',
  email: 'a@example.com',
  name: 'Ada',
  phone: null,
  address: null,
  disabled: false,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
};

async function rejection(call: Promise<unknown>): Promise<unknown> {
  return call.then(
    () => expect.fail('the call resolved'),
    (error: unknown) => error,
  );
}

describe('transport errors', () => {
  it('a refused connection throws a TransportError naming the call and ECONNREFUSED, fetch’s error as its cause', async () => {
    const baseUrl = await closedPort();
    const api = createClient({ baseUrl, token: 'ua_x' });
    const error = await rejection(api.GET('/api/1/user/get', { params: { query: { email: 'a@example.com' } } }));
    expect(error).toBeInstanceOf(TransportError);
    const transport = error as TransportError;
    expect(transport.name).toBe('TransportError');
    expect(transport.method).toBe('GET');
    expect(transport.url).toBe(`${baseUrl}/api/1/user/get?email=a%40example.com`);
    expect(transport.message).toBe(
      `GET ${baseUrl}/api/1/user/get?email=a%40example.com: no answer from the server (fetch failed: ECONNREFUSED)`,
    );
    expect(transport.cause).toBeInstanceOf(TypeError);
    // Code written when the client let fetch's TypeError through still catches it.
    expect(transport).toBeInstanceOf(TypeError);
  });

  it('a socket closed before the answer throws a TransportError, for a write too', async () => {
    const baseUrl = await serve((response) => response.socket?.destroy());
    const api = createClient({ baseUrl, token: 'ua_x' });
    const error = await rejection(
      api.POST('/api/1/user/create', { body: { email: 'a@example.com', password: 'correct horse', name: 'Ada' } }),
    );
    expect(error).toBeInstanceOf(TransportError);
    expect((error as TransportError).message).toMatch(
      /^POST http:\/\/127\.0\.0\.1:\d+\/api\/1\/user\/create: no answer/,
    );
  });

  it('an answer cut short in its body throws a TransportError, not a TypeError', async () => {
    const baseUrl = await serve((response) => {
      response.writeHead(200, { 'content-type': 'application/json' });
      response.write('{"result":{"_userId":"0193');
      setImmediate(() => response.socket?.destroy());
    });
    const api = createClient({ baseUrl, token: 'ua_x' });
    const error = await rejection(api.GET('/api/1/user/get', { params: { query: { email: 'a@example.com' } } }));
    expect(error).toBeInstanceOf(TransportError);
    expect((error as TransportError).message).toContain('no answer from the server (terminated');
  });

  it('listAll throws it too', async () => {
    const api = createClient({ baseUrl: await closedPort(), token: 'ua_x' });
    const error = await rejection(
      (async () => {
        for await (const _ of api.listAll()) void _;
      })(),
    );
    expect(error).toBeInstanceOf(TransportError);
  });

  it('an abort of your own rejects with the signal’s reason, not a TransportError', async () => {
    const baseUrl = await serve(() => {}); // never answers
    const api = createClient({ baseUrl, token: 'ua_x' });
    const controller = new AbortController();
    const call = api.GET('/api/1/user/get', {
      params: { query: { email: 'a@example.com' } },
      signal: controller.signal,
    });
    controller.abort(new Error('stop'));
    expect(await rejection(call)).toEqual(new Error('stop'));
  });

  it('answers still resolve as before: data and error, with the response’s status, headers and url', async () => {
    let status = 200;
    const baseUrl = await serve((response) => {
      if (status === 200)
        response
          .writeHead(200, { 'content-type': 'application/json', etag: '"1"' })
          .end(JSON.stringify({ result: user }));
      else
        response.writeHead(404, { 'content-type': 'application/problem+json' }).end(
          JSON.stringify({
            type: 'x',
            title: 'User not found',
            status: 404,
            detail: 'No.',
            code: 'user_not_found',
            requestId: 'r',
          }),
        );
    });
    const api = createClient({ baseUrl, token: 'ua_x' });
    const found = await api.GET('/api/1/user/get', { params: { query: { _userId: user._userId } } });
    expect(found.data?.result).toEqual(user);
    expect(found.response.headers.get('etag')).toBe('"1"');
    expect(found.response.url).toBe(`${baseUrl}/api/1/user/get?_userId=${user._userId}`);
    status = 404;
    const missing = await api.GET('/api/1/user/get', { params: { query: { _userId: user._userId } } });
    expect(missing.response.status).toBe(404);
    expect(missing.error?.code).toBe('user_not_found');
  });
});
