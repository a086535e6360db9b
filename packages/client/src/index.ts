import createFetchClient, { type Client, type Middleware } from 'openapi-fetch';
import type { components, paths } from './generated/schema.js';

export type { components, paths } from './generated/schema.js';

/** An RFC 9457 problem, as every error of the API is. Switch on `code`. */
export type Problem = components['schemas']['Problem'];
export type ErrorCode = components['schemas']['ErrorCode'];
export type User = components['schemas']['User'];
export type CreateUserRequest = components['schemas']['CreateUserRequest'];
export type UpdateUserRequest = components['schemas']['UpdateUserRequest'];

export interface ClientOptions {
  /** Where the API lives, e.g. `http://127.0.0.1:3000`; the paths add `/api/1/user/…`. */
  baseUrl: string;
  /** The API token, sent as `Authorization: Bearer <token>`. */
  token: string;
  /** A `fetch` of your own (tests, instrumentation). Defaults to the global one. */
  fetch?: (request: Request) => Promise<Response>;
  /** Headers sent with every request (e.g. `X-Request-Id`). */
  headers?: Record<string, string>;
}

// Any media type: successes are application/json, errors application/problem+json.
export type UserAccountsClient = Client<paths>;

/**
 * A typed client of the user-accounts API. Every call resolves to `{ data, error, response }`:
 * `data` on success, `error` (a {@link Problem}) otherwise. It never throws for an HTTP error.
 */
export function createClient(options: ClientOptions): UserAccountsClient {
  const client = createFetchClient<paths>({
    baseUrl: options.baseUrl,
    headers: options.headers,
    ...(options.fetch ? { fetch: options.fetch } : {}),
  });
  const authorization: Middleware = {
    onRequest({ request }) {
      request.headers.set('Authorization', `Bearer ${options.token}`);
      return request;
    },
  };
  client.use(authorization);
  return client;
}
