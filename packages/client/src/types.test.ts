// Type-level tests: they run as ordinary tests, but what they check is what `tsc` (the
// typecheck task) accepts. A change to the spec that loosens these types fails the typecheck,
// and so does a `@ts-expect-error` that no longer finds its error: each one below is a mistake
// the client must refuse at compile time. The calls run too, against a fetch that answers 599.
import { describe, expectTypeOf, it } from 'vitest';
import {
  createClient,
  type ErrorCode,
  type ErrorCodeOf,
  type GetUserQuery,
  type operations,
  type Problem,
  type ProblemOf,
  type UpdateUserRequest,
  type User,
  type UserData,
} from './index.ts';

const client = createClient({
  baseUrl: 'http://127.0.0.1:0',
  token: 'ua_x',
  fetch: async () => new Response(null, { status: 599 }),
});
const id = '0193a1e4-5b7c-7d2e-9f10-3c4d5e6f7a8b';
const email = 'a@example.com';
const password = 'correct horse battery';

describe('client types', () => {
  it('types a 409 from create as a Problem whose code the caller can switch on', async () => {
    const { data, error, response } = await client.POST('/api/1/user/create', {
      body: { email: 'a@example.com', password: 'correct horse battery', name: 'Ada' },
    });
    if (response.status === 409 && error !== undefined) {
      // Still a Problem wherever one is expected (code written before the narrowing compiles).
      expectTypeOf(error).toMatchTypeOf<Problem>();
      expectTypeOf<'email_taken'>().toMatchTypeOf<typeof error.code>();
      // A write that still collided with concurrent writes after the server's retries.
      expectTypeOf<'conflict'>().toMatchTypeOf<typeof error.code>();
    }
    if (data !== undefined) expectTypeOf(data.result._userId).toBeString();
  });

  it('narrows error.code to the codes the operation can answer, not all of ErrorCode', async () => {
    const { error } = await client.POST('/api/1/user/verify', { body: { email, password } });
    expectTypeOf(error).toMatchTypeOf<ProblemOf<'verifyUser'> | undefined>();
    expectTypeOf<NonNullable<typeof error>['code']>().toEqualTypeOf<ErrorCodeOf<'verifyUser'>>();
    expectTypeOf<ErrorCodeOf<'verifyUser'>>().toEqualTypeOf<
      | 'invalid_request'
      | 'invalid_json'
      | 'unauthorized'
      | 'forbidden'
      | 'account_disabled'
      | 'second_factor_required'
      | 'password_reset_required'
      | 'sso_required'
      | 'payload_too_large'
      | 'unsupported_media_type'
      | 'invalid_credentials'
      | 'too_many_attempts'
      | 'conflict'
      | 'rate_limited'
      | 'headers_too_large'
      | 'internal_error'
      | 'service_unavailable'
    >();
    // A read that writes nothing has no 409 `conflict`.
    expectTypeOf<ErrorCodeOf<'listUsers'>>().toEqualTypeOf<
      | 'invalid_request'
      | 'invalid_cursor'
      | 'unauthorized'
      | 'forbidden'
      | 'rate_limited'
      | 'headers_too_large'
      | 'internal_error'
      | 'service_unavailable'
    >();
    if (error?.code === 'account_disabled') expectTypeOf(error.status).toBeNumber();
    // @ts-expect-error: verify never answers email_taken, so comparing with it is a mistake
    if (error?.code === 'email_taken') return;
  });

  it('narrows a problem to its own members by its code (second_factor_required: ticket and factors)', async () => {
    const { error } = await client.POST('/api/1/user/verify', { body: { email, password } });
    if (error?.code === 'second_factor_required') {
      expectTypeOf(error.ticket).toEqualTypeOf<string>();
      expectTypeOf(error.factors).toEqualTypeOf<('totp' | 'passkey')[]>();
      expectTypeOf(error.status).toBeNumber();
    } else if (error !== undefined) {
      expectTypeOf(error.code).toEqualTypeOf<Exclude<ErrorCodeOf<'verifyUser'>, 'second_factor_required'>>();
      // @ts-expect-error: another code has no ticket
      void error.ticket;
    }
    // The same on a Problem held anywhere (a ProblemError's, a log's).
    const problem = {} as Problem;
    if (problem.code === 'second_factor_required') expectTypeOf(problem.ticket).toEqualTypeOf<string>();
    else {
      // @ts-expect-error: nor factors
      void problem.factors;
    }
    // An operation that never answers second_factor_required has no problem with a ticket at all.
    expectTypeOf<Extract<ProblemOf<'listUsers'>, { ticket: string }>>().toEqualTypeOf<never>();
  });

  it('narrows every operation: none answers the whole ErrorCode union', () => {
    // An operation whose problem response names no codes (a plain Problem schema) falls back to
    // all of ErrorCode, and is listed here; the list must stay empty.
    type Unnarrowed = { [Op in keyof operations]: ErrorCode extends ErrorCodeOf<Op> ? Op : never }[keyof operations];
    expectTypeOf<Unnarrowed>().toEqualTypeOf<never>();
  });

  it('types a get as the User, and refuses a create without a password', async () => {
    const { data } = await client.GET('/api/1/user/get', { params: { query: { email: 'a@example.com' } } });
    if (data) expectTypeOf(data.result).toEqualTypeOf<User>();
    // @ts-expect-error: create needs a password
    await client.POST('/api/1/user/create', { body: { email: 'a@example.com', name: 'Ada' } });
  });

  it('accepts every well-formed request, whether its body is written in place or held in a variable', async () => {
    await client.POST('/api/1/user/create', { body: { email, password, name: 'Ada', phone: '+44 20 7946 0018' } });
    const create = { email, password, name: 'Ada', address: '12 St James’s Square' };
    await client.POST('/api/1/user/create', { body: create });
    await client.POST('/api/1/user/create', { body: { ...create, phone: '+44 20 7946 0018' } });
    await client.POST('/api/1/user/update', {
      body: { _userId: id, phone: null },
      params: { header: { 'If-Match': '"3"' } },
    });
    const update: UpdateUserRequest = { _userId: id, name: 'Ada King' };
    await client.POST('/api/1/user/update', { body: update });
    await client.GET('/api/1/user/get', { params: { query: { _userId: id } } });
    const query: GetUserQuery = Math.random() < 0.5 ? { _userId: id } : { email };
    await client.GET('/api/1/user/get', { params: { query } });
    await client.POST('/api/1/user/verify', { body: { email, password } });
    await client.POST('/api/1/user/import', {
      body: {
        users: [
          { email, name: 'Ada', password },
          { email, name: 'Grace', passwordHash: '$argon2id$x' },
        ],
      },
    });
    await client.DELETE('/api/1/user/delete', { body: { _userId: id } });
    await client.request('post', '/api/1/user/create', { body: create });
  });

  it('refuses a misspelt or unknown field in a body', async () => {
    // @ts-expect-error: `emial` is not a field (and `email` is then missing)
    await client.POST('/api/1/user/create', { body: { emial: email, password, name: 'Ada' } });
    // @ts-expect-error: `phnoe` is not a field, though every required one is there
    await client.POST('/api/1/user/create', { body: { email, password, name: 'Ada', phnoe: '+44 20 7946 0018' } });
    // @ts-expect-error: `phnoe` added to a spread of a good body
    await client.POST('/api/1/user/create', { body: { ...{ email, password, name: 'Ada' }, phnoe: '1' } });
    const body = { email, password, name: 'Ada', phnoe: '+44 20 7946 0018' };
    // @ts-expect-error: the same mistake held in a variable (no excess-property check applies there)
    await client.POST('/api/1/user/create', { body });
    const init = { body };
    // @ts-expect-error: and in a variable holding the whole init
    await client.POST('/api/1/user/create', init);
    // @ts-expect-error: through `request` too
    await client.request('post', '/api/1/user/create', { body });
    // @ts-expect-error: an unknown field in a row of an import
    await client.POST('/api/1/user/import', { body: { users: [{ email, name: 'Ada', password, nmae: 'x' }] } });
    const header = { 'If-Macth': '"3"' };
    // @ts-expect-error: `If-Macth` is not a header of update
    await client.POST('/api/1/user/update', { body: { _userId: id, name: 'B' }, params: { header } });
  });

  it('takes email in an update (it changes the address, 33b8007), and refuses what update cannot set', async () => {
    await client.POST('/api/1/user/update', { body: { _userId: id, email, emailVerified: true } });
    // @ts-expect-error: disabled is set by disable and enable, not by update
    await client.POST('/api/1/user/update', { body: { _userId: id, name: 'Ada King', disabled: true } });
    const body = { _userId: id, name: 'Ada King', createdAt: '2026-01-01T00:00:00.000Z' };
    // @ts-expect-error: nor when the body is a variable, e.g. a User edited in place
    await client.POST('/api/1/user/update', { body });
  });

  it('asks get for exactly one of _userId and email', async () => {
    // @ts-expect-error: both
    await client.GET('/api/1/user/get', { params: { query: { _userId: id, email } } });
    // @ts-expect-error: neither
    await client.GET('/api/1/user/get', { params: { query: {} } });
    // @ts-expect-error: no query at all
    await client.GET('/api/1/user/get', {});
    // @ts-expect-error: no init at all
    await client.GET('/api/1/user/get');
    // @ts-expect-error: a misspelt parameter
    await client.GET('/api/1/user/get', { params: { query: { userId: id } } });
    // @ts-expect-error: an unknown parameter beside a good one
    await client.GET('/api/1/user/get', { params: { query: { _userId: id, emial: email } } });
    const both = { _userId: id, email };
    // @ts-expect-error: both, from a variable
    await client.GET('/api/1/user/get', { params: { query: both } });
  });

  it('asks verify for exactly one of _userId and email', async () => {
    // @ts-expect-error: both
    await client.POST('/api/1/user/verify', { body: { _userId: id, email, password } });
    // @ts-expect-error: neither
    await client.POST('/api/1/user/verify', { body: { password } });
  });

  it('types the data answer as UserData, its format a literal and no member for a secret', async () => {
    const { data } = await client.GET('/api/1/user/data', { params: { query: { _userId: id } } });
    if (data !== undefined) {
      expectTypeOf(data.result).toEqualTypeOf<UserData>();
      expectTypeOf(data.result.format).toEqualTypeOf<'user-accounts/user-data@1'>();
      expectTypeOf(data.result.account).toEqualTypeOf<User>();
      // @ts-expect-error no password hash in the answer
      void data.result.account.passwordHash;
    }
  });
});
