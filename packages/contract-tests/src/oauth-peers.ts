// The providers the sign-in tests talk to, on loopback ports of this process:
// - a real OpenID Connect provider, `oidc-provider` (panva's certified Node OP), its development
//   login and consent forms driven by `signInAt` with fetch, a cookie jar and manual redirects;
// - a node:http server with two faces: a plain OAuth 2.0 provider shaped like GitHub's (token,
//   /user, /user/emails), and a forging OpenID provider (discovery, JWKS, a token endpoint that
//   answers the ID token the test mints with jose: alg none, HS256 keyed by the public key, another
//   issuer, audience or nonce, expired), which can also be down (503) or slow.
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose';
import Provider from 'oidc-provider';

export interface Person {
  sub: string;
  email?: string;
  email_verified?: boolean;
  name?: string;
}

const listen = (server: Server) =>
  new Promise<number>((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve((server.address() as AddressInfo).port)),
  );
const close = (server: Server) =>
  new Promise<void>((resolve) => {
    server.closeAllConnections();
    server.close(() => resolve());
  });

/** A real OpenID provider: clients as given, people by their sub. */
export async function startOidcProvider(
  clients: { client_id: string; client_secret: string; redirect_uris: string[] }[],
  people: Map<string, Person>,
) {
  const server = createServer();
  const port = await listen(server);
  const issuer = `http://127.0.0.1:${port}`;
  const op = new Provider(issuer, {
    clients: clients.map((c) => ({
      ...c,
      grant_types: ['authorization_code'],
      response_types: ['code'],
      token_endpoint_auth_method: 'client_secret_post',
    })),
    pkce: { required: () => true },
    claims: { openid: ['sub'], email: ['email', 'email_verified'], profile: ['name'] },
    features: { devInteractions: { enabled: true } },
    cookies: { keys: ['a test cookie key, long enough to sign'] },
    async findAccount(_ctx, id) {
      const person = people.get(id) ?? { sub: id };
      return { accountId: id, claims: async () => ({ ...person, sub: id }) };
    },
  });
  // No stack traces of expected refusals on the test's output.
  op.on('server_error', () => {});
  server.on('request', op.callback());
  return { issuer, close: () => close(server) };
}

/** A cookie jar of one browser: name=value by name. */
class Jar {
  readonly cookies = new Map<string, string>();
  take(response: Response) {
    for (const line of response.headers.getSetCookie()) {
      const [pair] = line.split(';');
      const eq = pair!.indexOf('=');
      this.cookies.set(pair!.slice(0, eq).trim(), pair!.slice(eq + 1));
    }
  }
  get header() {
    return [...this.cookies].map(([k, v]) => `${k}=${v}`).join('; ');
  }
}

/**
 * A person signing in at `authorizationUrl` as `login` (the OP's development forms: login, then
 * consent), as a browser would: the URL the OP sends the browser back to (the site's callback, with
 * `code`, `state` and `iss`).
 */
export async function signInAt(authorizationUrl: string, login: string, callbackPrefix: string): Promise<string> {
  const jar = new Jar();
  let url = authorizationUrl;
  for (let hops = 0; hops < 20; hops++) {
    if (url.startsWith(callbackPrefix)) return url;
    const response = await fetch(url, { redirect: 'manual', headers: { cookie: jar.header } });
    jar.take(response);
    if (response.status >= 300 && response.status < 400) {
      url = new URL(response.headers.get('location')!, url).href;
      continue;
    }
    const html = await response.text();
    if (response.status !== 200) throw new Error(`the provider answered ${response.status}: ${html.slice(0, 300)}`);
    const action = /<form[^>]*action="([^"]+)"/.exec(html)?.[1];
    if (action === undefined) throw new Error(`no form at ${url}: ${html.slice(0, 300)}`);
    const body = html.includes('name="login"')
      ? new URLSearchParams({ prompt: 'login', login, password: 'any' })
      : new URLSearchParams({ prompt: 'consent' });
    const posted = await fetch(new URL(action, url), {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: jar.header, 'content-type': 'application/x-www-form-urlencoded' },
      body,
    });
    jar.take(posted);
    await posted.body?.cancel();
    url = new URL(posted.headers.get('location')!, url).href;
  }
  throw new Error('too many redirects');
}

export interface MintOptions {
  nonce: string;
  sub: string;
  claims?: Record<string, unknown>;
}

/** What the forging provider's token endpoint does next. */
export type ForgeMode =
  | { kind: 'id_token'; mint: (signer: Signer, expected: { issuer: string; audience: string }) => Promise<string> }
  | { kind: 'down' }
  | { kind: 'slow'; ms: number };

export interface Signer {
  /** A well-formed RS256 ID token of the forging issuer's own key. */
  sign(payload: Record<string, unknown>, header?: Record<string, unknown>): Promise<string>;
  /** The public key as a JWK (for HS256 keyed by it). */
  publicJwk: JWK;
}

/** What the GitHub-shaped side answers. */
export interface GithubUser {
  id: number;
  login: string;
  name: string | null;
  /** The public email on /user: not necessarily verified, not necessarily the primary. */
  email: string | null;
  emails: { email: string; primary: boolean; verified: boolean }[];
}

const readBody = async (request: IncomingMessage) => {
  const chunks: Buffer[] = [];
  for await (const chunk of request) chunks.push(chunk as Buffer);
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
};

/** The GitHub-shaped OAuth 2.0 provider and the forging OpenID provider, on one port. */
export async function startPeers() {
  const { privateKey, publicKey } = await generateKeyPair('RS256', { extractable: true });
  const publicJwk = { ...(await exportJWK(publicKey)), kid: 'forge-1', alg: 'RS256', use: 'sig' };
  const server = createServer();
  const port = await listen(server);
  const base = `http://127.0.0.1:${port}`;
  const issuer = `${base}/forge`;
  const signer: Signer = {
    publicJwk,
    sign: (payload, header = {}) =>
      new SignJWT(payload).setProtectedHeader({ alg: 'RS256', kid: 'forge-1', ...header }).sign(privateKey),
  };
  const state = {
    mode: undefined as ForgeMode | undefined,
    forgeClientId: 'forge-client',
    /** code → the GitHub user it signs in. */
    githubCodes: new Map<string, GithubUser>(),
    githubTokens: new Map<string, GithubUser>(),
    /** Everything the peers were sent, to search for leaks on our side (never searched here). */
    tokensIssued: [] as string[],
    codesSeen: [] as string[],
  };
  const json = (res: import('node:http').ServerResponse, status: number, body: unknown) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };
  server.on('request', async (req, res) => {
    const url = new URL(req.url!, base);
    try {
      if (url.pathname === '/forge/.well-known/openid-configuration')
        return json(res, 200, {
          issuer,
          authorization_endpoint: `${issuer}/authorize`,
          token_endpoint: `${issuer}/token`,
          jwks_uri: `${issuer}/jwks`,
          response_types_supported: ['code'],
          subject_types_supported: ['public'],
          id_token_signing_alg_values_supported: ['RS256'],
          authorization_response_iss_parameter_supported: true,
        });
      if (url.pathname === '/forge/jwks') return json(res, 200, { keys: [publicJwk] });
      if (url.pathname === '/forge/token') {
        const body = await readBody(req);
        state.codesSeen.push(body.get('code') ?? '');
        const mode = state.mode;
        if (mode === undefined || mode.kind === 'down') return json(res, 503, { error: 'temporarily_unavailable' });
        if (mode.kind === 'slow') {
          await new Promise((resolve) => setTimeout(resolve, mode.ms));
          return json(res, 503, { error: 'too late' });
        }
        const idToken = await mode.mint(signer, { issuer, audience: state.forgeClientId });
        const accessToken = `forge-at-${Math.random().toString(36).slice(2)}`;
        const refreshToken = `forge-rt-${Math.random().toString(36).slice(2)}`;
        state.tokensIssued.push(accessToken, refreshToken);
        return json(res, 200, {
          access_token: accessToken,
          refresh_token: refreshToken,
          token_type: 'Bearer',
          expires_in: 3600,
          scope: 'openid email',
          id_token: idToken,
        });
      }
      if (url.pathname === '/gh/token') {
        const body = await readBody(req);
        const code = body.get('code') ?? '';
        state.codesSeen.push(code);
        const user = state.githubCodes.get(code);
        state.githubCodes.delete(code);
        if (user === undefined || body.get('code_verifier') === null)
          return json(res, 400, {
            error: 'bad_verification_code',
            error_description: 'The code passed is incorrect or expired.',
          });
        const accessToken = `gho_${Math.random().toString(36).slice(2)}`;
        state.githubTokens.set(accessToken, user);
        state.tokensIssued.push(accessToken);
        return json(res, 200, { access_token: accessToken, token_type: 'bearer', scope: 'read:user,user:email' });
      }
      if (url.pathname === '/gh/user' || url.pathname === '/gh/user/emails') {
        const token = (req.headers.authorization ?? '').replace(/^Bearer /i, '');
        const user = state.githubTokens.get(token);
        if (user === undefined) return json(res, 401, { message: 'Bad credentials' });
        if (url.pathname === '/gh/user/emails') return json(res, 200, user.emails);
        return json(res, 200, { id: user.id, login: user.login, name: user.name, email: user.email });
      }
      json(res, 404, { error: 'not_found' });
    } catch (error) {
      json(res, 500, { error: String(error) });
    }
  });
  return {
    base,
    issuer,
    signer,
    state,
    github: {
      authorization: `${base}/gh/authorize`,
      token: `${base}/gh/token`,
      userinfo: `${base}/gh/user`,
      emails: `${base}/gh/user/emails`,
    },
    close: () => close(server),
  };
}
