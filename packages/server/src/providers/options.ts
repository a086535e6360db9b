// A sign-in provider's configuration as the operator gives it (`cli provider set`, issue 59,
// point 1), checked before anything is stored: the presets of the well-known providers, every URL
// https (http only on a loopback address, for development and tests), redirect URIs exact (no
// wildcard), scopes as RFC 6749 §3.3 spells them, userinfo's mapping as JSON pointers (RFC 6901).
// No I/O here: the CLI parses its flags into ProviderInput, the store (providers.ts) keeps what
// checkProvider answers.

export type ProviderKind = 'oidc' | 'oauth2';
export type OnNewPerson = 'create' | 'refuse';

/** oauth2: where to send the person, where to exchange the code, where to ask who they are. */
export interface ProviderEndpoints {
  authorization: string;
  token: string;
  userinfo: string;
  /** GitHub's /user/emails: a list of { email, primary, verified }; the primary verified one is the email. */
  emails?: string;
}

/** oauth2: JSON pointers into userinfo's answer. */
export interface UserinfoMap {
  subject: string;
  email?: string;
  emailVerified?: string;
  name?: string;
}

/** What the operator typed, before presets and checks; absent: not given. */
export interface ProviderInput {
  site: string;
  name: string;
  /** The preset to start from (default: the one named `name`, if any). */
  preset?: string | undefined;
  kind?: string | undefined;
  issuer?: string | undefined;
  clientId?: string | undefined;
  authorizationUrl?: string | undefined;
  tokenUrl?: string | undefined;
  userinfoUrl?: string | undefined;
  emailsUrl?: string | undefined;
  /** `subject=/id,email=/email,emailVerified=/email_verified,name=/name` */
  userinfoMap?: string | undefined;
  /** Comma-separated. */
  scopes?: string | undefined;
  /** Comma-separated. */
  redirectUris?: string | undefined;
  onNewPerson?: string | undefined;
  /** --keep-tokens: keep the provider's tokens (sealed), read by provider/tokens. */
  keepTokens?: boolean | undefined;
}

/** A provider as it is kept (the client secret aside: it is sealed by the store). */
export interface ProviderConfig {
  site: string;
  name: string;
  kind: ProviderKind;
  /** oidc only. */
  issuer: string | null;
  /** oauth2 only. */
  endpoints: ProviderEndpoints | null;
  /** oauth2 only. */
  userinfoMap: UserinfoMap | null;
  clientId: string;
  scopes: string[];
  redirectUris: string[];
  onNewPerson: OnNewPerson;
  keepTokens: boolean;
}

/** What is wrong with the options, said to the operator; never echoes a secret. */
export class ProviderOptionError extends Error {
  override name = 'ProviderOptionError';
}

interface Preset {
  kind: ProviderKind;
  issuer?: string;
  endpoints?: ProviderEndpoints;
  userinfoMap?: UserinfoMap;
  scopes: string[];
}

/**
 * The well-known providers: with one of these names (or `--preset`), the client id and secret and
 * the site's redirect URIs suffice. Microsoft's is the multi-tenant `common` endpoint (a single
 * tenant: `--issuer https://login.microsoftonline.com/<tenant id>/v2.0`); Apple's client secret is
 * the JWT the developer signs with their key, given as the secret.
 */
export const PRESETS: Readonly<Record<string, Preset>> = {
  google: { kind: 'oidc', issuer: 'https://accounts.google.com', scopes: ['openid', 'email', 'profile'] },
  microsoft: {
    kind: 'oidc',
    issuer: 'https://login.microsoftonline.com/common/v2.0',
    scopes: ['openid', 'email', 'profile'],
  },
  apple: { kind: 'oidc', issuer: 'https://appleid.apple.com', scopes: ['openid', 'email', 'name'] },
  gitlab: { kind: 'oidc', issuer: 'https://gitlab.com', scopes: ['openid', 'email', 'profile'] },
  github: {
    kind: 'oauth2',
    endpoints: {
      authorization: 'https://github.com/login/oauth/authorize',
      token: 'https://github.com/login/oauth/access_token',
      userinfo: 'https://api.github.com/user',
      emails: 'https://api.github.com/user/emails',
    },
    userinfoMap: { subject: '/id', email: '/email', name: '/name' },
    scopes: ['read:user', 'user:email'],
  },
};

/** The name identities carry (spec: IdentityProvider). */
export const PROVIDER_NAME = /^[a-z0-9][a-z0-9._:-]{0,63}$/;
const LOOPBACK = new Set(['127.0.0.1', '[::1]', 'localhost']);
/** RFC 6749 §3.3: scope-token = 1*( %x21 / %x23-5B / %x5D-7E ). */
const SCOPE_TOKEN = /^[\x21\x23-\x5b\x5d-\x7e]{1,200}$/;
/** RFC 6901: "" or a sequence of /reference-token, `~` only as ~0 or ~1; here never the whole document. */
const JSON_POINTER = /^(\/([^~/]|~[01])*)+$/;
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;
const MAX_URL = 2000;
const MAX_REDIRECT_URIS = 20;
const MAX_SCOPES = 50;
const MAP_FIELDS = ['subject', 'email', 'emailVerified', 'name'] as const;

/**
 * `https://…`, or `http://` to 127.0.0.1, [::1] or localhost; no user or password in it, no
 * fragment; an issuer (OpenID Connect Discovery §4.3) no query either. Answers what is wrong, or
 * undefined. `what` names the option in the message.
 */
export function urlProblem(raw: string, what: string, options: { query?: boolean } = {}): string | undefined {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    return `${what} must be an absolute URL (got "${clip(raw)}")`;
  }
  const loopback = LOOPBACK.has(url.hostname);
  if (url.protocol !== 'https:' && !(url.protocol === 'http:' && loopback))
    return `${what} must be https:// (http:// only to 127.0.0.1, [::1] or localhost, for development and tests; got "${clip(raw)}")`;
  if (raw.length > MAX_URL) return `${what} must be at most ${MAX_URL} characters`;
  if (url.username !== '' || url.password !== '') return `${what} must not carry a user or password`;
  if (raw.includes('#')) return `${what} must not have a fragment (#…)`;
  if (options.query === false && raw.includes('?')) return `${what} must not have a query (?…)`;
  return undefined;
}

/**
 * The configuration to keep: the preset's values where the operator gave none, each checked. A
 * ProviderOptionError says the first thing wrong, naming the option.
 */
export function checkProvider(input: ProviderInput): ProviderConfig {
  const fail = (message: string): never => {
    throw new ProviderOptionError(message);
  };
  const { site, name } = input;
  if (!PROVIDER_NAME.test(name))
    fail(`--name must be 1 to 64 of a-z 0-9 . _ - :, starting with a letter or digit (got "${clip(name)}")`);
  if (input.preset !== undefined && PRESETS[input.preset] === undefined)
    fail(`--preset must be one of ${Object.keys(PRESETS).join(', ')} (got "${clip(input.preset)}")`);
  const preset = PRESETS[input.preset ?? name];
  const kind = input.kind ?? preset?.kind ?? (input.issuer === undefined ? undefined : 'oidc');
  if (kind === undefined)
    fail(
      `${name} is no preset (${Object.keys(PRESETS).join(', ')}): give --issuer for OpenID Connect, or --kind oauth2 with its URLs`,
    );
  if (kind !== 'oidc' && kind !== 'oauth2') fail(`--kind must be oidc or oauth2 (got "${clip(kind!)}")`);
  // A preset of the other kind gives nothing but its name.
  const own = preset?.kind === kind ? preset : undefined;

  const clientId = input.clientId;
  if (clientId === undefined) fail('--client-id needs a value');
  if (clientId!.trim() === '' || clientId!.length > 512 || CONTROL.test(clientId!))
    fail('--client-id must be 1 to 512 characters, without control characters');

  let issuer: string | null = null;
  let endpoints: ProviderEndpoints | null = null;
  let userinfoMap: UserinfoMap | null = null;
  const oauth2Only = (
    [
      ['--authorization-url', input.authorizationUrl],
      ['--token-url', input.tokenUrl],
      ['--userinfo-url', input.userinfoUrl],
      ['--emails-url', input.emailsUrl],
      ['--userinfo-map', input.userinfoMap],
    ] as const
  ).find(([, value]) => value !== undefined)?.[0];
  if (kind === 'oidc') {
    if (oauth2Only !== undefined)
      fail(`${oauth2Only} is for --kind oauth2: OpenID Connect reads it from the issuer's discovery document`);
    issuer = input.issuer ?? own?.issuer ?? fail('--issuer needs a value (the OpenID Connect issuer, https://…)');
    const problem = urlProblem(issuer!, '--issuer', { query: false });
    if (problem !== undefined) fail(problem);
  } else {
    if (input.issuer !== undefined) fail('--issuer is for OpenID Connect (--kind oidc); --kind oauth2 takes its URLs');
    const url = (given: string | undefined, preset: string | undefined, option: string) => {
      const value = given ?? preset ?? fail(`${option} needs a value (--kind oauth2)`);
      const problem = urlProblem(value!, option);
      if (problem !== undefined) fail(problem);
      return value!;
    };
    const emails = input.emailsUrl ?? own?.endpoints?.emails;
    endpoints = {
      authorization: url(input.authorizationUrl, own?.endpoints?.authorization, '--authorization-url'),
      token: url(input.tokenUrl, own?.endpoints?.token, '--token-url'),
      userinfo: url(input.userinfoUrl, own?.endpoints?.userinfo, '--userinfo-url'),
      ...(emails === undefined ? {} : { emails: url(emails, undefined, '--emails-url') }),
    };
    userinfoMap =
      input.userinfoMap === undefined
        ? (own?.userinfoMap ?? fail('--userinfo-map needs a value (--kind oauth2): subject=/id at least'))
        : parseUserinfoMap(input.userinfoMap);
  }

  const scopes =
    input.scopes === undefined ? (own?.scopes ?? (kind === 'oidc' ? ['openid'] : [])) : splitList(input.scopes);
  if (scopes.length > MAX_SCOPES) fail(`--scopes must be at most ${MAX_SCOPES}`);
  const badScope = scopes.find((s) => !SCOPE_TOKEN.test(s));
  if (badScope !== undefined)
    fail(
      `--scopes must be comma-separated scopes, each without spaces, quotes or backslashes (got "${clip(badScope)}")`,
    );
  if (kind === 'oidc' && !scopes.includes('openid'))
    fail('--scopes must include openid: without it the provider answers no ID token');
  if (new Set(scopes).size !== scopes.length) fail('--scopes names a scope twice');

  if (input.redirectUris === undefined)
    fail("--redirect-uris needs a value: the site's exact callback URLs, comma-separated");
  const redirectUris = splitList(input.redirectUris!);
  if (redirectUris.length === 0 || redirectUris.length > MAX_REDIRECT_URIS)
    fail(`--redirect-uris must name 1 to ${MAX_REDIRECT_URIS} callback URLs`);
  for (const uri of redirectUris) {
    if (uri.includes('*'))
      fail(`--redirect-uris must be exact URLs, without wildcards (got "${clip(uri)}"): list each callback URL`);
    const problem = urlProblem(uri, '--redirect-uris');
    if (problem !== undefined) fail(problem);
  }
  if (new Set(redirectUris).size !== redirectUris.length) fail('--redirect-uris names a URL twice');

  const onNewPerson = input.onNewPerson ?? 'refuse';
  if (onNewPerson !== 'create' && onNewPerson !== 'refuse')
    fail(`--on-new-person must be create or refuse (got "${clip(onNewPerson)}")`);

  return {
    site,
    name,
    kind: kind as ProviderKind,
    issuer,
    endpoints,
    userinfoMap,
    clientId: clientId!,
    scopes,
    redirectUris,
    onNewPerson: onNewPerson as OnNewPerson,
    keepTokens: input.keepTokens === true,
  };
}

/** A client secret as read from its file or variable: trimmed (a file ends with a newline), 1 to 4096 characters. */
export function checkClientSecret(raw: string): string {
  const secret = raw.trim();
  // Never quoted back: the message names the rule only.
  if (secret === '' || secret.length > 4096 || CONTROL.test(secret))
    throw new ProviderOptionError(
      'the client secret must be 1 to 4096 characters on one line, without control characters',
    );
  return secret;
}

/** `subject=/id,email=/email`: each of subject, email, emailVerified, name at most once; subject required. */
export function parseUserinfoMap(raw: string): UserinfoMap {
  const map: Partial<Record<(typeof MAP_FIELDS)[number], string>> = {};
  for (const entry of splitList(raw)) {
    const eq = entry.indexOf('=');
    const field = entry.slice(0, eq) as (typeof MAP_FIELDS)[number];
    const pointer = entry.slice(eq + 1);
    if (eq < 1 || !MAP_FIELDS.includes(field))
      throw new ProviderOptionError(
        `--userinfo-map must be FIELD=/json/pointer pairs, FIELD one of ${MAP_FIELDS.join(', ')} (got "${clip(entry)}")`,
      );
    if (map[field] !== undefined) throw new ProviderOptionError(`--userinfo-map names ${field} twice`);
    if (!JSON_POINTER.test(pointer) || pointer.length > 200)
      throw new ProviderOptionError(
        `--userinfo-map's ${field} must be a JSON pointer such as /id or /user/login (RFC 6901: ~0 for ~, ~1 for /; got "${clip(pointer)}")`,
      );
    map[field] = pointer;
  }
  if (map.subject === undefined)
    throw new ProviderOptionError("--userinfo-map must say where the subject is (subject=/id): the person's stable id");
  return map as UserinfoMap;
}

const splitList = (raw: string) =>
  raw
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s !== '');

/** What is quoted back of an operator's input: short, control characters shown as \uXXXX. */
function clip(value: string): string {
  const shown = value.length > 80 ? `${value.slice(0, 80)}…` : value;
  // biome-ignore lint/suspicious/noControlCharactersInRegex: showing them is the point
  return shown.replace(/[\u0000-\u001f\u007f-\u009f]/g, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, '0')}`);
}
