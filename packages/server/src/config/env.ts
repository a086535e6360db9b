// The only module that reads process.env: one zod schema declares each variable once (how it is
// read, its default, what it means); the README's table and .env.example are generated from it
// (docs.ts). Every bad variable is reported at once, by name.
import { availableParallelism, hostname } from 'node:os';
import { resolve } from 'node:path';
import { z } from 'zod';
import { parseTrustedProxies, TRUST_NOBODY } from '../auth/client-address.ts';
import { parseKeyRing } from '../kernel/secret-box.ts';
import { DEFAULT_VERIFY_LIMITS, type LockoutPolicy } from '../limits/lockout.ts';
import { type Policy, parseRateLimit, type RateLimitConfig } from '../limits/rate-limit.ts';
import {
  type Argon2Params,
  DEFAULT_PASSWORD_HASH,
  parsePasswordHash,
  TEST_PASSWORD_HASH,
} from '../passwords/hasher.ts';
import { DEFAULT_ACCESS_TOKEN_LIFETIME_SECONDS, MAX_ACCESS_TOKEN_LIFETIME_SECONDS } from '../sessions/signing-keys.ts';

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

export const DEFAULT_RATE_LIMIT = '6000/60s';
/**
 * One server's argon2id rate, a minute of it (about 100 hashes/s standalone on 2 cores, see the
 * README): a token may keep one server's hashing busy, never more. What keeps one site from
 * crowding out the others is the fair queue in passwords/hasher.ts, not this budget.
 */
export const DEFAULT_RATE_LIMIT_HASH = '6000/60s';
/**
 * Accounts one site may import per hour, every token of it together: a large migration in a few
 * hours (the operator's `cli import` is not counted), never the shared database filled in minutes
 * (an account with its event and audit row is about 8 KB: 100,000 is under 1 GB an hour).
 */
export const DEFAULT_RATE_LIMIT_IMPORT = '100000/1h';
/** Failed authentications per client address: far above what a working client ever fails. */
export const DEFAULT_AUTH_FAILURE_LIMIT = '100/10s';

/** What the generated docs say of a variable: its default (applied, and shown) and its meaning. */
export interface VariableDoc {
  /** The value used when the variable is unset or blank. */
  default?: string;
  /** The README's default column when it is not `default` (markdown): "unset", "cores". */
  shown?: string;
  /** One line for operators (markdown): the README's table cell, .env.example's comment. */
  meaning: string;
}
export const docs = z.registry<VariableDoc>();

/** A variable's parsed type: never undefined when it has a default. */
type Read<T, D> = z.ZodType<D extends { default: string } ? Exclude<T, Error> : Exclude<T, Error> | undefined>;

/** A variable read by `parse`, which answers an Error whose message follows the variable's name. */
function variable<T, D extends VariableDoc>(parse: (raw: string) => T | Error, doc: D): Read<T, D> {
  const schema = z
    .string()
    .optional()
    .transform((raw, ctx) => {
      const text = raw ?? doc.default;
      if (text === undefined) return undefined;
      const parsed = parse(text);
      if (!(parsed instanceof Error)) return parsed;
      for (const message of parsed instanceof AggregateError ? parsed.errors : [parsed])
        ctx.issues.push({ code: 'custom', message: (message as Error).message, input: raw });
      return z.NEVER;
    });
  docs.add(schema, doc);
  return schema as unknown as Read<T, D>;
}

const problem = (message: string) => new Error(message);
const text = <D extends VariableDoc>(doc: D) => variable((raw) => raw, doc);
const postgresUrl = <D extends VariableDoc>(doc: D) =>
  variable(
    (raw) => (/^postgres(ql)?:\/\/.+/.test(raw) ? raw : problem('must be a postgres:// or postgresql:// URL')),
    doc,
  );
const wholeNumber = <D extends VariableDoc>(min: number, max: number, doc: D) =>
  variable((raw) => {
    const n = /^\d+$/.test(raw) ? Number(raw) : Number.NaN;
    return n >= min && n <= max ? n : problem(`must be a whole number from ${min} to ${max} (got "${raw}")`);
  }, doc);
/** One of `values`: "must be A or B", or "must be one of A, B, C". */
const oneOf = <V extends string, D extends VariableDoc>(values: readonly V[], doc: D) =>
  variable((raw) => {
    const allowed = values.length === 2 ? values.join(' or ') : `one of ${values.join(', ')}`;
    return (values as readonly string[]).includes(raw) ? (raw as V) : problem(`must be ${allowed} (got "${raw}")`);
  }, doc);
const trueOrFalse = <D extends VariableDoc & { default: string }>(doc: D) =>
  variable(
    (raw) => (raw === 'true' || raw === 'false' ? raw === 'true' : problem(`must be true or false (got "${raw}")`)),
    doc,
  );
/** A comma-separated list; `bad` says what is wrong with an entry (one problem each). */
const list = <D extends VariableDoc>(bad: (entry: string, index: number) => string | undefined, doc: D) =>
  variable((raw) => {
    const entries = raw.split(',').flatMap((e) => (e.trim() === '' ? [] : [e.trim()]));
    const problems = entries.map(bad).filter((p) => p !== undefined);
    return problems.length === 0 ? entries : new AggregateError(problems.map(problem));
  }, doc);
const rateLimit = <D extends VariableDoc>(name: 'all' | 'hash' | 'import', doc: D) =>
  variable((raw) => parseRateLimit(name, raw), doc);
/** N failures within a window (1 s to 24 h), or `off` when `offAllowed`. */
const failureWindow = <D extends VariableDoc>(example: string, offAllowed: boolean, doc: D) =>
  variable((raw) => {
    if (offAllowed && raw === 'off') return null;
    const parsed = parseRateLimit('all', raw);
    const or = offAllowed ? ', or be off' : '';
    return parsed instanceof Error || parsed === null
      ? problem(`must look like ${example} (failures per window, 1 s to 24 h)${or} (got "${raw}")`)
      : { limit: parsed.limit, windowSeconds: parsed.windowSeconds };
  }, doc);
/** `Nd` or `Nh` in ms, from `min` to `max` days; `off` (null) when `offAllowed`. */
const retention = <D extends VariableDoc & { default: string }>(
  min: number,
  max: number,
  offAllowed: boolean,
  doc: D,
) =>
  variable((raw) => {
    if (offAllowed && raw === 'off') return null;
    const parsed = /^(\d{1,5})([hd])$/.exec(raw);
    const ms = parsed === null ? 0 : Number(parsed[1]) * (parsed[2] === 'd' ? 86_400_000 : 3_600_000);
    if (ms >= min * 86_400_000 && ms <= max * 86_400_000) return ms;
    const or = offAllowed ? ', or off' : '';
    return problem(
      `must be a number of days or hours, ${min}d (${min * 24}h) to ${max}d, like ${doc.default}${or} (got "${raw}")`,
    );
  }, doc);
/** A secret the operator chose: never echoed back, not even a bad one. */
const secretIsBad = (secret: string) => secret.length < 20 || secret.length > 256 || !/^[\x21-\x7e]+$/.test(secret);
const SECRET_RULE = 'must be 20 to 256 printable ASCII characters without spaces';
const ORIGIN_RULE = 'must be origins like https://app.example.com';

/** Every variable the server reads, in the order the README lists them. */
const VARIABLES = {
  PORT: wholeNumber(0, 65535, { default: '3000', meaning: 'port to listen on' }),
  HOST: text({
    default: '127.0.0.1',
    meaning: 'address to listen on (`0.0.0.0` to accept remote connections)',
  }),
  DATABASE_URL: postgresUrl({ meaning: '`postgres://…`; unset means the embedded PGlite database in `DATA_DIR`' }),
  DATABASE_POOL_SIZE: wholeNumber(1, 1000, {
    default: '10',
    meaning:
      'connections each server process keeps to PostgreSQL (it uses 2 more to listen); `/metrics` reports it as `db_pool_max_connections`',
  }),
  DATABASE_LISTEN_URL: postgresUrl({
    shown: "`DATABASE_URL`'s",
    meaning:
      'where the two LISTEN connections go (revoked tokens, change events): behind PgBouncer in transaction mode, which drops a LISTEN, point this at PostgreSQL itself or a session-mode pool (see [docs/scaling.md](scaling.md))',
  }),
  DATA_DIR: text({ default: './data', meaning: 'the embedded database and `dev-token`; one server per folder' }),
  DEPLOYMENT: oneOf(['production', 'development'], {
    default: 'development',
    meaning:
      "`production` refuses to start (server and CLI) without `DATABASE_URL`: the embedded database is one process's own, and a replica would silently keep its accounts apart; `deploy/user-accounts.env` sets it",
  }),
  API_TOKENS: list((token, i) => (secretIsBad(token) ? `entry ${i + 1} ${SECRET_RULE}` : undefined), {
    meaning:
      'comma-separated accepted tokens (20–256 printable characters each), site `default`, the scopes `read`, `write`, `verify` and `events` (not `export` nor `impersonate`). Optional: on PostgreSQL the server also starts with tokens minted by `cli token create` (with neither, it refuses to start and says so); on the embedded database without it, a dev token is minted',
  }),
  LOG_LEVEL: oneOf(LOG_LEVELS, {
    default: 'info',
    meaning: '`fatal`, `error`, `warn`, `info`, `debug`, `trace` or `silent`',
  }),
  LOG_FORMAT: oneOf(['json', 'pretty'], {
    shown: 'auto',
    meaning:
      '`json` (one JSON object a line) or `pretty` (readable lines); unset: pretty in a terminal, JSON otherwise',
  }),
  RATE_LIMIT: rateLimit('all', {
    default: DEFAULT_RATE_LIMIT,
    meaning: "every token's budget: `N/Ws`, `N/Wm` or `N/Wh` (window 1 s to 24 h)",
  }),
  // The default is applied in loadConfig: RATE_LIMIT_CREATE, its old name, may stand in for it.
  RATE_LIMIT_HASH: rateLimit('hash', {
    shown: `\`${DEFAULT_RATE_LIMIT_HASH}\``,
    meaning:
      "every token's budget of password hashes (creates, password changes, verifies), on top of `RATE_LIMIT`; `off` for none. `RATE_LIMIT_CREATE` is its deprecated old name",
  }),
  RATE_LIMIT_CREATE: rateLimit('hash', { meaning: '' }),
  RATE_LIMIT_IMPORT: rateLimit('import', {
    default: DEFAULT_RATE_LIMIT_IMPORT,
    meaning:
      "rows a site may import (every token of it together; the operator's `cli import` is not counted); `off` for none",
  }),
  AUTH_FAILURE_LIMIT: failureWindow('100/10s', true, {
    default: DEFAULT_AUTH_FAILURE_LIMIT,
    meaning: 'failed authentications per client address and window, in each process, before 429; `off` for none',
  }),
  // Nobody by default: X-Forwarded-For from any other peer is the client's own writing.
  TRUSTED_PROXIES: variable(parseTrustedProxies, {
    meaning:
      "comma-separated addresses or CIDR blocks of your load balancers (`127.0.0.1`, `10.0.0.0/8`): from these peers only, the client address (for `AUTH_FAILURE_LIMIT`) is the right-most `X-Forwarded-For` entry that is not itself one of them; unset, nobody's header is believed and the client is the connection's peer",
  }),
  REDIS_URL: variable((raw) => (/^rediss?:\/\/.+/.test(raw) ? raw : problem('must be a redis:// or rediss:// URL')), {
    meaning: "`redis://…`: keep rate-limit counters and verify's failure counts in Redis instead of the database",
  }),
  // Unset: the number of cores (applied in the schema's transform, never written into the docs).
  HASH_CONCURRENCY: wholeNumber(1, 256, {
    shown: 'cores',
    meaning:
      "argon2id hashes computed at once (19 MiB each); libuv's thread pool is sized to it plus 4 unless `UV_THREADPOOL_SIZE` is set",
  }),
  HASH_QUEUE: wholeNumber(0, 10_000, {
    default: '64',
    meaning:
      'hashes that may wait for a slot, every site together; when full, the site with the most waiting gets the 503',
  }),
  HASH_COSTLY_CONCURRENCY: wholeNumber(1, 64, {
    default: '1',
    meaning:
      "imported hashes costing more than 8× `PASSWORD_HASH`'s CPU or 2× its memory checked at once, in a lane of their own that never takes the shared slots",
  }),
  LONG_POLLS_PER_TOKEN: wholeNumber(1, 10_000, {
    default: '8',
    meaning:
      '`GET /api/1/events?wait=` long-polls one token may have waiting on one server; one more is 429 `too_many_long_polls`',
  }),
  LONG_POLLS_PER_SITE: wholeNumber(1, 100_000, { default: '32', meaning: 'the same, every token of a site together' }),
  HEAVY_READS_PER_SITE: wholeNumber(1, 1_000, {
    default: '1',
    meaning:
      "a site's list pages and person's-data reads running at once on one server (its exports the same number, apart); eight times as many more wait up to 2 s, then 429 `rate_limited`. 1 by default: on 2 cores, two of one site's 2 MB list pages at once took another site's login p50 past 3× its quiet one (issue 43's stop), while waiting is cheap",
  }),
  MAX_ACCOUNTS_PER_SITE: wholeNumber(0, 2_000_000_000, {
    default: '0',
    shown: '`0` (none)',
    meaning: 'the most accounts a site may hold; create and import beyond it are 403 `account_limit_reached`',
  }),
  CORS_ORIGINS: list(
    (origin) => (/^https?:\/\/[^/\s]+$/.test(origin) ? undefined : `entries ${ORIGIN_RULE} (got "${origin}")`),
    {
      meaning:
        'comma-separated browser origins allowed to call `/api/` (e.g. `https://app.example.com`); unset, no CORS headers',
    },
  ),
  DNS_RESOLVER: list(
    (server) =>
      /^(\d{1,3}(\.\d{1,3}){3}|\[[0-9a-fA-F:]+\])(:\d{1,5})?$/.test(server)
        ? undefined
        : `entries must be an IPv4 address or a bracketed IPv6 address, each with an optional :PORT (got "${server}")`,
    {
      meaning:
        "comma-separated DNS servers (`10.0.0.2`, `127.0.0.1:5353`, `[2001:db8::53]:53`) that `org/domain/verify` asks for TXT records; unset, the system's resolvers",
    },
  ),
  METRICS_TOKEN: variable((raw) => (secretIsBad(raw) ? problem(SECRET_RULE) : raw), {
    meaning: 'turns on `GET /metrics` (Prometheus), for `Authorization: Bearer <METRICS_TOKEN>` only; unset, it is 404',
  }),
  REPLICA_NAME: text({
    shown: "the host's name",
    meaning:
      "this server's name among a deployment's replicas (`app1`), the `replica` label of every series of `GET /metrics`, so that scrapes through a load balancer say which replica answered; unset, the host's name",
  }),
  // The SDK reads the other OTEL_* variables itself; these decide whether it is loaded at all.
  OTEL_EXPORTER_OTLP_ENDPOINT: text({
    meaning:
      'turns on OpenTelemetry traces, exported by OTLP/HTTP to this collector (`http://collector:4318`; traces go to its `/v1/traces`); unset (and `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` unset), the SDK is never loaded and nothing is traced. The SDK reads the other standard variables itself: `OTEL_EXPORTER_OTLP_PROTOCOL` (`http/protobuf`, or `http/json`), `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_TRACES_SAMPLER`, `OTEL_BSP_SCHEDULE_DELAY`, `OTEL_PROPAGATORS` …',
  }),
  OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: text({
    meaning:
      'the same for traces alone, as a full URL (`http://collector:4318/v1/traces`); wins over `OTEL_EXPORTER_OTLP_ENDPOINT`',
  }),
  OTEL_SDK_DISABLED: variable((raw) => raw.toLowerCase() === 'true', {
    default: 'false',
    meaning: '`true` keeps tracing off even with an endpoint set',
  }),
  OTEL_SERVICE_NAME: text({ default: 'user-accounts', meaning: "the traces' `service.name`" }),
  PASSWORD_HASH: variable(parsePasswordHash, {
    shown: `\`${DEFAULT_PASSWORD_HASH}\``,
    meaning:
      "argon2id cost of new hashes (memory KiB, passes, lanes); below OWASP's minimum it refuses to start; older hashes are replaced at their next verify",
  }),
  PASSWORD_HASH_PROFILE: oneOf(['owasp', 'test'], {
    default: 'owasp',
    meaning: `\`test\` is for test suites only: new hashes cost \`${TEST_PASSWORD_HASH}\` (still argon2id, far below OWASP's minimum, about 0.5 ms each); refused with \`DEPLOYMENT=production\` and with \`PASSWORD_HASH\`, and logged as a warning at start`,
  }),
  VERIFY_LIMIT: failureWindow('10/15m', false, {
    shown: '`10/15m`',
    meaning: 'failed verifies per site and email or id before a lock (1 min, doubling up to a day)',
  }),
  VERIFY_LIMIT_ADDRESS: failureWindow('10/15m', false, {
    shown: '`100/1h`',
    meaning: 'failed verifies per site and `X-End-User-IP` address before a lock until the window ends',
  }),
  BREACHED_PASSWORDS_URL: variable(
    (raw) => (/^https?:\/\/[^\s]+$/.test(raw) ? raw : problem('must be an http:// or https:// URL')),
    {
      meaning:
        'turns on breached-password screening: the base of a Have I Been Pwned–compatible range API (`https://api.pwnedpasswords.com`, or your mirror, see [docs/login.md](login.md#breached-passwords)); only the first 5 hex digits of the SHA-1 are sent. create, a password update, a reset and import refuse a breached password (400 `breached`); verify marks the account. Unset: off',
    },
  ),
  BREACHED_PASSWORDS_MIN_COUNT: wholeNumber(1, 1_000_000_000, {
    default: '1',
    meaning: 'a password the range API has seen at least this many times is breached',
  }),
  BREACHED_PASSWORDS_TIMEOUT_MS: wholeNumber(100, 10_000, {
    default: '2000',
    meaning:
      'how long a range answer may take (waiting for a free slot included) before it counts as unavailable; answers are cached (4,096 ranges, 1 h)',
  }),
  BREACHED_PASSWORDS_FAIL: oneOf(['open', 'closed'], {
    default: 'open',
    meaning:
      'when the range API does not answer in time: `open` accepts the password (and logs it), `closed` refuses create, update, reset and import with 503 `breach_check_unavailable`; verify never waits on it and is never refused for it',
  }),
  FACTOR_ENCRYPTION_KEY: variable(parseKeyRing, {
    meaning:
      'keys sealing second-factor secrets (AES-256-GCM): `ID:KEY` with a 32-byte base64 key (`cli key generate` prints one on its last line: `FACTOR_ENCRYPTION_KEY=$(cli key generate)`); to rotate, put a new key first (`k2:…,k1:…`): new secrets use the first, the others still open the older ones. Unset: the embedded database keeps a key of its own in `DATA_DIR/factor-key`; on PostgreSQL the server warns at start and factor operations that need a secret answer 503 `factors_not_configured` (no `Retry-After`) until it restarts with the key. The same keys seal webhook signing secrets, the client secrets of sign-in providers and access-token signing keys, and (through HKDF, one key per purpose) key the HMACs of what a copy of the database must not give away: Idempotency-Key fingerprints, phone codes, passkey decoys, the login tickets of a second step; unset on PostgreSQL, those use a key kept in the database, said at start (see [docs/security.md](security.md#secrets-a-copy-of-the-database-does-not-give-away))',
  }),
  PUBLIC_URL: variable(
    (raw) =>
      /^https?:\/\/[^\s/]+(\/[^\s]*)?$/.test(raw)
        ? raw.replace(/\/+$/, '')
        : problem('must be an http:// or https:// URL'),
    {
      shown: 'http://HOST:PORT',
      meaning:
        'the address clients and verifiers reach this service at (`https://accounts.example.com`, behind your load balancer): the default `iss` of access tokens, whose keys it publishes at `PUBLIC_URL/.well-known/jwks.json`; unset, `http://HOST:PORT` (`127.0.0.1` for a wildcard `HOST`), which a production deployment should not rely on (it warns at start)',
    },
  ),
  ACCESS_TOKEN_ISSUER: variable(
    (raw) =>
      /^[\x21-\x7e]{1,200}$/.test(raw) ? raw : problem('must be 1 to 200 printable characters without spaces (a URL)'),
    {
      shown: "PUBLIC_URL's",
      meaning:
        "sessions' access tokens' `iss` claim, what a verifier checks it against (`verifyAccessToken`'s `issuer`)",
    },
  ),
  ACCESS_TOKEN_LIFETIME: wholeNumber(10, MAX_ACCESS_TOKEN_LIFETIME_SECONDS, {
    default: String(DEFAULT_ACCESS_TOKEN_LIFETIME_SECONDS),
    meaning: `seconds a session's access token (JWT) is valid, 10 to ${MAX_ACCESS_TOKEN_LIFETIME_SECONDS}: a revoked session's access tokens stay valid until they expire (\`session/verify\` refuses it at once); its signing keys are rotated with \`cli signing-keys rotate\``,
  }),
  REQUEST_TIMEOUT_MS: wholeNumber(100, 600_000, {
    default: '10000',
    meaning:
      "a request not done by then gets 503 (a write not yet committing is rolled back); also PostgreSQL's `statement_timeout`",
  }),
  SHUTDOWN_DRAIN_MS: wholeNumber(0, 60_000, {
    default: '0',
    meaning:
      'after `SIGTERM`, keep serving this long with `/readyz` answering 503 and every answer closing its connection, so that a load balancer takes the server out before it stops listening (`deploy/` uses 3000)',
  }),
  // At least the 3 days webhook deliveries are retried for: a retry must find its event.
  EVENTS_RETENTION: retention(3, 3650, false, {
    default: '7d',
    meaning: 'how long change events are kept for the feed and webhook retries: `Nd` or `Nh`, 3 days to 10 years',
  }),
  // A year: an incident is often found months after it began, and PCI DSS (10.5.1) asks for 12
  // months of audit history; rows name accounts, so not for ever (a data minimum) unless told.
  AUDIT_RETENTION: retention(1, 36_500, true, {
    default: '365d',
    meaning:
      'how long audit rows are kept: `Nd` or `Nh`, 1 day to 100 years, or `off` (for ever); each server deletes older rows every 10 minutes, 10,000 a statement',
  }),
  WEBHOOK_ALLOW_PRIVATE: trueOrFalse({
    default: 'false',
    meaning:
      '`true` lets webhooks go to `http://` and to loopback, private and link-local addresses (tests, a receiver on the same network); otherwise only `https://` to public addresses, checked at every attempt after DNS',
  }),
  WEBHOOK_ENDPOINT_CONCURRENCY: wholeNumber(1, 256, {
    default: '4',
    meaning:
      "deliveries to one webhook endpoint in flight at once, all servers together (1–256); sites and their endpoints are served in turn, so an endpoint that hangs holds at most this many of a server's 16 sending slots",
  }),
  MESSAGE_ACCOUNT_HOURLY_LIMIT: wholeNumber(1, 1000, {
    default: '5',
    meaning:
      'messages we send one account in an hour (`send` on user/ticket and org/invitation/create; 1–1000); beyond it 429 `message_limit_reached`',
  }),
  MESSAGE_SITE_DAILY_LIMIT: wholeNumber(1, 10_000_000, {
    default: '10000',
    meaning:
      "messages we send for one site in a day, every channel (1–10000000; a site's own `cli site set --daily-limit` replaces it); beyond it 429 `message_limit_reached`",
  }),
  MESSAGE_TIMEOUT: wholeNumber(1, 60, {
    default: '15',
    meaning:
      "seconds the mail or text transport has for each step of an attempt (connection, greeting, each SMTP reply; the text API's answer; 1–60); a message a killed server was sending is sent again by another once four times this plus 5 s has passed since it began",
  }),
  WEBHOOK_TIMEOUT: wholeNumber(1, 30, {
    default: '10',
    meaning:
      'seconds a webhook endpoint has to answer an attempt (1–30); a stopping server waits up to this long for its attempts in flight (after SHUTDOWN_DRAIN_MS and up to 10 s for requests: keep a supervisor’s stop timeout above the sum), and an attempt of a killed server is sent again once this long plus 5 s has passed since it began',
  }),
};
/** Names the docs leave out: RATE_LIMIT_CREATE is a deprecated alias, said under RATE_LIMIT_HASH. */
export const UNDOCUMENTED = new Set(['RATE_LIMIT_CREATE']);

const OWASP_BASELINE = parsePasswordHash(DEFAULT_PASSWORD_HASH) as Argon2Params;
const TEST_HASH = parsePasswordHash(TEST_PASSWORD_HASH, { floor: false }) as Argon2Params;

const schema = z.object(VARIABLES).transform((v, ctx) => {
  // Checked once every variable is valid on its own.
  const refuse = (name: keyof typeof VARIABLES, message: string) =>
    ctx.issues.push({ code: 'custom', path: [name], message, input: v });
  if (v.DATABASE_LISTEN_URL !== undefined && v.DATABASE_URL === undefined)
    refuse('DATABASE_LISTEN_URL', 'needs DATABASE_URL (the embedded database listens in process)');
  if (v.DEPLOYMENT === 'production' && v.DATABASE_URL === undefined)
    refuse(
      'DEPLOYMENT',
      'is production, which needs DATABASE_URL (postgres://…): the embedded database in DATA_DIR is for development, one process on one machine',
    );
  // The test profile's cheap hashes would let anyone who reads the database try passwords fast.
  if (v.PASSWORD_HASH_PROFILE === 'test' && v.DEPLOYMENT === 'production')
    refuse(
      'PASSWORD_HASH_PROFILE',
      `is test, which DEPLOYMENT=production refuses: its hashes (${TEST_PASSWORD_HASH}) are far below OWASP's minimum; unset it (new hashes then use PASSWORD_HASH, default ${DEFAULT_PASSWORD_HASH})`,
    );
  if (v.PASSWORD_HASH_PROFILE === 'test' && v.PASSWORD_HASH !== undefined)
    refuse(
      'PASSWORD_HASH_PROFILE',
      'is test, which sets the cost of new hashes itself; unset PASSWORD_HASH or the profile',
    );
  // RATE_LIMIT_CREATE was the budget of creates; it now bounds every hash, under a name that says so.
  const warnings: string[] = [];
  if (v.PASSWORD_HASH_PROFILE === 'test')
    warnings.push(
      `PASSWORD_HASH_PROFILE is test: new password hashes are ${TEST_PASSWORD_HASH}, far below OWASP's minimum; for test suites only`,
    );
  if (v.RATE_LIMIT_CREATE !== undefined && v.RATE_LIMIT_HASH !== undefined)
    refuse('RATE_LIMIT_CREATE', 'is the old name of RATE_LIMIT_HASH; set only RATE_LIMIT_HASH');
  else if (v.RATE_LIMIT_CREATE !== undefined)
    warnings.push(
      'RATE_LIMIT_CREATE is deprecated: it is now the budget of every password hash (creates and password ' +
        'changes); rename it RATE_LIMIT_HASH',
    );
  if (v.DEPLOYMENT === 'production' && v.PUBLIC_URL === undefined && v.ACCESS_TOKEN_ISSUER === undefined)
    warnings.push(
      `PUBLIC_URL is not set: access tokens name their issuer ${defaultPublicUrl(v.HOST, v.PORT)}, this server's own address; set PUBLIC_URL to the address verifiers reach it at`,
    );
  const verifyLimit = (policy: LockoutPolicy, set: { limit: number; windowSeconds: number } | null | undefined) => ({
    ...policy,
    ...set,
  });
  // An address is locked until its window ends.
  const address = verifyLimit(DEFAULT_VERIFY_LIMITS.address, v.VERIFY_LIMIT_ADDRESS);
  const endpoint = v.OTEL_EXPORTER_OTLP_TRACES_ENDPOINT ?? v.OTEL_EXPORTER_OTLP_ENDPOINT;
  return {
    port: v.PORT,
    host: v.HOST,
    /** postgres:// URL; absent means the embedded PGlite database in `dataDir`. */
    databaseUrl: v.DATABASE_URL,
    databaseListenUrl: v.DATABASE_LISTEN_URL,
    databasePoolSize: v.DATABASE_POOL_SIZE,
    dataDir: v.DATA_DIR,
    deployment: v.DEPLOYMENT,
    /** Tokens accepted as configured by the operator; never logged. */
    apiTokens: v.API_TOKENS ?? [],
    logLevel: v.LOG_LEVEL,
    logFormat: v.LOG_FORMAT,
    rateLimits: {
      all: v.RATE_LIMIT as Policy, // never null: "all" cannot be off
      hash:
        v.RATE_LIMIT_HASH === undefined && v.RATE_LIMIT_CREATE === undefined
          ? parseRateLimit('hash', DEFAULT_RATE_LIMIT_HASH)
          : (v.RATE_LIMIT_HASH ?? v.RATE_LIMIT_CREATE ?? null),
      import: v.RATE_LIMIT_IMPORT,
    } as RateLimitConfig,
    /** What the server logs at start about its configuration without refusing it (deprecated names). */
    warnings,
    redisUrl: v.REDIS_URL,
    hashConcurrency: v.HASH_CONCURRENCY ?? availableParallelism(),
    hashQueue: v.HASH_QUEUE,
    hashCostlyConcurrency: v.HASH_COSTLY_CONCURRENCY,
    longPolls: { perToken: v.LONG_POLLS_PER_TOKEN, perSite: v.LONG_POLLS_PER_SITE },
    heavyReadsPerSite: v.HEAVY_READS_PER_SITE,
    maxAccountsPerSite: v.MAX_ACCOUNTS_PER_SITE === 0 ? null : v.MAX_ACCOUNTS_PER_SITE,
    corsOrigins: v.CORS_ORIGINS ?? [],
    metricsToken: v.METRICS_TOKEN,
    /** The `replica` label of every metric series (REPLICA_NAME, else the host's name). */
    replicaName: v.REPLICA_NAME ?? hostname(),
    /** Traces exported by OTLP when an endpoint is set and the SDK is not disabled; else off. */
    tracing: endpoint === undefined || v.OTEL_SDK_DISABLED ? undefined : { serviceName: v.OTEL_SERVICE_NAME },
    /** Breached-password screening (BREACHED_PASSWORDS_*); undefined: off. */
    breachedPasswords:
      v.BREACHED_PASSWORDS_URL === undefined
        ? undefined
        : {
            url: v.BREACHED_PASSWORDS_URL,
            threshold: v.BREACHED_PASSWORDS_MIN_COUNT,
            timeoutMs: v.BREACHED_PASSWORDS_TIMEOUT_MS,
            failClosed: v.BREACHED_PASSWORDS_FAIL === 'closed',
          },
    /** Keys of second-factor secrets; undefined: unset (the embedded database mints its own). */
    factorKeys: v.FACTOR_ENCRYPTION_KEY,
    /** The DNS servers domain verification asks (DNS_RESOLVER); empty: the system's. */
    dnsResolvers: v.DNS_RESOLVER ?? [],
    /** The address clients reach the service at, without a trailing slash. */
    publicUrl: v.PUBLIC_URL ?? defaultPublicUrl(v.HOST, v.PORT),
    /** Sessions' access tokens: their `iss` and lifetime in seconds. */
    accessTokens: {
      issuer: v.ACCESS_TOKEN_ISSUER ?? v.PUBLIC_URL ?? defaultPublicUrl(v.HOST, v.PORT),
      lifetimeSeconds: v.ACCESS_TOKEN_LIFETIME,
    },
    requestTimeoutMs: v.REQUEST_TIMEOUT_MS,
    shutdownDrainMs: v.SHUTDOWN_DRAIN_MS,
    authFailureLimit: v.AUTH_FAILURE_LIMIT,
    trustedProxies: v.TRUSTED_PROXIES ?? TRUST_NOBODY,
    /** The cost of new hashes: PASSWORD_HASH, or the test profile's. */
    passwordHash: (v.PASSWORD_HASH_PROFILE === 'test' ? TEST_HASH : v.PASSWORD_HASH) ?? OWASP_BASELINE,
    /**
     * What an imported hash's cost is compared with to choose its lane: the cost of new hashes,
     * except under the test profile, which keeps production's lanes (OWASP's baseline).
     */
    passwordHashCostReference: (v.PASSWORD_HASH ?? OWASP_BASELINE) as Argon2Params,
    verifyLimits: {
      identifier: verifyLimit(DEFAULT_VERIFY_LIMITS.identifier, v.VERIFY_LIMIT),
      address: { ...address, lockSeconds: address.windowSeconds, maxLockSeconds: address.windowSeconds },
    },
    eventsRetentionMs: v.EVENTS_RETENTION as number, // never off
    /** How long audit rows are kept, in ms; null: for ever. */
    auditRetentionMs: v.AUDIT_RETENTION,
    webhookAllowPrivate: v.WEBHOOK_ALLOW_PRIVATE,
    webhookEndpointConcurrency: v.WEBHOOK_ENDPOINT_CONCURRENCY,
    webhookTimeoutMs: v.WEBHOOK_TIMEOUT * 1000,
    messageBudgets: { accountHourly: v.MESSAGE_ACCOUNT_HOURLY_LIMIT, siteDaily: v.MESSAGE_SITE_DAILY_LIMIT },
    messageTimeoutMs: v.MESSAGE_TIMEOUT * 1000,
  };
});
export type Config = z.output<typeof schema>;

/** PUBLIC_URL's default: the address the server listens on, a wildcard HOST read as the loopback. */
function defaultPublicUrl(host: string, port: number): string {
  const shown = ['0.0.0.0', '::', ''].includes(host) ? '127.0.0.1' : host;
  return `http://${shown.includes(':') ? `[${shown}]` : shown}:${port}`;
}
/** The variables in the README's order, each with its schema (whose docs are in `docs`). */
export const variables = Object.entries(VARIABLES) as [string, z.ZodType][];

export class ConfigError extends Error {
  readonly problems: string[];
  constructor(problems: string[]) {
    super(`Invalid configuration:\n${problems.map((p) => `  - ${p}`).join('\n')}`);
    this.name = 'ConfigError';
    this.problems = problems;
  }
}

export function loadConfig(env: Record<string, string | undefined> = process.env): Config {
  // A blank variable is an unset one.
  const given = Object.keys(VARIABLES).flatMap((name) => {
    const raw = env[name]?.trim();
    return raw === undefined || raw === '' ? [] : [[name, raw]];
  });
  const parsed = schema.safeParse(Object.fromEntries(given));
  if (!parsed.success) throw new ConfigError(parsed.error.issues.map((i) => `${String(i.path[0])} ${i.message}`));
  // Relative to where the user typed the command (pnpm runs scripts in the package folder).
  return { ...parsed.data, dataDir: resolve(env.INIT_CWD ?? process.cwd(), parsed.data.dataDir) };
}

/**
 * libuv's thread pool runs every hash (@node-rs/argon2, @node-rs/bcrypt, scrypt, PBKDF2), and the
 * file and DNS work too: 4 threads unless told, whatever HASH_CONCURRENCY says, so more hashes
 * than 4 would never run at once and would hold up the rest. Sized from the configuration before
 * anything starts the pool; an operator's own UV_THREADPOOL_SIZE stays.
 */
export function sizeThreadPool(config: Pick<Config, 'hashConcurrency' | 'hashCostlyConcurrency'>): void {
  const hashes = config.hashConcurrency + config.hashCostlyConcurrency;
  process.env.UV_THREADPOOL_SIZE ??= String(Math.min(1024, hashes + 4));
}

/**
 * `cli provider set`'s client secret when no --client-secret-file is given: the CLI's own
 * process reads it (never a server's configuration: no server keeps or needs it).
 */
export function providerClientSecret(env: Record<string, string | undefined> = process.env): string | undefined {
  const raw = env.PROVIDER_CLIENT_SECRET;
  return raw === undefined || raw.trim() === '' ? undefined : raw;
}

/**
 * `cli site set`'s mail password and text API key when no --mail-password-file or --sms-key-file
 * is given (MAIL_TRANSPORT_PASSWORD, SMS_TRANSPORT_KEY): the CLI's own process reads them, as
 * PROVIDER_CLIENT_SECRET; no server keeps or needs them (they are sealed in the database).
 */
export function senderSecrets(env: Record<string, string | undefined> = process.env) {
  const of = (raw: string | undefined) => (raw === undefined || raw.trim() === '' ? undefined : raw);
  return { mailPassword: of(env.MAIL_TRANSPORT_PASSWORD), smsKey: of(env.SMS_TRANSPORT_KEY) };
}
