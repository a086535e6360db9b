// The operator's commands (`pnpm cli ...`): tokens, the audit trail, imports. They run wherever
// the database is: in the CLI's own process, or inside the running server (see admin-socket.ts).
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { eq } from 'drizzle-orm';
import { SCHEMA_FILE_BYTES, schemaProblem, setMetadataSchema } from '../accounts/metadata.ts';
import {
  createToken,
  listTokens,
  revokeToken,
  SCOPES,
  type Scope,
  SITE_NAME,
  unrevokedTokenIds,
} from '../auth/tokens.ts';
import { compileValidators } from '../contract/validation.ts';
import { countMigrations, type Db, type Migrated } from '../db/client.ts';
import { siteSettings } from '../db/schema.ts';
import { ApiError } from '../errors.ts';
import { SEQUENCE_TEXT } from '../events/queue.ts';
import {
  addEndpoint,
  latestDeliveries,
  listEndpoints,
  removeEndpoint,
  replay,
  TYPE_PATTERN,
} from '../events/webhooks/endpoints.ts';
import { checkWebhookUrl } from '../events/webhooks/target.ts';
import { latestAuditRows, tokenLabels } from '../kernel/audit.ts';
import { isUuid } from '../kernel/ids.ts';
import { EVENT_TYPES } from '../kernel/outbox.ts';
import type { KeyRing } from '../kernel/secret-box.ts';
import {
  checkLinkOrigins,
  checkMailFrom,
  checkMailTransport,
  checkSecret,
  checkSmsCountries,
  checkSmsTransport,
  type SenderChanges,
  SenderOptionError,
  sendersOf,
  setSenders,
} from '../messages/senders.ts';
import {
  checkTemplate,
  LANG,
  listTemplates,
  MESSAGE_PURPOSES,
  type MessagePurpose,
  removeTemplate,
  render,
  sampleValues,
  setTemplate,
  type Template,
  TemplateError,
  templateFor,
} from '../messages/templates.ts';
import type { FirebaseScrypt } from '../passwords/foreign.ts';
import type { PasswordHasher } from '../passwords/hasher.ts';
import type { BreachedPasswords } from '../passwords/screening.ts';
import { checkDiscovery, forgetDiscovery } from '../providers/oauth.ts';
import { checkClientSecret, checkProvider, PRESETS, PROVIDER_NAME, ProviderOptionError } from '../providers/options.ts';
import { listProviders, removeProvider, setProvider } from '../providers/providers.ts';
import {
  ACTIVATION_DELAY_SECONDS,
  listSigningKeys,
  PUBLISHED_AFTER_RETIREMENT_SECONDS,
  publishedUntil,
  rotateSigningKey,
  STALE_MS,
  sealingRing,
} from '../sessions/signing-keys.ts';
import { exportFile } from './export-file.ts';
import { importFile, MAX_LINE_BYTES } from './import-file.ts';
import { escapeControls } from './terminal.ts';

/** Each command's usage: all of them make --help; a usage error shows only its command's. */
const COMMANDS: { name: string; synopsis: string; about: string }[] = [
  {
    name: 'token create',
    synopsis: 'token create --site NAME --scopes read,write --label TEXT [--expires 90d|12h|2027-01-31]',
    about: `Prints a new token, once. Scopes: read (get, list, count, factor list, an account's
      audit trail), write (every change: create, update, delete, restore, disable, enable, import,
      tickets, factors), verify (the login: verify, factor/verify, passkey login, nothing else),
      export (export, every account with its password hash, and a person's data; grant it to
      operators' jobs only), events (the change feed and the site's webhook deliveries),
      impersonate (session/impersonate: support staff signing in as a person, with who and why;
      grant it to support desks only). API_TOKENS and the dev token have neither export nor
      impersonate.`,
  },
  {
    name: 'console',
    synopsis: 'console --site NAME --as "FULL NAME" [--scopes read,write,events] [--expires 8h] [--url BASE]',
    about: `Mints a short-lived token (at most 24h; 8h by default) for the accounts console and
      prints the address that signs in with it: BASE/console#token=…, the token in the fragment,
      which a browser never sends, so it reaches no server's log. --as names the person it is
      for: the token's label is NAME as given (spaces at its ends left out), which the audit trail
      and the console show for each of their actions (without it, "console": no one in particular). BASE: the running server's own
      address when the CLI hands the command to it (the embedded database), else this
      configuration's HOST and PORT; behind HAProxy, its internal frontend's (--url).`,
  },
  {
    name: 'key generate',
    synopsis: 'key generate [--id k1]',
    about: `Prints a new FACTOR_ENCRYPTION_KEY value, ID:KEY with 32 random bytes in base64, alone
      on the last line of its output (the rest goes to stderr), so that
      FACTOR_ENCRYPTION_KEY=$(cli key generate) sets it; needs no database and no openssl. To
      rotate, generate one with another --id and put it first (k2:…,k1:…).`,
  },
  {
    name: 'token list',
    synopsis: 'token list [--site NAME] [--json]',
    about: 'Every token: id, site, label, scopes, prefix, created, last used, expires, revoked.',
  },
  {
    name: 'token revoke',
    synopsis: 'token revoke ID|PREFIX',
    about: `Refused from the next request on, by every server. PREFIX is the one token list shows
      (ua_ and 7 more characters), when no other unrevoked token has it.`,
  },
  {
    name: 'audit tail',
    synopsis: 'audit tail [--limit N] [--site NAME] [--json]',
    about: 'The latest write requests, newest last.',
  },
  {
    name: 'import',
    synopsis: 'import --site NAME FILE.ndjson [--dry-run] [--firebase-scrypt PARAMS.json]',
    about: `Creates the site's accounts from a file, one JSON object per line as POST
      /api/1/user/import takes its rows (a password or a passwordHash each), 1,000 at a time.
      Prints each refused line's reason; exits 1 when any line was refused. A line over
      ${MAX_LINE_BYTES / 1024} KiB is refused unread (an account with every field at its limit and
      every character \\u-escaped takes 22 KB). --dry-run checks and writes nothing.
      --firebase-scrypt: the Firebase project's hash parameters (signerKey, saltSeparator,
      rounds, memCost), for lines with a Firebase passwordHash and passwordSalt.
      With the embedded database, stop the server first.`,
  },
  {
    name: 'export',
    synopsis: 'export --site NAME > FILE.ndjson',
    about: `Writes every account of the site, oldest first, one JSON object per line with its
      password hash: what import (here or in another deployment) takes back. Keep the file as
      you keep the database. With the embedded database, stop the server first.`,
  },
  {
    name: 'webhook add',
    synopsis: 'webhook add --site NAME --url URL [--types user.*]',
    about: `Sends the site's change events from now on to URL, signed per Standard Webhooks; prints
      the endpoint's id and its signing secret (whsec_…), once. --types: comma-separated event
      types (${EVENT_TYPES.join(', ')}) or user.*
      (the default). URL must be https:// to a public address (WEBHOOK_ALLOW_PRIVATE=true also
      allows http:// and private addresses), checked again at every attempt.`,
  },
  {
    name: 'webhook list',
    synopsis: 'webhook list [--site NAME] [--json]',
    about: 'Every endpoint: id, site, URL, types, created, failing since, disabled, deliveries pending.',
  },
  {
    name: 'webhook remove',
    synopsis: 'webhook remove ID',
    about: 'Removes the endpoint and its deliveries, pending or not.',
  },
  {
    name: 'webhook replay',
    synopsis: 'webhook replay ID --from SEQ',
    about: `Sends again the endpoint's events from sequence number SEQ on (those still kept), delivered
      or not, after any still pending; switches a disabled endpoint back on.`,
  },
  {
    name: 'webhook deliveries',
    synopsis: 'webhook deliveries [ID] [--limit N] [--json]',
    about: 'The latest deliveries (of one endpoint, or all), newest first: state, attempts, last answer.',
  },
  {
    name: 'site set',
    synopsis:
      'site set --site NAME [--deletion-grace 30d] [--display-name "Example Shop"] [--rp-id ID --origins URL[,URL…] [--rp-name NAME]] [--session-lifetime 30d] [--session-idle 7d] [--mail-from "Shop <no-reply@shop.example>" --mail-transport smtp://USER@HOST:587|none [--mail-password-file FILE]] [--link-origins URL[,URL…]] [--sms-transport URL|none [--sms-key-header NAME] [--sms-key-file FILE] [--sms-body JSON]] [--sms-countries GB,FR] [--sms-daily-limit N] [--daily-limit N]',
    about: `Sets the site's default grace period of a delete (0d to 90d): a delete without
      graceDays keeps the account restorable that long before it is purged. 0d (the default of
      every site): removed at once. --rp-id and --origins make the site a WebAuthn relying party,
      which passkeys need: the RP id is the domain the passkeys belong to (example.com, or
      localhost), each origin a page that may use them (https://example.com, or http:// on
      localhost), on the RP id or a subdomain of it; --rp-name is what the browser shows (default:
      the site's name). Setting them again replaces them: passkeys made for another RP id stop
      working. --session-lifetime (absolute, default 30d) and --session-idle (without use, default
      7d) bound the site's sessions, as 3600s, 90m, 12h or 30d (5 minutes to 365 days); they hold
      for sessions made from then on (a login's own lifetime can only be shorter).
      --display-name: what people see for the site, not its internal name: the issuer that
      authenticator apps show for a TOTP factor added from then on (no colon), and the name
      its messages are signed with.
      --mail-from, --mail-transport: the site's mail is sent by us (user/ticket's and
      org/invitation/create's "send"): smtp:// (STARTTLS required) or smtps:// (TLS), a plain
      connection only to a loopback host; the password from --mail-password-file FILE or the
      MAIL_TRANSPORT_PASSWORD variable, kept sealed under FACTOR_ENCRYPTION_KEY, never printed;
      none removes the transport. --link-origins: the origins a send's linkTemplate may point at
      (https). --sms-transport: a text-message API (POST of --sms-body, a JSON template with
      {{to}} and {{text}}; Twilio's shape by default), its key from --sms-key-file or
      SMS_TRANSPORT_KEY sent in --sms-key-header (default Authorization); --sms-countries: the
      only countries texts may go to; --sms-daily-limit: texts a day (beyond it 429
      sms_limit_reached); --daily-limit: messages a day, every channel together.`,
  },
  {
    name: 'template set',
    synopsis: 'template set --site NAME --purpose PURPOSE [--lang en] --file FILE.json',
    about: `Gives the site its own message of PURPOSE (${MESSAGE_PURPOSES.join(', ')}) in a
      language (default en): FILE is { "subject", "text", "html"? }, Mustache templates of the
      variables siteName, link (or code), expiresIn, expiresAt, email, name (orgName for an
      invitation). Checked first: an unknown variable, a missing link or code, an unescaped
      value or HTML that does not parse is refused, saying which. Without one, our English
      template is used.`,
  },
  {
    name: 'template list',
    synopsis: 'template list --site NAME [--json]',
    about: "The site's own templates: purpose, language, subject, whether it has HTML, updated.",
  },
  {
    name: 'template preview',
    synopsis: 'template preview --site NAME --purpose PURPOSE [--lang en] [--file FILE.json]',
    about: `Renders the message a person would get (the site's template, or ours, or FILE's), with
      sample values: subject, text and HTML, before anyone gets it.`,
  },
  {
    name: 'template remove',
    synopsis: 'template remove --site NAME --purpose PURPOSE [--lang en]',
    about: "Removes the site's template of PURPOSE in that language: ours is used again.",
  },
  {
    name: 'metadata-schema set',
    synopsis: 'metadata-schema set --site NAME FILE.json',
    about: `Gives the site's account metadata a JSON Schema (2020-12, at most 32 KiB, nothing
      fetched from elsewhere): from now on every write of metadata (create, import, an update
      with metadata) must leave metadata it accepts, else 400 invalid_metadata. Existing
      accounts are not changed or checked at once: says how many do not match; each is held to
      the schema at its next write of metadata.`,
  },
  {
    name: 'metadata-schema clear',
    synopsis: 'metadata-schema clear --site NAME',
    about: "Removes the site's metadata schema: metadata is any JSON object again.",
  },
  {
    name: 'signing-keys rotate',
    synopsis: 'signing-keys rotate [--now]',
    about: `Makes a new key to sign sessions' access tokens: published at /.well-known/jwks.json at
      once, it signs from ${ACTIVATION_DELAY_SECONDS / 60} minutes on (longer than a verifier caches the key set, and than a
      server takes to read it), when the key signing now retires; a retired key stays published
      until every token it signed has expired (${PUBLISHED_AFTER_RETIREMENT_SECONDS / 60} minutes). --now: it signs at once (tests, a
      key thought stolen); other servers follow within ${STALE_MS / 1000} s, and a verifier holding an older key
      set fetches it again when it meets the new kid. Keys no longer published are deleted.`,
  },
  {
    name: 'signing-keys list',
    synopsis: 'signing-keys list [--json]',
    about: `Every key: kid, state (pending, signing, retired, unpublished), created, signs from, retired,
      published until, and the FACTOR_ENCRYPTION_KEY key id that seals it (@db: the database's own key).`,
  },
  {
    name: 'provider set',
    synopsis:
      'provider set --site NAME --name NAME --client-id ID --client-secret-file FILE --redirect-uris URL[,URL…] [--issuer URL | --kind oauth2 --authorization-url URL --token-url URL --userinfo-url URL --userinfo-map subject=/id,… [--emails-url URL]] [--preset NAME] [--scopes S[,S…]] [--on-new-person create|refuse] [--keep-tokens]',
    about: `Configures a sign-in provider of the site ("Sign in with Google"), or replaces the whole
      configuration of the one of that name. OpenID Connect: --issuer, the rest from its discovery
      document. --kind oauth2 (not OpenID Connect): its authorization, token and userinfo URLs, and
      --userinfo-map, JSON pointers into userinfo's answer for subject (required), email,
      emailVerified and name; --emails-url, a list of { email, primary, verified } as GitHub's
      /user/emails, whose primary verified email is then the email.
      Presets (${Object.keys(PRESETS).join(', ')}): that name (or --preset)
      fills in the issuer or URLs, the mapping and the scopes. --scopes,
      --redirect-uris: comma-separated; the redirect URIs are the site's exact callback URLs, no
      wildcards. Every URL https://, http:// only to 127.0.0.1, [::1] or localhost. --on-new-person:
      whether a person no account has gets one at their first sign-in (default refuse). The client
      secret is read from FILE (or the PROVIDER_CLIENT_SECRET variable), kept sealed under
      FACTOR_ENCRYPTION_KEY, and never printed; replacing a provider without one keeps its secret.`,
  },
  {
    name: 'provider list',
    synopsis: 'provider list [--site NAME] [--json]',
    about:
      'Every provider: site, name, kind, issuer or authorization URL, client id, scopes, redirect URIs, on new person; never a secret.',
  },
  {
    name: 'provider remove',
    synopsis: 'provider remove --site NAME --name NAME',
    about: `Removes the provider and its sealed secret. Identities already linked through it stay on
      their accounts (identity/unlink removes one).`,
  },
  {
    name: 'migrate',
    synopsis: 'migrate',
    about: `Applies the migrations the database lacks, and only that: for deploy pipelines that
      migrate before rolling out servers. Safe to run from several places at once.`,
  },
];

export const USAGE = `Usage: cli <command>

${COMMANDS.map((c) => `  ${c.synopsis}\n      ${c.about}`).join('\n')}

The database is DATABASE_URL's, or else the embedded one in DATA_DIR (default ./data).`;

export interface CommandResult {
  code: number;
  stdout: string;
  stderr: string;
}

class UsageError extends Error {}
class CommandFailed extends Error {}

/**
 * `cli <command> --help`: that command's usage only (a family's, `cli token --help`, its
 * commands'); undefined when the words name none (then every command's, as `cli --help`).
 */
export function commandHelp(argv: string[]): string | undefined {
  const words: string[] = [];
  for (const arg of argv) {
    if (arg.startsWith('-')) break;
    words.push(arg);
  }
  const own = COMMANDS.find((c) => c.name === words.slice(0, 2).join(' ')) ?? COMMANDS.find((c) => c.name === words[0]);
  if (own !== undefined) return `Usage: cli ${own.synopsis}\n      ${own.about}\n`;
  const family = COMMANDS.filter((c) => words[0] !== undefined && c.name.split(' ')[0] === words[0]);
  if (family.length === 0) return undefined;
  return `Usage:\n${family.map((c) => `  cli ${c.synopsis}\n      ${c.about}`).join('\n')}\n`;
}

/**
 * `cli key generate [--id ID]`: a new FACTOR_ENCRYPTION_KEY value, on stdout alone (its last
 * line), what to do with it on stderr. Runs before any configuration is read: a fresh host has none.
 */
export function keyGenerate(argv: string[]): CommandResult {
  const rest = argv.slice(2);
  let id = 'k1';
  if (rest.length === 2 && rest[0] === '--id') id = rest[1]!;
  else if (rest.length === 1 && rest[0]!.startsWith('--id=')) id = rest[0]!.slice(5);
  else if (rest.length > 0)
    return { code: 2, stdout: '', stderr: usageError(`unknown arguments: ${rest.join(' ')}`, 'key generate', ['key']) };
  if (!/^[A-Za-z0-9_-]{1,32}$/.test(id))
    return {
      code: 2,
      stdout: '',
      stderr: usageError('--id must be 1 to 32 letters, digits, _ or -', 'key generate', ['key']),
    };
  return {
    code: 0,
    stdout: `${id}:${randomBytes(32).toString('base64')}\n`,
    stderr:
      'A new FACTOR_ENCRYPTION_KEY value (32 random bytes, base64), below; it is shown once and kept nowhere:\n' +
      'set it on every server of the deployment and keep it with the backups (without it, second factors and sealed secrets are lost).\n',
  };
}

/**
 * One line on what is wrong, then the usage of that command only; for an unknown one, its
 * family's (`token frob`: the token commands), else every command's synopsis.
 */
function usageError(message: string, command: string | undefined, words: string[]): string {
  const line = `${command === undefined ? 'cli' : `cli ${command}`}: ${message}`;
  const own = COMMANDS.find((c) => c.name === command);
  if (own !== undefined) return `${line}\nUsage: cli ${own.synopsis}\n      ${own.about}\n`;
  const family = COMMANDS.filter((c) => c.name.split(' ')[0] === words[0]);
  const usage =
    family.length > 0
      ? family.map((c) => `  cli ${c.synopsis}\n      ${c.about}`)
      : [...COMMANDS.map((c) => `  cli ${c.synopsis}`), '(cli --help says what each does.)'];
  return `${line}\nUsage:\n${usage.join('\n')}\n`;
}

/** Every command's options (import and export refuse the others); a switch's next word is an argument. */
const TAKE_A_VALUE = [
  'site',
  'scopes',
  'label',
  'as',
  'display-name',
  'expires',
  'limit',
  'url',
  'types',
  'from',
  'firebase-scrypt',
  'deletion-grace',
  'rp-id',
  'rp-name',
  'session-lifetime',
  'session-idle',
  'origins',
  'name',
  'kind',
  'preset',
  'issuer',
  'client-id',
  'client-secret-file',
  'authorization-url',
  'token-url',
  'userinfo-url',
  'emails-url',
  'userinfo-map',
  'redirect-uris',
  'on-new-person',
  'mail-from',
  'mail-transport',
  'mail-password-file',
  'link-origins',
  'sms-transport',
  'sms-key-header',
  'sms-key-file',
  'sms-body',
  'sms-countries',
  'sms-daily-limit',
  'daily-limit',
  'purpose',
  'lang',
  'file',
  // site set's mail password and text API key, read by the CLI's own process (cli.ts) from their
  // files or MAIL_TRANSPORT_PASSWORD / SMS_TRANSPORT_KEY, as provider set's client secret is.
  'mail-password-inline',
  'sms-key-inline',
  // template set|preview: FILE's text, read by the CLI's own process (cli.ts).
  'template-json',
  // provider set: the client secret, read by the CLI's own process (cli.ts) from
  // --client-secret-file or PROVIDER_CLIENT_SECRET; a server running the command through its
  // socket reads no file of the caller's. Never on a command line of the operator's: see cli.ts.
  'client-secret-inline',
  // metadata-schema set: the file's text, put there by the CLI's own process (cli.ts), which
  // reads FILE; a server running the command through its socket reads no file of the caller's.
  'schema-json',
];
const OPTIONS = Object.fromEntries([
  ...TAKE_A_VALUE.map((n) => [n, { type: 'string' }]),
  ...['json', 'dry-run', 'help', 'now', 'keep-tokens'].map((n) => [n, { type: 'boolean' }]),
]) as Record<string, { type: 'string' | 'boolean' }>;

/** `problem`: what is wrong with an option, said with the command's usage once the command is known. */
function parse(argv: string[]): { words: string[]; flags: Map<string, string | true>; problem?: string } {
  // Not strict: node's own errors would name no command and end with advice about '--'.
  const parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: false, tokens: true });
  const flags = new Map(Object.entries(parsed.values) as [string, string | true][]);
  let problem: string | undefined;
  for (const token of parsed.tokens) {
    if (token.kind !== 'option') continue;
    const type = OPTIONS[token.name]?.type;
    if (type === undefined) problem ??= `unknown option ${token.rawName}`;
    else if (type === 'boolean' && token.value !== undefined) problem ??= `${token.rawName} takes no value`;
    // `--label --json`: the next option is no value; text() says the flag needs one, if the command reads it.
    else if (type === 'string' && (token.value === undefined || (!token.inlineValue && token.value.startsWith('--'))))
      flags.set(token.name, true);
  }
  return { words: parsed.positionals, flags, ...(problem === undefined ? {} : { problem }) };
}

function text(flags: Map<string, string | true>, name: string, required: true): string;
function text(flags: Map<string, string | true>, name: string, required?: false): string | undefined;
function text(flags: Map<string, string | true>, name: string, required = false): string | undefined {
  const value = flags.get(name);
  if (value === true || (required && value === undefined)) throw new UsageError(`--${name} needs a value`);
  return value;
}

/** `90d`, `12h`, `30m` from now, or a date (`2027-01-31`, any ISO 8601 time). */
/** A date (midnight UTC) or an RFC 3339 time with its zone; anything looser is a typo waiting to happen. */
const ABSOLUTE = /^(\d{4})-(\d{2})-(\d{2})(?:T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,3})?)?(?:Z|[+-]\d{2}:\d{2}))?$/;

export function parseExpiry(raw: string, now = new Date()): Date {
  const usage = () => new UsageError(`--expires must be like 90d, 12h, 30m or a date like 2027-01-31 (got "${raw}")`);
  const relative = /^(\d{1,5})([mhd])$/.exec(raw);
  let date: Date;
  if (relative) {
    const ms = Number(relative[1]) * { m: 60_000, h: 3_600_000, d: 86_400_000 }[relative[2] as 'm' | 'h' | 'd'];
    date = new Date(now.getTime() + ms);
  } else {
    const match = ABSOLUTE.exec(raw);
    date = new Date(raw);
    if (match === null || Number.isNaN(date.getTime())) throw usage();
    // Date rolls 2027-02-30 over into March: refuse a day the month does not have.
    const [, year, month, day] = match.map(Number);
    const calendar = new Date(Date.UTC(year!, month! - 1, day!));
    if (calendar.getUTCMonth() !== month! - 1 || calendar.getUTCDate() !== day) throw usage();
  }
  if (date <= now) throw new UsageError('--expires must be in the future');
  return date;
}

// PGlite's raw queries answer timestamps as text, postgres.js's as Date.
const when = (d: Date | string | null) => (d === null ? '-' : new Date(d).toISOString().replace(/\.\d{3}Z$/, 'Z'));

/** Rows of cells, in columns; a cell's control characters escaped (a label with a newline forges no row). */
function table(cells: string[][]): string {
  const rows = cells.map((r) => r.map(escapeControls));
  const widths = rows[0]!.map((_, i) => Math.max(...rows.map((r) => r[i]!.length)));
  return rows
    .map((r) =>
      r
        .map((cell, i) => cell.padEnd(widths[i]!))
        .join('  ')
        .trimEnd(),
    )
    .join('\n');
}

/** What only the CLI's own process has: a command run by the server through its socket gets none. */
export interface CliServices {
  hasher: PasswordHasher;
  /** Where a long command tells how far it is (stderr). */
  progress: NodeJS.WritableStream & { isTTY?: boolean };
  /** Where a command that writes data writes it (stdout), as it goes. */
  output: NodeJS.WritableStream;
  /** The keys that seal imported TOTP secrets, as the server's (factors/key-file.ts); none: such rows are refused. */
  factorKeys?: KeyRing | undefined;
  /** Breached-password screening of imported plain passwords, as the server's (BREACHED_PASSWORDS_URL); none: off. */
  breachedPasswords?: BreachedPasswords | undefined;
}

/**
 * A command whose arguments have been checked; it runs once it has a database (migrated: see
 * runCommand), and answers its output, or a whole result when it may end otherwise than 0.
 */
type Planned = (db: Db, migrated: Migrated | undefined, services?: CliServices) => Promise<string | CommandResult>;

/** A control character: C0, DEL or C1 (U+0080–U+009F, which terminals obey as ESC sequences too). */
// biome-ignore lint/suspicious/noControlCharactersInRegex: finding them is the point
const CONTROL = /[\u0000-\u001f\u007f-\u009f]/;

function tokenCreate(flags: Map<string, string | true>): Planned {
  const site = text(flags, 'site', true);
  if (!SITE_NAME.test(site))
    throw new UsageError('--site must be 1 to 63 of a-z 0-9 _ -, starting with a letter or digit');
  const scopes = text(flags, 'scopes', true)
    .split(',')
    .map((s) => s.trim());
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0 || scopes.length === 0)
    throw new UsageError(`--scopes must be a comma-separated list of ${SCOPES.join(', ')} (got "${scopes.join(',')}")`);
  const label = text(flags, 'label', true);
  // A label is printed in terminals and the console: control characters are refused.
  if (label.length > 200 || CONTROL.test(label))
    throw new UsageError('--label must be at most 200 characters, without control characters (C0, DEL, C1)');
  const rawExpiry = text(flags, 'expires');
  const expiresAt = rawExpiry === undefined ? undefined : parseExpiry(rawExpiry);
  return async (db) => {
    const created = await createToken(db, { site, scopes: scopes as Scope[], label, expiresAt });
    return [
      `Created token ${created.id} for site ${site} (${scopes.join(',')})${expiresAt ? `, expires ${when(expiresAt)}` : ''}.`,
      'It is shown once; store it now:',
      '',
      `  ${created.token}`,
      '',
    ].join('\n');
  };
}

const CONSOLE_SCOPES: readonly Scope[] = ['read', 'write', 'events'];
const CONSOLE_LONGEST_MS = 24 * 3_600_000;

function consoleCommand(flags: Map<string, string | true>, settings: CommandSettings): Planned {
  const site = text(flags, 'site', true);
  if (!SITE_NAME.test(site))
    throw new UsageError('--site must be 1 to 63 of a-z 0-9 _ -, starting with a letter or digit');
  const scopes = (text(flags, 'scopes') ?? CONSOLE_SCOPES.join(',')).split(',').map((s) => s.trim());
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s));
  if (unknown.length > 0 || scopes.length === 0)
    throw new UsageError(`--scopes must be a comma-separated list of ${SCOPES.join(', ')} (got "${scopes.join(',')}")`);
  const expiresAt = parseExpiry(text(flags, 'expires') ?? '8h');
  // A token in a browser tab is for a shift, not for good: longer ones are token create's.
  if (expiresAt.getTime() - Date.now() > CONSOLE_LONGEST_MS)
    throw new UsageError('--expires must be at most 24h for a console token (token create makes longer ones)');
  let base: URL;
  try {
    base = new URL(text(flags, 'url') ?? settings.consoleUrl?.() ?? 'http://127.0.0.1:3000');
  } catch {
    throw new UsageError("--url must be the server's address, like http://127.0.0.1:3000");
  }
  const person = text(flags, 'as');
  // A name is printed in terminals and the console: control characters are refused.
  if (person !== undefined && (person.trim() === '' || person.length > 100 || CONTROL.test(person)))
    throw new UsageError(
      "--as must be the person's name, 1 to 100 characters, without control characters (C0, DEL, C1)",
    );
  // The label is the name as given (issue 64: `--as "Ada (support)"` once became "Ada (support) (console)").
  const label = person === undefined ? 'console' : person.trim();
  return async (db) => {
    const created = await createToken(db, { site, scopes: scopes as Scope[], label, expiresAt });
    return [
      `Created token ${created.id} "${label}" for site ${site} (${scopes.join(',')}), expires ${when(expiresAt)}.`,
      ...(person === undefined
        ? ['Its actions are audited as "console", no one in particular: --as "FULL NAME" names who acts.']
        : []),
      'Open this address to sign in to the console (it holds the token, shown once):',
      '',
      `  ${new URL(`/console#token=${created.token}`, base).href}`,
      '',
    ].join('\n');
  };
}

function tokenList(flags: Map<string, string | true>): Planned {
  const site = text(flags, 'site');
  return async (db) => {
    const rows = await listTokens(db, { site });
    if (flags.has('json')) return `${JSON.stringify(rows, null, 2)}\n`;
    if (rows.length === 0) return 'No tokens.\n';
    const header = ['ID', 'SITE', 'LABEL', 'SCOPES', 'PREFIX', 'CREATED', 'LAST USED', 'EXPIRES', 'REVOKED'];
    const body = rows.map((t) => [
      t.id,
      t.site,
      t.label,
      t.scopes.join(','),
      `${t.prefix}…`,
      when(t.createdAt),
      when(t.lastUsedAt),
      when(t.expiresAt),
      when(t.revokedAt),
    ]);
    return `${table([header, ...body])}\n(Tokens in API_TOKENS are not stored and not listed. LAST USED lags by up to 30 s.)\n`;
  };
}

/** token list's PREFIX column: ua_ and 7 more characters, then the ellipsis a copy may bring along. */
const LISTED_PREFIX = /^(ua_[A-Za-z0-9_-]{7})(?:…|\.\.\.)?$/;

function tokenRevoke(given: string | undefined): Planned {
  const prefix = given === undefined ? undefined : LISTED_PREFIX.exec(given)?.[1];
  // Never echoed back: a whole token pasted by mistake would land in the terminal's history.
  if (given === undefined || (prefix === undefined && !isUuid(given)))
    throw new UsageError('needs the id or the prefix of a token, as token list shows them');
  return async (db) => {
    let id = given;
    if (prefix !== undefined) {
      const ids = await unrevokedTokenIds(db, prefix);
      if (ids.length === 0) throw new CommandFailed(`No active token has the prefix ${prefix}.`);
      if (ids.length > 1)
        throw new CommandFailed(
          `${ids.length} active tokens have the prefix ${prefix}; revoke one by its id:\n${ids.map((i) => `  ${i}`).join('\n')}`,
        );
      id = ids[0]!;
    }
    if (!(await revokeToken(db, id))) throw new CommandFailed(`No active token has the id ${id}.`);
    return `Revoked token ${id}. It is refused from its next request on.\n`;
  };
}

function auditTail(flags: Map<string, string | true>): Planned {
  const rawLimit = text(flags, 'limit') ?? '20';
  if (!/^\d{1,5}$/.test(rawLimit) || Number(rawLimit) < 1)
    throw new UsageError('--limit must be a whole number from 1 to 99999');
  const site = text(flags, 'site');
  return async (db) => {
    const stored = (await latestAuditRows(db, { limit: Number(rawLimit), site })).reverse();
    // Who acted, by the token's label (`Ann Example`), as the console's audit trail says it.
    const labelOf = await tokenLabels(
      db,
      stored.map((r) => r.tokenId),
    );
    const rows = stored.map((r) => ({ ...r, tokenLabel: labelOf(r.tokenId) }));
    if (flags.has('json')) return `${JSON.stringify(rows, null, 2)}\n`;
    if (rows.length === 0) return 'No writes recorded yet.\n';
    const header = ['AT', 'SITE', 'BY', 'OPERATION', 'ACCOUNT', 'STATUS', 'OUTCOME', 'REQUEST ID'];
    const body = rows.map((r) => [
      when(r.at),
      r.site,
      r.tokenLabel,
      r.operation,
      r.userId ?? '-',
      String(r.status),
      r.outcome,
      r.requestId,
    ]);
    return `${table([header, ...body])}\n`;
  };
}

function importCommand(words: string[], flags: Map<string, string | true>): Planned {
  const site = text(flags, 'site', true);
  if (!SITE_NAME.test(site))
    throw new UsageError('--site must be 1 to 63 of a-z 0-9 _ -, starting with a letter or digit');
  if (words.length !== 2) throw new UsageError('needs one file: one JSON object per line');
  const file = words[1]!;
  const unknown = [...flags.keys()].filter((f) => !['site', 'dry-run', 'firebase-scrypt'].includes(f));
  if (unknown.length > 0) throw new UsageError(`unknown option --${unknown[0]}`);
  const firebaseFile = text(flags, 'firebase-scrypt');
  return async (db, _, services) => {
    if (services === undefined)
      throw new CommandFailed(
        'A server runs on this embedded database: stop it to import from the CLI, or send the rows to POST /api/1/user/import.',
      );
    if (!existsSync(file)) throw new CommandFailed(`There is no file ${escapeControls(file)}.`);
    const validators = compileValidators();
    let firebase: FirebaseScrypt | undefined;
    if (firebaseFile !== undefined) {
      if (!existsSync(firebaseFile)) throw new CommandFailed(`There is no file ${escapeControls(firebaseFile)}.`);
      let params: unknown;
      try {
        params = JSON.parse(readFileSync(firebaseFile, 'utf8'));
      } catch {
        throw new CommandFailed(`${escapeControls(firebaseFile)} is not JSON.`);
      }
      // Checked by the spec's own schema, as the HTTP import checks its firebaseScrypt.
      if (!validators.importShape({ users: [{}], firebaseScrypt: params })) {
        throw new CommandFailed(
          `${escapeControls(firebaseFile)} must hold signerKey, saltSeparator (base64), rounds (1 to 8) and memCost (1 to 14).`,
        );
      }
      firebase = params as FirebaseScrypt;
    }
    const target = {
      db,
      hasher: services.hasher,
      validators,
      site,
      factorKeys: services.factorKeys,
      breachedPasswords: services.breachedPasswords,
    };
    const { code, summary } = await importFile({
      target,
      file,
      dryRun: flags.has('dry-run'),
      firebase,
      progress: services.progress,
    });
    return { code, stdout: summary, stderr: '' };
  };
}

function exportCommand(words: string[], flags: Map<string, string | true>): Planned {
  const site = text(flags, 'site', true);
  if (!SITE_NAME.test(site))
    throw new UsageError('--site must be 1 to 63 of a-z 0-9 _ -, starting with a letter or digit');
  if (words.length > 1) throw new UsageError('takes no file: it writes to standard output (> FILE.ndjson)');
  const unknown = [...flags.keys()].filter((f) => f !== 'site');
  if (unknown.length > 0) throw new UsageError(`unknown option --${unknown[0]}`);
  return async (db, _, services) => {
    if (services === undefined)
      throw new CommandFailed(
        'A server runs on this embedded database: stop it to export from the CLI, or use GET /api/1/user/export with a token of the export scope.',
      );
    const { summary } = await exportFile({ db, site, output: services.output, progress: services.progress });
    return { code: 0, stdout: '', stderr: summary };
  };
}

/** What a command needs to know of the deployment's configuration. */
export interface CommandSettings {
  webhookAllowPrivate: boolean;
  /** A server running the command (admin socket): its key ring, which seals a new signing key. */
  factorKeys?: KeyRing | undefined;
  /** A server running the command: told that the signing keys changed, so that it reads them now. */
  signingKeysChanged?: () => Promise<void>;
  /** A server running the command: the address it listens on, for `console`'s link. */
  consoleUrl?: () => string | undefined;
}

const siteFlag = (flags: Map<string, string | true>) => {
  const site = text(flags, 'site', true);
  if (!SITE_NAME.test(site))
    throw new UsageError('--site must be 1 to 63 of a-z 0-9 _ -, starting with a letter or digit');
  return site;
};

const limitFlag = (flags: Map<string, string | true>, fallback: string) => {
  const raw = text(flags, 'limit') ?? fallback;
  if (!/^\d{1,5}$/.test(raw) || Number(raw) < 1) throw new UsageError('--limit must be a whole number from 1 to 99999');
  return Number(raw);
};

function webhookAdd(flags: Map<string, string | true>, settings: CommandSettings): Planned {
  const site = siteFlag(flags);
  const url = text(flags, 'url', true);
  const refused = checkWebhookUrl(url, settings.webhookAllowPrivate);
  if (refused !== undefined) {
    // What to do about it, in the same line: the setting that allows private receivers.
    const hint = settings.webhookAllowPrivate
      ? ''
      : ' (WEBHOOK_ALLOW_PRIVATE=true allows http:// and private addresses)';
    throw new UsageError(`--url: ${refused}${hint}`);
  }
  const types = (text(flags, 'types') ?? 'user.*').split(',').map((t) => t.trim());
  const bad = types.filter((t) => !TYPE_PATTERN.test(t));
  if (bad.length > 0 || types.length === 0 || types.length > 10)
    throw new UsageError(`--types must be event types (${EVENT_TYPES.join(', ')}) or user.* (got "${bad.join(',')}")`);
  return async (db, _, services) => {
    // Sealed with the key the servers open it with: the CLI's own, or the server's running it.
    const { id, secret } = await addEndpoint(db, { site, url, types }, services?.factorKeys ?? settings.factorKeys);
    return [
      `Added webhook ${id} for site ${site}: ${types.join(',')} to ${url}.`,
      'Its signing secret is shown once; give it to the receiver now:',
      '',
      `  ${secret}`,
      '',
    ].join('\n');
  };
}

function webhookList(flags: Map<string, string | true>): Planned {
  const site = flags.has('site') ? siteFlag(flags) : undefined;
  return async (db) => {
    const endpoints = await listEndpoints(db, site);
    if (flags.has('json')) return `${JSON.stringify(endpoints, null, 2)}\n`;
    if (endpoints.length === 0) return 'No webhooks.\n';
    const header = ['ID', 'SITE', 'URL', 'TYPES', 'CREATED', 'FAILING SINCE', 'DISABLED', 'PENDING'];
    const body = endpoints.map((e) => [
      e.id,
      e.site,
      e.url,
      e.types.join(','),
      when(e.createdAt),
      when(e.failingSince),
      e.disabledAt === null ? '-' : `${when(e.disabledAt)} (${e.disabledReason})`,
      String(e.pending),
    ]);
    return `${table([header, ...body])}\n`;
  };
}

/** The first characters of a webhook's id, as the README and a copy from webhook list may give them. */
const WEBHOOK_PREFIX = /^([0-9a-f][0-9a-f-]{3,34})(?:…|\.\.\.)?$/;

/** The webhook's id as given, or the first characters of one (at least 4), resolved when the command runs. */
function webhookId(words: string[], position: number): (db: Db) => Promise<string> {
  const given = words[position]?.toLowerCase();
  if (given !== undefined && isUuid(given)) return async () => given;
  const prefix = given === undefined ? undefined : WEBHOOK_PREFIX.exec(given)?.[1];
  if (prefix === undefined)
    throw new UsageError('needs the id of a webhook (or its first 4 or more characters), as webhook list shows it');
  return async (db) => {
    const ids = (await listEndpoints(db)).map((e) => e.id).filter((id) => id.startsWith(prefix));
    if (ids.length === 0) throw new CommandFailed(`No webhook has an id starting with ${prefix}.`);
    if (ids.length > 1)
      throw new CommandFailed(
        `${ids.length} webhooks have an id starting with ${prefix}; give more of it:\n${ids.map((i) => `  ${i}`).join('\n')}`,
      );
    return ids[0]!;
  };
}

function webhookRemove(words: string[]): Planned {
  const resolve = webhookId(words, 2);
  return async (db) => {
    const id = await resolve(db);
    if (!(await removeEndpoint(db, id))) throw new CommandFailed(`No webhook has the id ${id}.`);
    return `Removed webhook ${id} and its deliveries.\n`;
  };
}

function webhookReplay(words: string[], flags: Map<string, string | true>): Planned {
  const resolve = webhookId(words, 2);
  const from = text(flags, 'from', true);
  // As an event's `sequence` carries it (20 digits, zero-padded) or in the short form.
  if (!SEQUENCE_TEXT.test(from) || Number(from) < 1)
    throw new UsageError('--from must be a sequence number (1 or more)');
  return async (db) => {
    const id = await resolve(db);
    const replayed = await replay(db, id, Number(from));
    if (replayed === undefined) throw new CommandFailed(`No webhook has the id ${id}.`);
    const { made, prunedThrough } = replayed;
    // Said, not silently skipped: what the retention removed cannot be sent (a feed reader gets 410 for it).
    const gone =
      Number(from) <= prunedThrough
        ? ` Events up to ${prunedThrough} are past EVENTS_RETENTION and were removed: they cannot be sent.`
        : '';
    return `Queued ${made} deliver${made === 1 ? 'y' : 'ies'} to webhook ${id}, from sequence number ${from}.${gone}\n`;
  };
}

function webhookDeliveries(words: string[], flags: Map<string, string | true>): Planned {
  const resolve = words[2] === undefined ? undefined : webhookId(words, 2);
  const limit = limitFlag(flags, '20');
  return async (db) => {
    const endpointId = await resolve?.(db);
    const found = await latestDeliveries(db, { limit, ...(endpointId && { endpointId }) });
    if (flags.has('json')) return `${JSON.stringify(found, null, 2)}\n`;
    if (found.length === 0) return 'No deliveries.\n';
    const header = ['CREATED', 'WEBHOOK', 'SEQ', 'TYPE', 'ACCOUNT', 'STATE', 'ATTEMPTS', 'LAST', 'NEXT ATTEMPT'];
    const body = found.map((d) => [
      when(d.createdAt),
      d.endpointId,
      d.seq,
      d.type,
      d.subject,
      d.state,
      String(d.attempts),
      d.lastError ?? (d.lastStatus === null ? '-' : String(d.lastStatus)),
      d.state === 'pending' ? when(d.nextAttemptAt) : '-',
    ]);
    return `${table([header, ...body])}\n`;
  };
}

/** A secret read from a file when the command runs (a server running it, or a file the CLI could not read). */
function readSecretFile(file: string, what: string): string {
  let raw: string;
  try {
    raw = readFileSync(file, 'utf8');
  } catch (error) {
    throw new CommandFailed(
      `Cannot read ${escapeControls(file)}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}.`,
    );
  }
  try {
    return checkSecret(raw, what);
  } catch (error) {
    throw new CommandFailed(`${escapeControls(file)}: ${(error as Error).message}.`);
  }
}

const wholeNumber = (flags: Map<string, string | true>, name: string, max: number) => {
  const raw = text(flags, name);
  if (raw === undefined) return undefined;
  if (!/^\d{1,9}$/.test(raw) || Number(raw) > max)
    throw new UsageError(`--${name} must be a whole number from 0 to ${max} (got "${raw}")`);
  return Number(raw);
};

/** site set's senders (issue 60, point 1): the changes, and the secrets' files read when it runs. */
function senderFlags(flags: Map<string, string | true>) {
  const changes: SenderChanges = {};
  const files: { mail?: string; sms?: string } = {};
  try {
    const from = text(flags, 'mail-from');
    if (from !== undefined) changes.mailFrom = checkMailFrom(from);
    const transport = text(flags, 'mail-transport');
    if (transport !== undefined) changes.mailTransport = transport === 'none' ? null : checkMailTransport(transport);
    const password = text(flags, 'mail-password-inline');
    if (password !== undefined) changes.mailPassword = checkSecret(password, 'the mail password');
    const passwordFile = text(flags, 'mail-password-file');
    if (passwordFile !== undefined && password === undefined) files.mail = passwordFile;
    if ((password !== undefined || passwordFile !== undefined) && (transport === undefined || transport === 'none'))
      throw new UsageError('--mail-password-file goes with --mail-transport');
    const origins = text(flags, 'link-origins');
    if (origins !== undefined) changes.linkOrigins = checkLinkOrigins(origins);
    const sms = text(flags, 'sms-transport');
    if (sms !== undefined)
      changes.sms =
        sms === 'none' ? null : checkSmsTransport(sms, text(flags, 'sms-key-header'), text(flags, 'sms-body'));
    else if (flags.has('sms-key-header') || flags.has('sms-body'))
      throw new UsageError('--sms-key-header and --sms-body go with --sms-transport');
    const key = text(flags, 'sms-key-inline');
    if (key !== undefined) changes.smsKey = checkSecret(key, 'the text API key');
    const keyFile = text(flags, 'sms-key-file');
    if (keyFile !== undefined && key === undefined) files.sms = keyFile;
    const countries = text(flags, 'sms-countries');
    if (countries !== undefined) changes.smsCountries = checkSmsCountries(countries);
    const smsLimit = wholeNumber(flags, 'sms-daily-limit', 1_000_000);
    if (smsLimit !== undefined) changes.smsDailyLimit = smsLimit;
    const daily = wholeNumber(flags, 'daily-limit', 10_000_000);
    if (daily !== undefined) changes.dailyLimit = daily;
  } catch (error) {
    if (error instanceof SenderOptionError) throw new UsageError(error.message);
    throw error;
  }
  const any = Object.keys(changes).length > 0 || files.mail !== undefined || files.sms !== undefined;
  return any ? { changes, files } : undefined;
}

function siteSet(flags: Map<string, string | true>, settings: CommandSettings): Planned {
  const site = siteFlag(flags);
  const senders = senderFlags(flags);
  const rp = relyingPartyFlags(flags);
  const lifetime = sessionSecondsFlag(flags, 'session-lifetime');
  const idle = sessionSecondsFlag(flags, 'session-idle');
  const displayName = text(flags, 'display-name')?.trim();
  // An otpauth:// URI's label is "issuer:account": a colon in the issuer would split it elsewhere.
  // A name is shown in apps and terminals: control characters are refused too.
  const unfit = (name: string) => name.includes(':') || CONTROL.test(name);
  if (displayName !== undefined && (displayName === '' || displayName.length > 100 || unfit(displayName)))
    throw new UsageError(
      '--display-name must be 1 to 100 characters, without a colon or control characters (C0, DEL, C1)',
    );
  const other =
    rp !== undefined ||
    lifetime !== undefined ||
    idle !== undefined ||
    displayName !== undefined ||
    senders !== undefined;
  const raw = other ? text(flags, 'deletion-grace') : text(flags, 'deletion-grace', true);
  let days: number | undefined;
  if (raw !== undefined) {
    const match = /^(\d{1,2})d$/.exec(raw);
    days = match === null ? Number.NaN : Number(match[1]);
    if (!(days >= 0 && days <= 90))
      throw new UsageError(`--deletion-grace must be whole days from 0d to 90d (got "${raw}")`);
  }
  return async (db, _, services) => {
    if (senders !== undefined) {
      const { changes, files } = senders;
      if (files.mail !== undefined) changes.mailPassword = readSecretFile(files.mail, 'the mail password');
      if (files.sms !== undefined) changes.smsKey = readSecretFile(files.sms, 'the text API key');
      const was = await sendersOf(db, site);
      const mail = changes.mailTransport === undefined ? (was?.mailTransport ?? null) : changes.mailTransport;
      if (mail !== null && (changes.mailFrom ?? was?.mailFrom ?? null) === null)
        throw new CommandFailed(
          `Site ${site} needs --mail-from with its mail transport: the address its mail comes from.`,
        );
      await setSenders(db, site, changes, services?.factorKeys ?? settings.factorKeys);
    }
    const set = {
      ...(days === undefined ? {} : { deletionGraceDays: days }),
      ...(rp === undefined ? {} : { rpId: rp.id, rpName: rp.name ?? null, rpOrigins: rp.origins }),
      ...(lifetime === undefined ? {} : { sessionLifetimeSeconds: lifetime }),
      ...(idle === undefined ? {} : { sessionIdleSeconds: idle }),
      ...(displayName === undefined ? {} : { displayName }),
    };
    if (Object.keys(set).length > 0)
      await db
        .insert(siteSettings)
        .values({ site, ...set })
        .onConflictDoUpdate({ target: siteSettings.site, set });
    const lines: string[] = [];
    if (days !== undefined)
      lines.push(
        days === 0
          ? `Site ${site}: a delete without graceDays removes the account at once.`
          : `Site ${site}: a delete without graceDays keeps the account restorable for ${days} days.`,
      );
    if (rp !== undefined)
      lines.push(`Site ${site}: passkeys for relying party ${rp.id}, from ${rp.origins.join(', ')}.`);
    if (lifetime !== undefined) lines.push(`Site ${site}: new sessions live at most ${lifetime} s.`);
    if (idle !== undefined) lines.push(`Site ${site}: new sessions end after ${idle} s without use.`);
    if (displayName !== undefined)
      lines.push(`Site ${site}: shown as "${displayName}" (authenticator apps name new TOTP factors so).`);
    if (senders !== undefined) {
      const { changes } = senders;
      if (changes.mailTransport === null)
        lines.push(`Site ${site}: no mail transport; its mail is the site's to send.`);
      else if (changes.mailTransport !== undefined)
        lines.push(
          `Site ${site}: mail sent through ${changes.mailTransport}${changes.mailPassword === undefined ? ', without a password' : ', its password kept sealed'}.`,
        );
      if (changes.mailFrom !== undefined) lines.push(`Site ${site}: mail from ${changes.mailFrom}.`);
      if (changes.linkOrigins !== undefined)
        lines.push(`Site ${site}: links may point at ${changes.linkOrigins.join(', ') || 'no origin'}.`);
      if (changes.sms === null) lines.push(`Site ${site}: no text-message transport.`);
      else if (changes.sms !== undefined) lines.push(`Site ${site}: texts sent through ${changes.sms.url}.`);
      if (changes.smsKey !== undefined) lines.push(`Site ${site}: the text API's key kept sealed.`);
      if (changes.smsCountries !== undefined)
        lines.push(`Site ${site}: texts only to ${changes.smsCountries.join(', ')}.`);
      if (changes.smsDailyLimit !== undefined)
        lines.push(`Site ${site}: at most ${changes.smsDailyLimit} texts a day.`);
      if (changes.dailyLimit !== undefined) lines.push(`Site ${site}: at most ${changes.dailyLimit} messages a day.`);
    }
    return `${lines.join('\n')}\n`;
  };
}

/** --session-lifetime, --session-idle: 3600s, 90m, 12h or 30d, from 5 minutes to 365 days, in seconds. */
function sessionSecondsFlag(flags: Map<string, string | true>, name: string): number | undefined {
  const raw = text(flags, name);
  if (raw === undefined) return undefined;
  const match = /^(\d{1,8})([smhd])$/.exec(raw);
  const unit = { s: 1, m: 60, h: 3600, d: 86400 } as const;
  const seconds = match === null ? Number.NaN : Number(match[1]) * unit[match[2] as keyof typeof unit];
  if (!(seconds >= 300 && seconds <= 365 * 86400))
    throw new UsageError(
      `--${name} must be a duration from 5 minutes to 365 days, as 3600s, 90m, 12h or 30d (got "${raw}")`,
    );
  return seconds;
}

/**
 * --rp-id, --origins, --rp-name, checked as browsers will: an RP id is a bare lower-case domain;
 * an origin is scheme://host[:port] alone, https (http only on localhost), on the RP id or a
 * subdomain of it. Undefined when none is given.
 */
function relyingPartyFlags(
  flags: Map<string, string | true>,
): { id: string; name: string | undefined; origins: string[] } | undefined {
  const id = text(flags, 'rp-id');
  const origins = text(flags, 'origins');
  const name = text(flags, 'rp-name');
  if (id === undefined && origins === undefined && name === undefined) return undefined;
  if (id === undefined || origins === undefined) throw new UsageError('--rp-id and --origins go together');
  if (!/^(?=.{1,253}$)[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(id))
    throw new UsageError(`--rp-id must be a domain such as example.com or localhost, no scheme or port (got "${id}")`);
  if (name !== undefined && (name.trim() === '' || name.length > 100 || CONTROL.test(name)))
    throw new UsageError('--rp-name must be 1 to 100 characters, no control characters (C0, DEL, C1)');
  const list = origins.split(',').map((o) => o.trim());
  for (const origin of list) {
    let url: URL | undefined;
    try {
      url = new URL(origin);
    } catch {}
    const host = url?.hostname;
    const local = host === 'localhost' || host?.endsWith('.localhost');
    if (
      url === undefined ||
      url.origin !== origin ||
      !(url.protocol === 'https:' || (url.protocol === 'http:' && local)) ||
      !(host === id || host!.endsWith(`.${id}`))
    )
      throw new UsageError(
        `--origins must be origins (https://host[:port], http:// only on localhost) on ${id} or a subdomain of it (got "${origin}")`,
      );
  }
  return { id, name, origins: list };
}

/** The schema given to `metadata-schema set`: the CLI's process read FILE into --schema-json. */
function metadataSchemaSet(words: string[], flags: Map<string, string | true>): Planned {
  const site = siteOf(flags);
  const given = text(flags, 'schema-json');
  const file = words[2];
  if (given === undefined && file === undefined) throw new UsageError('needs the schema file');
  return async (db) => {
    let raw = given;
    if (raw === undefined) {
      try {
        raw = readFileSync(file!, 'utf8');
      } catch (error) {
        throw new CommandFailed(`Cannot read ${file}: ${(error as Error).message}`);
      }
    }
    if (Buffer.byteLength(raw) > SCHEMA_FILE_BYTES) throw new CommandFailed('The schema is over 32 KiB.');
    let schema: unknown;
    try {
      schema = JSON.parse(raw);
    } catch (error) {
      throw new CommandFailed(`The schema is not JSON: ${(error as Error).message}`);
    }
    const problem = schemaProblem(schema);
    if (problem !== undefined) throw new CommandFailed(`The schema cannot be used: ${problem}.`);
    const { accounts, refused } = await setMetadataSchema(db, site, schema);
    const left =
      refused === 0
        ? `all ${accounts} of its accounts match it.`
        : `${refused} of its ${accounts} accounts do not match it: each must, at its next write of metadata.`;
    return `Set the metadata schema of site ${site}; ${left}\n`;
  };
}

function metadataSchemaClear(flags: Map<string, string | true>): Planned {
  const site = siteOf(flags);
  return async (db) => {
    await setMetadataSchema(db, site, undefined);
    return `Cleared the metadata schema of site ${site}: its metadata is any JSON object again.\n`;
  };
}

/**
 * `metadata-schema set`'s FILE read where the operator typed it (the CLI's process) and passed as
 * --schema-json: a server that runs the command through its socket reads no file itself.
 */
export function inlineSchemaFile(argv: string[]): string[] {
  const { words } = parse(argv);
  const file = words[2];
  if (words[0] !== 'metadata-schema' || words[1] !== 'set' || file === undefined || !existsSync(file)) return argv;
  const at = argv.lastIndexOf(file);
  return [...argv.slice(0, at), ...argv.slice(at + 1), '--schema-json', readFileSync(file, 'utf8')];
}

/** --site, a site's name as tokens take it. */
function siteOf(flags: Map<string, string | true>): string {
  const site = text(flags, 'site', true);
  if (!SITE_NAME.test(site))
    throw new UsageError('--site must be 1 to 63 of a-z 0-9 _ -, starting with a letter or digit');
  return site;
}

function signingKeysRotate(words: string[], flags: Map<string, string | true>, settings: CommandSettings): Planned {
  if (words.length > 2) throw new UsageError('takes no arguments');
  const unknown = [...flags.keys()].filter((f) => f !== 'now');
  if (unknown.length > 0) throw new UsageError(`unknown option --${unknown[0]}`);
  const immediately = flags.has('now');
  return async (db, _, services) => {
    const ring = await sealingRing(db, services?.factorKeys ?? settings.factorKeys);
    const { kid, activatesAt, retired, removed } = await rotateSigningKey(db, ring, { immediately });
    await settings.signingKeysChanged?.();
    const lines = [`Published signing key ${kid} at /.well-known/jwks.json.`];
    const atOnce = activatesAt.getTime() <= Date.now();
    lines.push(
      atOnce
        ? `It signs from now on (other servers follow within ${STALE_MS / 1000} s).`
        : `It signs from ${when(activatesAt)}, once every server and verifier has it.`,
    );
    if (retired.length > 0) {
      const until = when(publishedUntil({ retiredAt: activatesAt }));
      lines.push(
        `${retired.join(', ')} stop${retired.length === 1 ? 's' : ''} signing then, published until ${until}.`,
      );
    }
    if (removed > 0) lines.push(`Deleted ${removed} key${removed === 1 ? '' : 's'} no longer published.`);
    return `${lines.join('\n')}\n`;
  };
}

function signingKeysList(words: string[], flags: Map<string, string | true>): Planned {
  if (words.length > 2) throw new UsageError('takes no arguments');
  return async (db) => {
    const keys = await listSigningKeys(db);
    if (flags.has('json')) return `${JSON.stringify(keys, null, 2)}\n`;
    if (keys.length === 0) return 'No signing keys yet: the first server that signs an access token makes one.\n';
    const header = ['KID', 'STATE', 'CREATED', 'SIGNS FROM', 'RETIRED', 'PUBLISHED UNTIL', 'SEALED WITH'];
    const body = keys.map((k) => [
      k.kid,
      k.state,
      when(k.createdAt),
      when(k.activatesAt),
      when(k.retiredAt),
      when(k.publishedUntil),
      k.sealedWith,
    ]);
    return `${table([header, ...body])}\n`;
  };
}

const PROVIDER_SET_OPTIONS = [
  'site',
  'name',
  'kind',
  'preset',
  'issuer',
  'client-id',
  'client-secret-file',
  'client-secret-inline',
  'authorization-url',
  'token-url',
  'userinfo-url',
  'emails-url',
  'userinfo-map',
  'scopes',
  'redirect-uris',
  'on-new-person',
  'keep-tokens',
];

function providerSet(words: string[], flags: Map<string, string | true>, settings: CommandSettings): Planned {
  if (words.length > 2) throw new UsageError('takes no arguments');
  const unknown = [...flags.keys()].filter((f) => !PROVIDER_SET_OPTIONS.includes(f));
  if (unknown.length > 0) throw new UsageError(`unknown option --${unknown[0]}`);
  const site = siteOf(flags);
  let config: ReturnType<typeof checkProvider>;
  let secret: string | undefined;
  try {
    config = checkProvider({
      site,
      name: text(flags, 'name', true),
      preset: text(flags, 'preset'),
      kind: text(flags, 'kind'),
      issuer: text(flags, 'issuer'),
      clientId: text(flags, 'client-id', true),
      authorizationUrl: text(flags, 'authorization-url'),
      tokenUrl: text(flags, 'token-url'),
      userinfoUrl: text(flags, 'userinfo-url'),
      emailsUrl: text(flags, 'emails-url'),
      userinfoMap: text(flags, 'userinfo-map'),
      scopes: text(flags, 'scopes'),
      redirectUris: text(flags, 'redirect-uris', true),
      onNewPerson: text(flags, 'on-new-person'),
      keepTokens: flags.get('keep-tokens') === true,
    });
    const inline = text(flags, 'client-secret-inline');
    secret = inline === undefined ? undefined : checkClientSecret(inline);
  } catch (error) {
    if (error instanceof ProviderOptionError) throw new UsageError(error.message);
    throw error;
  }
  const file = text(flags, 'client-secret-file');
  return async (db, _, services) => {
    // Not read by the CLI's process (a server running the command, or a file it could not read).
    if (secret === undefined && file !== undefined) {
      let raw: string;
      try {
        raw = readFileSync(file, 'utf8');
      } catch (error) {
        throw new CommandFailed(
          `Cannot read ${escapeControls(file)}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}.`,
        );
      }
      try {
        secret = checkClientSecret(raw);
      } catch (error) {
        throw new CommandFailed(`${escapeControls(file)}: ${(error as Error).message}.`);
      }
    }
    // OpenID Connect: the issuer's discovery document read now (openid-client checks that it names
    // this issuer). One that names another issuer, or is no such document, refuses the set; one that
    // cannot be reached now (no network where the operator runs the CLI) is said, and read again
    // at the first provider/start.
    let discovery = '';
    if (config.kind === 'oidc') {
      try {
        const metadata = await checkDiscovery({ ...config, endpoints: null, userinfoMap: null });
        discovery = `Discovery read: ${metadata.authorization_endpoint ?? '(no authorization endpoint)'}${metadata.userinfo_endpoint === undefined ? '' : ', with userinfo'}.`;
      } catch (error) {
        if (
          error instanceof ApiError &&
          error.code === 'provider_unavailable' &&
          !/could not be used/.test(error.message)
        )
          discovery = `Discovery not read now (${error.message}); it is read again at the first sign-in.`;
        else
          throw new CommandFailed(
            `--issuer ${config.issuer}: ${error instanceof Error ? error.message : String(error)}`,
          );
      }
    }
    const outcome = await setProvider(db, config, secret, services?.factorKeys ?? settings.factorKeys);
    forgetDiscovery(config.site, config.name);
    if (outcome === 'missing_secret')
      throw new CommandFailed(
        `Site ${site} has no provider ${config.name} yet: give its client secret (--client-secret-file FILE, or PROVIDER_CLIENT_SECRET).`,
      );
    const where =
      config.kind === 'oidc'
        ? `OpenID Connect, issuer ${config.issuer}`
        : `OAuth 2.0, ${config.endpoints!.authorization}`;
    const uris = config.redirectUris.length;
    return [
      `${outcome === 'created' ? 'Added' : 'Replaced'} provider ${config.name} of site ${site} (${where}).`,
      `Scopes ${config.scopes.join(' ') || '(none)'}; ${uris} redirect URI${uris === 1 ? '' : 's'}; a person new to the site is ${config.onNewPerson === 'create' ? 'given an account' : 'refused'}.`,
      secret === undefined
        ? 'Its client secret is kept as it was.'
        : 'Its client secret is kept sealed; it is never shown.',
      ...(config.keepTokens
        ? ["The provider's tokens are kept (sealed) after each sign-in: provider/tokens reads them."]
        : []),
      ...(discovery === '' ? [] : [discovery]),
      '',
    ].join('\n');
  };
}

function providerList(words: string[], flags: Map<string, string | true>): Planned {
  if (words.length > 2) throw new UsageError('takes no arguments');
  const site = flags.has('site') ? siteOf(flags) : undefined;
  return async (db) => {
    const found = await listProviders(db, site);
    if (flags.has('json')) return `${JSON.stringify(found, null, 2)}\n`;
    if (found.length === 0) return 'No providers.\n';
    const header = [
      'SITE',
      'NAME',
      'KIND',
      'ISSUER OR AUTHORIZATION URL',
      'CLIENT ID',
      'SCOPES',
      'REDIRECT URIS',
      'NEW PERSON',
      'UPDATED',
    ];
    const body = found.map((p) => [
      p.site,
      p.name,
      p.kind,
      p.issuer ?? p.endpoints?.authorization ?? '-',
      p.clientId,
      p.scopes.join(' '),
      p.redirectUris.join(','),
      p.onNewPerson,
      when(p.updatedAt),
    ]);
    return `${table([header, ...body])}\n`;
  };
}

function providerRemove(words: string[], flags: Map<string, string | true>): Planned {
  if (words.length > 2) throw new UsageError('takes no arguments');
  const site = siteOf(flags);
  const name = text(flags, 'name', true);
  if (!PROVIDER_NAME.test(name))
    throw new UsageError('--name must be 1 to 64 of a-z 0-9 . _ - :, starting with a letter or digit');
  return async (db) => {
    if (!(await removeProvider(db, site, name))) throw new CommandFailed(`Site ${site} has no provider ${name}.`);
    return `Removed provider ${name} of site ${site}, and its client secret.\n`;
  };
}

/**
 * `provider set`'s client secret read where the operator typed the command (the CLI's process),
 * from --client-secret-file or else `fromEnvironment` (PROVIDER_CLIENT_SECRET), and passed as
 * --client-secret-inline: a server that runs the command through its socket reads no file of the
 * caller's. A file that cannot be read is left to the command, which says so. An inline secret
 * given by the operator is dropped: on a command line, it would be in the shell's history.
 */
export function inlineClientSecret(argv: string[], fromEnvironment: string | undefined): string[] {
  const { words, flags } = parse(argv);
  if (words[0] !== 'provider' || words[1] !== 'set') return argv;
  return inlineSecret(argv, flags, 'client-secret', fromEnvironment);
}

/**
 * `site set`'s mail password (--mail-password-file, else MAIL_TRANSPORT_PASSWORD, with
 * --mail-transport) and text API key (--sms-key-file, else SMS_TRANSPORT_KEY, with
 * --sms-transport), read where the operator typed the command, as inlineClientSecret does.
 */
export function inlineSenderSecrets(
  argv: string[],
  fromEnvironment: { mailPassword?: string | undefined; smsKey?: string | undefined },
): string[] {
  const { words, flags } = parse(argv);
  if (words[0] !== 'site' || words[1] !== 'set') return argv;
  const mail = flags.has('mail-transport') && flags.get('mail-transport') !== 'none';
  const sms = flags.has('sms-transport') && flags.get('sms-transport') !== 'none';
  let out = inlineSecret(argv, flags, 'mail-password', mail ? fromEnvironment.mailPassword : undefined);
  out = inlineSecret(out, parse(out).flags, 'sms-key', sms ? fromEnvironment.smsKey : undefined);
  return out;
}

/** `template set|preview --file FILE` read where the operator typed it, passed as --template-json. */
export function inlineTemplateFile(argv: string[]): string[] {
  const { words, flags } = parse(argv);
  const file = flags.get('file');
  if (words[0] !== 'template' || typeof file !== 'string' || !existsSync(file)) return argv;
  try {
    return [...argv, '--template-json', readFileSync(file, 'utf8')];
  } catch {
    return argv;
  }
}

/** --NAME-file's secret (else the environment's) as --NAME-inline; an inline one the operator typed is dropped. */
function inlineSecret(
  argv: string[],
  flags: Map<string, string | true>,
  name: string,
  fromEnvironment: string | undefined,
): string[] {
  const inline = `--${name}-inline`;
  const kept = argv.filter((a, i) => !a.startsWith(inline) && argv[i - 1] !== inline);
  const file = flags.get(`${name}-file`);
  let secret = fromEnvironment;
  if (typeof file === 'string') {
    if (!existsSync(file)) return kept;
    try {
      secret = readFileSync(file, 'utf8');
    } catch {
      return kept;
    }
  }
  return secret === undefined ? kept : [...kept, inline, secret];
}

const purposeFlag = (flags: Map<string, string | true>): MessagePurpose => {
  const purpose = text(flags, 'purpose', true);
  if (!(MESSAGE_PURPOSES as readonly string[]).includes(purpose))
    throw new UsageError(`--purpose must be one of ${MESSAGE_PURPOSES.join(', ')} (got "${purpose}")`);
  return purpose as MessagePurpose;
};

const langFlag = (flags: Map<string, string | true>) => {
  const lang = text(flags, 'lang') ?? 'en';
  if (!LANG.test(lang)) throw new UsageError(`--lang must be a language tag such as en, fr or pt-BR (got "${lang}")`);
  return lang;
};

/** A template file: { "subject", "text", "html"? }, read by the CLI's process (--template-json) or here. */
function templateOf(flags: Map<string, string | true>, purpose: MessagePurpose): (() => Template) | undefined {
  const given = text(flags, 'template-json');
  const file = text(flags, 'file');
  if (given === undefined && file === undefined) return undefined;
  return () => {
    let raw = given;
    if (raw === undefined) {
      try {
        raw = readFileSync(file!, 'utf8');
      } catch (error) {
        throw new CommandFailed(
          `Cannot read ${escapeControls(file!)}: ${(error as NodeJS.ErrnoException).code ?? 'unreadable'}.`,
        );
      }
    }
    let parsed: unknown;
    try {
      parsed = JSON.parse(raw);
    } catch (error) {
      throw new CommandFailed(`The template file is not JSON: ${(error as Error).message}`);
    }
    const t = parsed as Partial<Record<string, unknown>>;
    const extra =
      t !== null && typeof t === 'object' ? Object.keys(t).filter((k) => !['subject', 'text', 'html'].includes(k)) : [];
    if (
      t === null ||
      typeof t !== 'object' ||
      Array.isArray(t) ||
      typeof t.subject !== 'string' ||
      typeof t.text !== 'string' ||
      !(t.html === undefined || t.html === null || typeof t.html === 'string') ||
      extra.length > 0
    )
      throw new CommandFailed(
        `The template file must be a JSON object of "subject" and "text" (strings) and "html" (a string, optional)${extra.length > 0 ? `; "${extra[0]}" is not one of them` : ''}.`,
      );
    const template = { subject: t.subject, text: t.text, html: (t.html as string | null | undefined) ?? null };
    try {
      checkTemplate(purpose, template);
    } catch (error) {
      if (error instanceof TemplateError)
        throw new CommandFailed(`The ${purpose} template is refused: ${error.message}.`);
      throw error;
    }
    return template;
  };
}

function templateSet(words: string[], flags: Map<string, string | true>): Planned {
  if (words.length > 2) throw new UsageError('takes no arguments (the template is --file FILE.json)');
  const site = siteOf(flags);
  const purpose = purposeFlag(flags);
  const lang = langFlag(flags);
  const read = templateOf(flags, purpose);
  if (read === undefined) throw new UsageError('--file needs a value');
  return async (db) => {
    await setTemplate(db, site, purpose, lang, read());
    return `Set the ${purpose} template of site ${site} in ${lang}.\n`;
  };
}

function templateList(words: string[], flags: Map<string, string | true>): Planned {
  if (words.length > 2) throw new UsageError('takes no arguments');
  const site = siteOf(flags);
  return async (db) => {
    const found = await listTemplates(db, site);
    if (flags.has('json')) return `${JSON.stringify(found, null, 2)}\n`;
    if (found.length === 0) return `Site ${site} has no templates of its own: every message uses ours, in English.\n`;
    const header = ['PURPOSE', 'LANG', 'SUBJECT', 'HTML', 'UPDATED'];
    const body = found.map((t) => [t.purpose, t.lang, t.subject, t.html === null ? 'no' : 'yes', when(t.updatedAt)]);
    return `${table([header, ...body])}\n`;
  };
}

function templatePreview(words: string[], flags: Map<string, string | true>): Planned {
  if (words.length > 2) throw new UsageError('takes no arguments');
  const site = siteOf(flags);
  const purpose = purposeFlag(flags);
  const lang = text(flags, 'lang') === undefined ? undefined : langFlag(flags);
  const read = templateOf(flags, purpose);
  return async (db) => {
    const chosen =
      read === undefined ? await templateFor(db, site, purpose, lang) : { template: read(), lang: lang ?? 'en' };
    const [settings] = await db
      .select({ name: siteSettings.displayName })
      .from(siteSettings)
      .where(eq(siteSettings.site, site));
    const out = render(chosen.template, sampleValues(purpose, settings?.name ?? site));
    return [
      `The ${purpose} message of site ${site} in ${chosen.lang}${read === undefined ? '' : ' (from the file)'}, with sample values:`,
      '',
      `Subject: ${out.subject}`,
      '',
      '--- text ---',
      out.text.trimEnd(),
      ...(out.html === null ? ['', '(no HTML part)'] : ['', '--- html ---', out.html.trimEnd()]),
      '',
    ].join('\n');
  };
}

function templateRemove(words: string[], flags: Map<string, string | true>): Planned {
  if (words.length > 2) throw new UsageError('takes no arguments');
  const site = siteOf(flags);
  const purpose = purposeFlag(flags);
  const lang = langFlag(flags);
  return async (db) => {
    if (!(await removeTemplate(db, site, purpose, lang)))
      throw new CommandFailed(`Site ${site} has no ${purpose} template in ${lang}.`);
    return `Removed the ${purpose} template of site ${site} in ${lang}: ours is used again.\n`;
  };
}

/** `migrate` itself: every command migrates before it runs, this one only says what that did. */
const migrate: Planned = async (db, migrated) => {
  // Through the server's socket: the server migrated at its start, so nothing is new now.
  const { applied, already } = migrated ?? { applied: 0, already: await countMigrations(db) };
  const migrations = (n: number) => `${n} migration${n === 1 ? '' : 's'}`;
  if (applied === 0) return `The database is up to date: ${migrations(already)} already applied, none new.\n`;
  return `Applied ${migrations(applied)} (${already} ${already === 1 ? 'was' : 'were'} already applied); the database is up to date.\n`;
};

/**
 * Checks the arguments without touching a database: a usage error is a CommandResult (exit 2),
 * a valid command a function that runs it.
 */
export function planCommand(
  argv: string[],
  settings: CommandSettings = { webhookAllowPrivate: false },
): Planned | CommandResult {
  const { words, flags, problem } = parse(argv);
  const command = COMMANDS.find((c) => words.slice(0, c.name.split(' ').length).join(' ') === c.name)?.name;
  try {
    if (problem !== undefined && command !== undefined) throw new UsageError(problem);
    if (command === 'token create') return tokenCreate(flags);
    if (command === 'token list') return tokenList(flags);
    if (command === 'console') return consoleCommand(flags, settings);
    if (command === 'token revoke') return tokenRevoke(words[2]);
    if (command === 'audit tail') return auditTail(flags);
    if (command === 'import') return importCommand(words, flags);
    if (command === 'export') return exportCommand(words, flags);
    if (command === 'webhook add') return webhookAdd(flags, settings);
    if (command === 'webhook list') return webhookList(flags);
    if (command === 'webhook remove') return webhookRemove(words);
    if (command === 'webhook replay') return webhookReplay(words, flags);
    if (command === 'webhook deliveries') return webhookDeliveries(words, flags);
    if (command === 'site set') return siteSet(flags, settings);
    if (command === 'template set') return templateSet(words, flags);
    if (command === 'template list') return templateList(words, flags);
    if (command === 'template preview') return templatePreview(words, flags);
    if (command === 'template remove') return templateRemove(words, flags);
    if (command === 'metadata-schema set') return metadataSchemaSet(words, flags);
    if (command === 'metadata-schema clear') return metadataSchemaClear(flags);
    if (command === 'signing-keys rotate') return signingKeysRotate(words, flags, settings);
    if (command === 'signing-keys list') return signingKeysList(words, flags);
    if (command === 'provider set') return providerSet(words, flags, settings);
    if (command === 'provider list') return providerList(words, flags);
    if (command === 'provider remove') return providerRemove(words, flags);
    if (command === 'migrate') {
      if (words.length > 1) throw new UsageError('takes no arguments');
      return migrate;
    }
    if (words.length === 0 || flags.has('help')) return { code: 2, stdout: '', stderr: `${USAGE}\n` };
    throw new UsageError(`unknown command: ${words.join(' ')}`);
  } catch (error) {
    if (error instanceof UsageError) return { code: 2, stdout: '', stderr: usageError(error.message, command, words) };
    throw error;
  }
}

/** `migrated`: what the caller's migrate() did before, when it was the one that migrated. */
export async function runCommand(
  argv: string[],
  db: Db,
  migrated?: Migrated,
  services?: CliServices,
  settings?: CommandSettings,
): Promise<CommandResult> {
  const planned = planCommand(argv, settings);
  if (typeof planned !== 'function') return planned;
  try {
    const output = await planned(db, migrated, services);
    return typeof output === 'string' ? { code: 0, stdout: output, stderr: '' } : output;
  } catch (error) {
    if (error instanceof CommandFailed) return { code: 1, stdout: '', stderr: `${error.message}\n` };
    throw error;
  }
}
