// The gate in front of the Prism mock (`pnpm mock`): it refuses what the server refuses, with
// the server's own code (token check, 405, 413/415, JSON and depth, the schema and the rules the
// spec states in words), and passes the rest, normalized, to Prism for a documented example.
// What it cannot know without data (which account exists, a password equal to a stored email)
// stays Prism's examples, chosen with `Prefer: example=…` or `Prefer: code=…` (./prefer.ts).
import { request } from 'node:http';
import { loadSpec } from '@user-accounts/server/contract/spec';
import { compileValidators } from '@user-accounts/server/contract/validation';
import { DEFAULT_RATE_LIMIT, DEFAULT_RATE_LIMIT_HASH, DEFAULT_RATE_LIMIT_IMPORT } from '@user-accounts/server/env';
import { ApiError, notFound } from '@user-accounts/server/errors';
import { CORS, provideDeps, registerMethodNotAllowed } from '@user-accounts/server/http/app';
import type { AppDeps, AppEnv } from '@user-accounts/server/http/context';
import type { Operation } from '@user-accounts/server/http/define-operation';
import { renderProblem } from '@user-accounts/server/http/errors';
import { requireScope, requireScopeForBody, requireToken } from '@user-accounts/server/http/middleware/auth';
import { listedOriginsCors } from '@user-accounts/server/http/middleware/cors';
import { idempotencyKeyOf } from '@user-accounts/server/http/middleware/idempotency';
import { jsonBody } from '@user-accounts/server/http/middleware/json-body';
import { requestId } from '@user-accounts/server/http/middleware/request-id';
import { operations } from '@user-accounts/server/http/operations';
import { registerDocs } from '@user-accounts/server/http/routes/docs';
import { type Policy, parseRateLimit } from '@user-accounts/server/limits/rate-limit';
import { SCOPES, type TokenInfo } from '@user-accounts/server/tokens';
import { type Context, Hono, type MiddlewareHandler } from 'hono';
import { pino } from 'pino';
import { checkedPrefer, documentedAnswers, parsePrefer } from './prefer.ts';

/** The spec's paths the gate serves itself, as the server does (registerDocs). */
const SERVED = new Set(['/openapi.yaml', '/openapi.json', '/docs']);

const HOP_BY_HOP = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive']);

export interface MockFrontOptions {
  /** Prism's Unix socket: only this process (and its user) can reach it, never a browser. */
  upstreamSocket: string;
  /** The tokens the mock accepts, as a server accepts its API_TOKENS. */
  tokens: string[];
  /** Browser origins that may call the mock (MOCK_CORS_ORIGINS); no CORS headers for any other. */
  corsOrigins: string[];
}

export function createMockFront(options: MockFrontOptions): Hono<AppEnv> {
  const validators = compileValidators();
  const accepted = new Set(options.tokens);
  // Every scope: what a token may do is the server's to check, with its tokens.
  const info: TokenInfo = { id: 'mock', site: 'default', scopes: SCOPES };
  // Only what the shared middleware reads: a token check of the mock's own, and a silent logger.
  const deps = {
    tokens: { verify: async (token: string) => (accepted.has(token) ? info : undefined) },
    logger: pino({ level: 'silent' }),
  } as unknown as AppDeps;

  const app = new Hono<AppEnv>();
  app.use(provideDeps(deps, validators));
  app.use(requestId());
  // Only the listed origins: a page open in the developer's browser must not use the mock as a
  // stepping stone into the developer's machine.
  app.use(listedOriginsCors(options.corsOrigins, CORS));

  /** The request, as the gate has normalized it, to Prism at a path of the spec; Prism's answer back as it is. */
  const relay = (
    c: Context<AppEnv>,
    path: string,
    search: string,
    body: string | undefined,
    prefer: string | undefined,
  ): Promise<Response> =>
    new Promise((resolve, reject) => {
      const headers: Record<string, string> = {};
      for (const [name, value] of c.req.raw.headers) if (!HOP_BY_HOP.has(name)) headers[name] = value;
      delete headers.prefer;
      if (prefer !== undefined) headers.prefer = prefer;
      if (body !== undefined) headers['content-length'] = String(Buffer.byteLength(body));
      // The upstream path is the operation's own, never one taken from the request.
      const upstream = request(
        {
          socketPath: options.upstreamSocket,
          path: search === '' ? path : `${path}?${search}`,
          method: c.req.method,
          headers,
        },
        (answer) => {
          const chunks: Buffer[] = [];
          answer.on('data', (chunk: Buffer) => chunks.push(chunk));
          answer.on('error', reject);
          answer.on('end', () => {
            const out = new Headers();
            for (const [name, value] of Object.entries(answer.headers)) {
              // The mock keeps no keys and so never replays: Prism takes this from the spec's example.
              if (value === undefined || HOP_BY_HOP.has(name) || name === 'idempotent-replayed') continue;
              for (const one of [value].flat()) out.append(name, one);
            }
            const status = answer.statusCode ?? 502;
            resolve(
              new Response(status === 204 || status === 304 ? null : Buffer.concat(chunks), { status, headers: out }),
            );
          });
        },
      );
      upstream.on('error', reject);
      upstream.end(body);
    });

  // A server's answers to a valid token carry the rate-limit fields; the mock's own refusals too
  // (a server's default budgets, full: the mock counts nothing). Prism's answers bring theirs from the spec.
  const limits = (budget: Operation['budget']): MiddlewareHandler<AppEnv> => {
    const defaults = { all: DEFAULT_RATE_LIMIT, hash: DEFAULT_RATE_LIMIT_HASH, import: DEFAULT_RATE_LIMIT_IMPORT };
    const policies = (budget === undefined ? (['all'] as const) : (['all', budget] as const)).map(
      (name) => parseRateLimit(name, defaults[name]) as Policy,
    );
    const policy = policies.map((p) => `"${p.name}";q=${p.limit};w=${p.windowSeconds}`).join(', ');
    const remaining = policies.map((p) => `"${p.name}";r=${p.limit};t=${p.windowSeconds}`).join(', ');
    return async function mockLimits(c, next) {
      await next();
      if (c.res.headers.has('RateLimit')) return;
      c.res.headers.set('RateLimit-Policy', policy);
      c.res.headers.set('RateLimit', remaining);
    };
  };
  const keyChecked: MiddlewareHandler<AppEnv> = async function mockIdempotencyKey(c, next) {
    idempotencyKeyOf(c);
    await next();
  };

  // Each operation of the table, checked as the server checks it, in the server's order.
  for (const op of operations) {
    const chain: MiddlewareHandler<AppEnv>[] = [
      requireToken(),
      limits(op.budget),
      requireScope(op.scope, op.alsoScope?.scope),
    ];
    if ('body' in op.request) chain.push(jsonBody(op.bulk?.bodyBytes));
    if (op.alsoScope !== undefined) chain.push(requireScopeForBody(op.scope, op.alsoScope));
    if (op.idempotent) chain.push(keyChecked);
    const answers = documentedAnswers(loadSpec(), op.path, op.method);
    app.on(op.method, [op.path], ...chain, async function gate(c) {
      const input = op.parse(c);
      // After the server's own checks: a request the server refuses is refused alike, whatever it prefers.
      const asked = c.req.header('prefer');
      const wanted = parsePrefer(asked);
      // The example that fits the request (a ticket's purpose), unless the caller chose an answer.
      const fitting = wanted.has('code') || wanted.has('example') ? undefined : op.mockExample?.(input);
      const prefer = checkedPrefer(
        op.name,
        answers,
        fitting === undefined ? asked : [asked, `example=${fitting}`].filter((p) => p !== undefined).join(', '),
      );
      // Forwarded as the server reads it: the query or the body normalized by parse (trimmed).
      if ('query' in op.request) {
        // Only the parameters given: a parameter left out is not sent as the text "undefined".
        const given = Object.entries(input as Record<string, unknown>).flatMap(([name, value]) =>
          value === undefined ? [] : [[name, String(value)]],
        );
        return relay(c, op.path, new URLSearchParams(given).toString(), undefined, prefer);
      }
      const own = op.mockAnswer?.(c, input);
      if (own !== undefined) return own;
      return relay(c, op.path, '', JSON.stringify(c.get('body')), prefer);
    });
  }
  // The contract and its reference page as the server serves them: the document itself, not
  // Prism's example of a string (`"string"`, `{}`).
  registerDocs(app);
  // The spec's other paths: health with no token (as on a server), the rest (metrics) with a mock
  // token. Anything else is not there.
  for (const [path, methods] of Object.entries(loadSpec().paths)) {
    if (operations.some((op) => op.path === path) || SERVED.has(path)) continue;
    const open = methods.get?.security?.length === 0;
    const forward = (c: Context<AppEnv>) => relay(c, path, '', undefined, c.req.header('prefer'));
    if (open) app.get(path, forward);
    else app.get(path, requireToken(), forward);
  }
  // After every GET above: a known path's other methods are 405 with Allow, as on a server.
  registerMethodNotAllowed(app);
  app.notFound((c) => renderProblem(c, notFound(c.req.path)));
  app.onError((error, c) =>
    renderProblem(
      c,
      error instanceof ApiError ? error : new ApiError('service_unavailable', 'The mock could not reach Prism.'),
    ),
  );
  return app;
}
