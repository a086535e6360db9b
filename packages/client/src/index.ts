import { createRemoteJWKSet, errors, jwtVerify } from 'jose';
import createFetchClient, {
  type Client,
  type ClientPathsWithMethod,
  type FetchResponse,
  type MaybeOptionalInit,
  type Middleware,
} from 'openapi-fetch';
import type { components, operations, paths } from './generated/schema.js';

export type { components, operations, paths } from './generated/schema.js';

/** An RFC 9457 problem, as every error of the API is. Switch on `code`. */
export type Problem = components['schemas']['Problem'];
export type ErrorCode = components['schemas']['ErrorCode'];
export type User = components['schemas']['User'];
export type CreateUserRequest = components['schemas']['CreateUserRequest'];
export type UpdateUserRequest = components['schemas']['UpdateUserRequest'];
/** A change event (CloudEvents 1.0), as the feed and webhooks carry it. */
export type ChangeEvent = components['schemas']['Event'];
/** Everything held about one account (`GET /api/1/user/data`), format `user-accounts/user-data@1`. */
export type UserData = components['schemas']['UserData'];

type ProblemStatus = `4${string}` | `5${string}`;
/**
 * The problems an operation can answer, by its `operationId`: each of its 4xx and 5xx responses,
 * `code` narrowed to the codes the spec lists for that response. A call's `error` has this type.
 */
export type ProblemOf<Op extends keyof operations> = {
  [S in keyof operations[Op]['responses']]: `${S & (string | number)}` extends ProblemStatus
    ? operations[Op]['responses'][S] extends { content: { 'application/problem+json': infer P } }
      ? P
      : never
    : never;
}[keyof operations[Op]['responses']];
/** The codes an operation can answer (`ErrorCodeOf<'verifyUser'>`), a subset of {@link ErrorCode}. */
export type ErrorCodeOf<Op extends keyof operations> = CodeOf<ProblemOf<Op>>;
type CodeOf<P> = P extends { code: infer Code } ? Code : never;

// The spec's "exactly one of" (`oneOf` of `required`) comes out of openapi-typescript as plain
// optional fields, which accept both and neither. Each member of this union makes one key
// required and forbids the others.
type ExactlyOneOf<T, Keys extends keyof T> = {
  [K in Keys]: Simplify<Omit<T, Keys> & { [P in K]-?: Exclude<T[P], undefined> } & { [P in Exclude<Keys, K>]?: never }>;
}[Keys];
type Simplify<T> = { [K in keyof T]: T[K] } & {};

/** `get` looks an account up by `_userId` or by `email`: exactly one of them. */
export type GetUserQuery = ExactlyOneOf<NonNullable<operations['getUser']['parameters']['query']>, '_userId' | 'email'>;
/** `verify` takes the password and exactly one of `_userId` or `email`. */
export type VerifyUserRequest = ExactlyOneOf<components['schemas']['VerifyUserRequest'], '_userId' | 'email'>;

type Replace<T, K extends keyof T, V> = Omit<T, K> & { [P in K]: V };
type WithJsonBody<Op extends { requestBody: unknown }, Body> = Replace<
  Op,
  'requestBody',
  { content: { 'application/json': Body } }
>;

/** {@link paths} with the rules openapi-typescript cannot express put back in. */
// Import rows keep their generated type (either password field optional): the server answers a
// row with both or neither in that row's result, so a batch read from a file need not be
// narrowed row by row before it is sent.
export type StrictPaths = Omit<paths, '/api/1/user/get' | '/api/1/user/verify'> & {
  '/api/1/user/get': Replace<
    paths['/api/1/user/get'],
    'get',
    Replace<operations['getUser'], 'parameters', Replace<operations['getUser']['parameters'], 'query', GetUserQuery>>
  >;
  '/api/1/user/verify': Replace<
    paths['/api/1/user/verify'],
    'post',
    WithJsonBody<operations['verifyUser'], VerifyUserRequest>
  >;
};

// openapi-fetch infers the whole init as a type parameter, so TypeScript's excess-property check
// never runs on it: once the required fields are there, a misspelt optional one (or `email` on
// update) passes, literal or variable alike (openapi-ts/openapi-typescript#1769). The inferred
// type is all we need to find the extra keys ourselves: each is mapped to `never`, at any depth
// of `body` and `params`.
type KeysOfUnion<T> = T extends unknown ? keyof T : never;
type ValueOf<T, K extends PropertyKey> = T extends unknown ? (K extends keyof T ? T[K] : never) : never;
type NoExtraKeys<Actual, Expected> = Actual extends readonly (infer Item)[]
  ? Expected extends readonly (infer ExpectedItem)[]
    ? readonly NoExtraKeys<Item, ExpectedItem>[]
    : Actual
  : Actual extends object
    ? {
        [K in keyof Actual]: K extends KeysOfUnion<NonNullable<Expected>>
          ? NoExtraKeys<Actual[K], ValueOf<NonNullable<Expected>, K>>
          : never;
      }
    : Actual;
type CheckedInit<Init, Expected> = {
  [K in keyof Init]: K extends 'body' | 'params' ? NoExtraKeys<Init[K], ValueOf<Expected, K>> : Init[K];
};

type RequiredKeysOf<T> = { [K in keyof T]-?: Partial<Pick<T, K>> extends Pick<T, K> ? never : K }[keyof T];
// As openapi-fetch's own (optional when nothing in it is required; other keys pass through), plus
// the check, behind NoInfer so that Init is still inferred from the argument alone.
type InitParam<Init, Expected> =
  RequiredKeysOf<Init> extends never
    ? [(Init & NoInfer<CheckedInit<Init, Expected>> & { [key: string]: unknown })?]
    : [Init & NoInfer<CheckedInit<Init, Expected>> & { [key: string]: unknown }];

type HttpMethod = 'get' | 'put' | 'post' | 'delete' | 'options' | 'head' | 'patch' | 'trace';
type MediaType = `${string}/${string}`;
type PathsWith<M extends HttpMethod> = ClientPathsWithMethod<Client<StrictPaths>, M>;
// Extract only tells the compiler what PathsWith already ensures: an operation, not `undefined`.
type Operation<Path extends keyof StrictPaths, M extends HttpMethod> = Extract<
  StrictPaths[Path][M],
  Record<string, unknown>
>;

type Method<M extends HttpMethod> = <Path extends PathsWith<M>, Init extends MaybeOptionalInit<StrictPaths[Path], M>>(
  url: Path,
  ...init: InitParam<Init, MaybeOptionalInit<StrictPaths[Path], M>>
) => Promise<FetchResponse<Operation<Path, M>, Init, MediaType>>;

type RequestMethod = <
  M extends HttpMethod,
  Path extends PathsWith<M>,
  Init extends MaybeOptionalInit<StrictPaths[Path], M>,
>(
  method: M,
  url: Path,
  ...init: InitParam<Init, MaybeOptionalInit<StrictPaths[Path], M>>
) => Promise<FetchResponse<Operation<Path, M>, Init, MediaType>>;

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

/**
 * openapi-fetch's client, unchanged at run time; its calls are typed by {@link StrictPaths} and
 * refuse fields the spec does not have.
 */
export interface UserAccountsClient extends Pick<Client<StrictPaths>, 'use' | 'eject'> {
  request: RequestMethod;
  GET: Method<'get'>;
  PUT: Method<'put'>;
  POST: Method<'post'>;
  DELETE: Method<'delete'>;
  OPTIONS: Method<'options'>;
  HEAD: Method<'head'>;
  PATCH: Method<'patch'>;
  TRACE: Method<'trace'>;
  /**
   * Every account `list` gives for these filters, page after page (`limit` per request, 1,000 by
   * default), as one async iterable: `for await (const user of api.listAll({ email: '@example.org' }))`.
   * Stopping early (`break`) sends no further request. A refused request throws a
   * {@link ProblemError}; one without an answer, a {@link TransportError}.
   */
  listAll(query?: ListAllQuery): AsyncIterable<User>;
  /**
   * The site's change events from `after` on (without it, from the oldest kept), followed for as
   * long as you iterate: each request long-polls (`wait`, 30 s by default), so a new event
   * arrives as soon as it commits. `for await (const event of api.followEvents({ after: saved }))`;
   * keep `event.sequence` as your next `after`. Stopping (`break`, or `signal`) sends no further
   * request. A refused request (410 `events_expired`, …) throws a {@link ProblemError}; one
   * without an answer, a {@link TransportError} (catch it and follow again from your last
   * `sequence`).
   */
  followEvents(options?: FollowEventsOptions): AsyncIterable<ChangeEvent>;
}

export interface FollowEventsOptions {
  /** The `sequence` after which to start; the oldest event kept when omitted. */
  after?: string;
  /** Events per request, 1 to 1,000 (default 100). */
  limit?: number;
  /** Only this account's events (its `_userId`). */
  subject?: string;
  /** Seconds each request waits for a new event, 0 to 30 (default 30). */
  wait?: number;
  /** Ends the iteration, also while a request is waiting. */
  signal?: AbortSignal;
}

/** list's filters and order, and the page size listAll asks for. */
export type ListAllQuery = Omit<NonNullable<operations['listUsers']['parameters']['query']>, 'after'>;

/** A refused request of a helper that cannot answer `{ data, error }` (listAll): the problem, thrown. */
export class ProblemError extends Error {
  readonly problem: Problem;
  readonly status: number;
  constructor(problem: Problem, status: number) {
    super(`${status} ${problem.code}: ${problem.detail}`);
    this.name = 'ProblemError';
    this.problem = problem;
    this.status = status;
  }
}

/**
 * No answer from the server: the connection was refused, reset or closed before the whole answer
 * came, or the name did not resolve. The call's only exception: every answer the server gives,
 * 4xx and 5xx included, resolves as `{ data, error, response }`. `cause` is what `fetch` threw
 * (undici's `TypeError: fetch failed`, its own `cause` naming e.g. `ECONNREFUSED`). Whether the
 * server acted on a write that got no answer is unknown: retry it with the same `Idempotency-Key`.
 * A call aborted through your own `signal` rejects with the signal's reason, unwrapped. It extends
 * `TypeError`, what fetch throws and these calls threw before it, so `instanceof TypeError` checks
 * written then still hold.
 */
export class TransportError extends TypeError {
  readonly method: string;
  readonly url: string;
  constructor(method: string, url: string, cause: unknown) {
    super(`${method} ${url}: no answer from the server (${describeCause(cause)})`, { cause });
    this.name = 'TransportError';
    this.method = method;
    this.url = url;
  }
}

function describeCause(cause: unknown): string {
  if (!(cause instanceof Error)) return String(cause);
  const inner = cause.cause as { code?: unknown; message?: unknown } | undefined;
  const detail = inner?.code ?? inner?.message;
  return typeof detail === 'string' ? `${cause.message}: ${detail}` : cause.message;
}

// fetch rejects when no response came (onError); a body cut short fails later, while openapi-fetch
// reads it, so the body is passed through a stream that turns its failure into the same error.
// The stream keeps the body streamed (export's NDJSON, parseAs: 'stream'), nothing is buffered.
const NULL_BODY_STATUSES = new Set([101, 103, 204, 205, 304]);
const transportErrors: Middleware = {
  onError({ request, error }) {
    if (request.signal.aborted || error instanceof TransportError) return;
    return new TransportError(request.method, request.url, error);
  },
  onResponse({ request, response }) {
    const source = response.body;
    // A status that cannot carry a body cannot be given one by new Response() either.
    if (source === null || NULL_BODY_STATUSES.has(response.status)) return;
    const reader = source.getReader();
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        try {
          const { done, value } = await reader.read();
          if (done) controller.close();
          else controller.enqueue(value);
        } catch (error) {
          controller.error(request.signal.aborted ? error : new TransportError(request.method, request.url, error));
        }
      },
      cancel: (reason) => reader.cancel(reason),
    });
    const wrapped = new Response(body, {
      status: response.status,
      statusText: response.statusText,
      headers: response.headers,
    });
    // A new Response has no url or redirected of its own: the caller keeps seeing fetch's.
    Object.defineProperties(wrapped, {
      url: { value: response.url },
      redirected: { value: response.redirected },
    });
    return wrapped;
  },
};

/**
 * A typed client of the user-accounts API. Every call resolves to `{ data, error, response }`:
 * `data` on success, `error` (a problem of that operation, see {@link ProblemOf}) otherwise. It
 * never throws for an HTTP error; when no answer comes, it throws a {@link TransportError}.
 */
export function createClient(options: ClientOptions): UserAccountsClient {
  const client = createFetchClient<StrictPaths>({
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
  client.use(authorization, transportErrors);
  const typed = client as unknown as Omit<UserAccountsClient, 'listAll' | 'followEvents'>;
  async function* listAll(query: ListAllQuery = {}): AsyncIterable<User> {
    let after: string | undefined;
    do {
      const { data, error, response } = await typed.GET('/api/1/user/list', {
        params: { query: { limit: 1000, ...query, ...(after !== undefined && { after }) } },
      });
      if (data === undefined) throw new ProblemError(error as Problem, response.status);
      yield* data.result.users;
      after = data.result.next ?? undefined;
    } while (after !== undefined);
  }
  async function* followEvents(follow: FollowEventsOptions = {}): AsyncIterable<ChangeEvent> {
    let after = follow.after;
    const { signal } = follow;
    while (signal?.aborted !== true) {
      let answer: Awaited<ReturnType<typeof typed.GET<'/api/1/events', object>>>;
      try {
        answer = await typed.GET('/api/1/events', {
          params: {
            query: {
              limit: follow.limit ?? 100,
              wait: follow.wait ?? 30,
              ...(follow.subject !== undefined && { subject: follow.subject }),
              ...(after !== undefined && { after }),
            },
          },
          ...(signal && { signal }),
        });
      } catch (error) {
        if (signal?.aborted) return;
        throw error;
      }
      const { data, error, response } = answer;
      if (data === undefined) throw new ProblemError(error as Problem, response.status);
      for (const event of data.result.events) {
        yield event;
        after = event.sequence;
      }
      after = data.result.next;
    }
  }
  return Object.assign(typed, { listAll, followEvents });
}

// A session's access token checked where it is used, without calling the service: the JWT's
// ES256 signature against the service's published keys (GET /.well-known/jwks.json), its issuer,
// its audience (the site) and its expiry. Built on jose: the key set is fetched once and kept,
// and fetched again (at most every 30 s) when a token names a key it lacks, as after a rotation.

/** What an access token says (the spec's `getJwks` describes each claim). */
export interface AccessTokenClaims {
  /** The issuer: the service's ACCESS_TOKEN_ISSUER (by default its PUBLIC_URL). */
  iss: string;
  /** The site the session belongs to. */
  aud: string;
  /** The account's `_userId`. */
  sub: string;
  /** The session's `sessionId` (what `session/revoke` takes). */
  sid: string;
  /** Issued and expires at, in seconds since the epoch. */
  iat: number;
  exp: number;
  /** RFC 8176 methods of the login: `pwd`, `otp`, `hwk`, `mfa`, … */
  amr: string[];
  /** NIST 800-63B assurance level: 1 for a password, 2 with a second factor or a passkey. */
  aal: number;
  /** Present when a support agent impersonates the account: who. */
  act?: { sub: string };
}

export interface VerifyAccessTokenOptions {
  /** The service's key set: `<PUBLIC_URL>/.well-known/jwks.json`. */
  jwksUrl: string | URL;
  /** The `iss` the service signs with (its ACCESS_TOKEN_ISSUER, by default its PUBLIC_URL). */
  issuer: string;
  /** Your site's name: tokens of other sites are refused. */
  site: string;
  /** Seconds of clock difference forgiven on `exp` and `iat` (default 0). */
  clockToleranceSeconds?: number;
}

/** Why a token was refused. */
export type AccessTokenProblem =
  | 'expired'
  | 'wrong_issuer'
  | 'wrong_site'
  | 'bad_signature'
  | 'unknown_key'
  | 'malformed'
  | 'keys_unavailable';

/** A refused access token: `reason` says why; `cause` is jose's error. */
export class AccessTokenError extends Error {
  readonly reason: AccessTokenProblem;
  constructor(reason: AccessTokenProblem, message: string, cause?: unknown) {
    super(message, { cause });
    this.name = 'AccessTokenError';
    this.reason = reason;
  }
}

// One cached key set per URL, for the life of the process: every call shares its fetches.
const keySets = new Map<string, ReturnType<typeof createRemoteJWKSet>>();

function keySetOf(url: URL): ReturnType<typeof createRemoteJWKSet> {
  let set = keySets.get(url.href);
  if (set === undefined) {
    // Kept 5 minutes, as the service's Cache-Control says; an unknown kid fetches at most every 30 s.
    set = createRemoteJWKSet(url, { cacheMaxAge: 300_000, cooldownDuration: 30_000, timeoutDuration: 5_000 });
    keySets.set(url.href, set);
  }
  return set;
}

function refusal(error: unknown): AccessTokenError {
  if (error instanceof errors.JWTExpired)
    return new AccessTokenError('expired', 'The access token has expired.', error);
  if (error instanceof errors.JWTClaimValidationFailed) {
    if (error.claim === 'iss')
      return new AccessTokenError('wrong_issuer', 'The access token was issued by another issuer.', error);
    if (error.claim === 'aud')
      return new AccessTokenError('wrong_site', 'The access token belongs to another site.', error);
    return new AccessTokenError('malformed', `The access token's ${error.claim} is not valid: ${error.message}`, error);
  }
  if (error instanceof errors.JWSSignatureVerificationFailed)
    return new AccessTokenError('bad_signature', 'The access token does not carry a valid signature.', error);
  if (error instanceof errors.JWKSNoMatchingKey)
    return new AccessTokenError('unknown_key', 'The access token names a key the service does not publish.', error);
  if (
    error instanceof errors.JWKSTimeout ||
    error instanceof errors.JWKSInvalid ||
    !(error instanceof errors.JOSEError)
  )
    return new AccessTokenError('keys_unavailable', "The service's key set could not be fetched.", error);
  return new AccessTokenError('malformed', `The access token is not one of the service's: ${error.message}`, error);
}

/**
 * The claims of a valid access token: signed ES256 by a key the service publishes at `jwksUrl`,
 * issued by `issuer` for `site`, not expired. Throws an {@link AccessTokenError} otherwise.
 * A token stays valid until it expires even if its session is revoked meanwhile: where that
 * matters, ask `POST /api/1/session/verify` instead.
 *
 * Throws a TypeError (not an AccessTokenError) when `site` or `issuer` is missing or empty:
 * an unset variable would otherwise turn that check off and let another site's token through.
 */
export async function verifyAccessToken(jwt: string, options: VerifyAccessTokenOptions): Promise<AccessTokenClaims> {
  for (const name of ['site', 'issuer'] as const) {
    const value: unknown = options?.[name];
    if (typeof value !== 'string' || value === '')
      throw new TypeError(
        `verifyAccessToken needs options.${name}, a non-empty string (got ${value === '' ? 'an empty string' : typeof value}): without it, tokens of any ${name === 'site' ? 'site' : 'issuer'} would pass.`,
      );
  }
  let payload: Record<string, unknown>;
  try {
    ({ payload } = await jwtVerify(jwt, keySetOf(new URL(options.jwksUrl)), {
      issuer: options.issuer,
      audience: options.site,
      algorithms: ['ES256'],
      typ: 'at+jwt',
      requiredClaims: ['iss', 'aud', 'sub', 'iat', 'exp'],
      clockTolerance: options.clockToleranceSeconds ?? 0,
    }));
  } catch (error) {
    throw refusal(error);
  }
  const act = payload.act as { sub?: unknown } | undefined;
  if (
    typeof payload.sid !== 'string' ||
    typeof payload.aud !== 'string' ||
    typeof payload.aal !== 'number' ||
    !Array.isArray(payload.amr) ||
    !payload.amr.every((m) => typeof m === 'string') ||
    (act !== undefined && typeof act?.sub !== 'string')
  )
    throw new AccessTokenError('malformed', 'The access token lacks sid, amr or aal, or has them of the wrong type.');
  return payload as unknown as AccessTokenClaims;
}
