// Type-level tests: they run as ordinary tests, but what they check is what `tsc` (the
// typecheck task) accepts. A change to the spec that loosens these types fails the typecheck.
import { describe, expectTypeOf, it } from 'vitest';
import { createClient, type Problem, type User } from './index.ts';

const client = createClient({
  baseUrl: 'http://127.0.0.1:0',
  token: 'ua_x',
  fetch: async () => new Response(null, { status: 599 }),
});

describe('client types', () => {
  it('types a 409 from create as a Problem whose code the caller can switch on', async () => {
    const { data, error, response } = await client.POST('/api/1/user/create', {
      body: { email: 'a@example.com', password: 'correct horse battery', name: 'Ada' },
    });
    if (response.status === 409 && error !== undefined) {
      expectTypeOf(error).toEqualTypeOf<Problem>();
      expectTypeOf(error.code).toEqualTypeOf<Problem['code']>();
      expectTypeOf<'email_taken'>().toMatchTypeOf<typeof error.code>();
    }
    if (data !== undefined) expectTypeOf(data.result._userId).toBeString();
  });

  it('types a get as the User, and refuses a create without a password', async () => {
    const { data } = await client.GET('/api/1/user/get', { params: { query: { email: 'a@example.com' } } });
    if (data) expectTypeOf(data.result).toEqualTypeOf<User>();
    // @ts-expect-error: create needs a password
    await client.POST('/api/1/user/create', { body: { email: 'a@example.com', name: 'Ada' } });
  });
});
