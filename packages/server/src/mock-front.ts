// The gate in front of the Prism mock (`pnpm mock`): it refuses what the server refuses, with
// the server's own code (token check, 405, 413/415, JSON and depth, the schema and the rules the
// spec states in words), and passes the rest, normalized, to Prism for a documented example.
// What it cannot know without data (which account exists, a password equal to a stored email)
// stays Prism's examples, chosen with `Prefer: example=…` or `Prefer: code=…`.
import { Hono, type Context, type MiddlewareHandler } from 'hono';
import { cors } from 'hono/cors';
import { pino } from 'pino';
import { CORS, provideDeps, registerMethodNotAllowed } from './app.ts';
import type { AppDeps, AppEnv } from './context.ts';
import { ApiError, renderProblem } from './errors.ts';
import { parseIfMatch } from './etag.ts';
import { requireToken } from './middleware/auth.ts';
import { idempotencyKeyOf } from './middleware/idempotency.ts';
import { jsonBody } from './middleware/json-body.ts';
import { requestId } from './middleware/request-id.ts';
import { weakPasswordReason } from './passwords.ts';
import { validQuery } from './routes/get-user.ts';
import { refuseEmailChange, validBody, weakPassword } from './routes/shared.ts';
import type { TokenInfo } from './tokens.ts';
import { compileValidators } from './validation.ts';

const HOP_BY_HOP = new Set(['host', 'connection', 'content-length', 'transfer-encoding', 'keep-alive']);

export interface MockFrontOptions {
  /** Prism's address. */
  upstream: string;
  /** The tokens the mock accepts, as a server accepts its API_TOKENS. */
  tokens: string[];
}

export function createMockFront(options: MockFrontOptions): Hono<AppEnv> {
  const validators = compileValidators();
  const accepted = new Set(options.tokens);
  const info: TokenInfo = { id: 'mock', site: 'default', scopes: ['read', 'write'] } as TokenInfo;
  // Only what the shared middleware reads: a token check of the mock's own, and a silent logger.
  const deps = {
    tokens: { verify: async (token: string) => (accepted.has(token) ? info : undefined) },
    logger: pino({ level: 'silent' }),
  } as unknown as AppDeps;

  const app = new Hono<AppEnv>();
  app.use(provideDeps(deps, validators));
  app.use(requestId());
  // Any page may call the mock, as any may call Prism: it holds nothing to protect.
  app.use(cors({ origin: '*', ...CORS }));

  /** The request, as the gate has normalized it, to Prism; Prism's answer back as it is. */
  const relay = async (c: Context<AppEnv>, body: string | undefined): Promise<Response> => {
    const url = new URL(c.req.url);
    const headers = new Headers();
    for (const [name, value] of c.req.raw.headers) if (!HOP_BY_HOP.has(name)) headers.set(name, value);
    const answer = await fetch(new URL(`${url.pathname}${url.search}`, options.upstream), { method: c.req.method, headers, body });
    const out = new Headers(answer.headers);
    for (const name of HOP_BY_HOP) out.delete(name);
    return new Response(await answer.arrayBuffer(), { status: answer.status, headers: out });
  };
  const forward: MiddlewareHandler<AppEnv> = (c) =>
    relay(c, c.req.method === 'GET' || c.req.method === 'HEAD' ? undefined : JSON.stringify(c.get('body')));

  // A server's answers to a valid token carry the rate-limit fields; the mock's own refusals too
  // (with a full budget: the mock counts nothing). Prism's answers bring theirs from the spec.
  const limits = (create: boolean): MiddlewareHandler<AppEnv> => async (c, next) => {
    await next();
    if (c.res.headers.has('RateLimit')) return;
    c.res.headers.set('RateLimit-Policy', create ? '"all";q=6000;w=60, "create";q=300;w=60' : '"all";q=6000;w=60');
    c.res.headers.set('RateLimit', create ? '"all";r=6000;t=60, "create";r=300;t=60' : '"all";r=6000;t=60');
  };

  const ifMatchChecked: MiddlewareHandler<AppEnv> = async (c, next) => {
    parseIfMatch(c.req.header('if-match'));
    await next();
  };
  const keyChecked: MiddlewareHandler<AppEnv> = async (c, next) => {
    idempotencyKeyOf(c);
    await next();
  };

  app.get('/api/1/user/get', requireToken(), limits(false), async (c, next) => {
    const query = validQuery(c);
    // Forward the query as the server reads it (email trimmed).
    const url = new URL(c.req.url);
    url.search = new URLSearchParams(query as Record<string, string>).toString();
    c.req.raw = new Request(url, c.req.raw);
    await next();
  }, forward);
  app.post('/api/1/user/create', requireToken(), limits(true), jsonBody(), keyChecked, async (c, next) => {
    const input = validBody(c, 'CreateUserRequest');
    const reason = weakPasswordReason(input.password, { email: input.email, name: input.name });
    if (reason !== undefined) throw weakPassword(reason);
    await next();
  }, forward);
  app.post('/api/1/user/update', requireToken(), limits(false), jsonBody(), keyChecked, ifMatchChecked, async (c, next) => {
    refuseEmailChange(c);
    const input = validBody(c, 'UpdateUserRequest');
    // Without the account, only the new name can be compared with the password.
    if (input.password !== undefined) {
      const reason = weakPasswordReason(input.password, { name: input.name });
      if (reason !== undefined) throw weakPassword(reason);
    }
    await next();
  }, forward);
  app.delete('/api/1/user/delete', requireToken(), limits(false), jsonBody(), ifMatchChecked, async (c, next) => {
    validBody(c, 'DeleteUserRequest');
    await next();
  }, forward);
  registerMethodNotAllowed(app);
  app.all('*', (c) => relay(c, undefined));
  app.onError((error, c) =>
    renderProblem(c, error instanceof ApiError ? error : new ApiError(503, 'service_unavailable', 'The mock could not reach Prism.')),
  );
  return app;
}
