// Issue 57, G6 and G7: what a copy of the database gives away. Server processes and the CLI as an
// operator runs them, on the embedded database (its key in DATA_DIR/factor-key, beside it) and on
// PostgreSQL with FACTOR_ENCRYPTION_KEY; the "copy" is every table read with SQL, without the
// deployment's key. Nothing read there may sign a webhook delivery, mint a second-step ticket,
// or hold a secret the service handed out (tokens, tickets, codes, TOTP secrets, signing secrets).
import { createHmac, createPrivateKey, createPublicKey, sign, verify } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createClient, type Problem } from '@user-accounts/client';
import { openPglite } from '@user-accounts/server/db';
import { processes, type Running } from '@user-accounts/server/testing/processes';
import { mintToken } from '@user-accounts/server/tokens';
import postgres from 'postgres';
import { Webhook } from 'standardwebhooks';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { nowSeconds, totpAt } from './factors-suite.ts';
import { waitUntil } from './faults/load.ts';
import { issuedTicket } from './harness.ts';
import { receiverOn } from './receiver.ts';
import {
  GENEROUS_LIMITS,
  migratedPostgresDatabase,
  postgresUnavailable,
  TEST_FACTOR_KEY,
  TEST_HASHES,
} from './targets.ts';
import { SoftAuthenticator } from './webauthn/soft-authenticator.ts';

const procs = processes();
const cleanups: (() => Promise<void>)[] = [];
afterAll(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
  procs.cleanup();
});

type Rows = Record<string, unknown>[];
type Sql = (query: string, params?: unknown[]) => Promise<Rows>;

interface Backend {
  name: string;
  skip: string | undefined;
  /** The server's environment, and how to read its database as a copy would (the server stopped when it must be). */
  setUp(): Promise<{
    env: Record<string, string>;
    withDatabase<T>(stop: () => Promise<void>, work: (sql: Sql) => Promise<T>): Promise<T>;
  }>;
}

/** base32 (RFC 4648), as a TOTP secret is given. */
const base32Bytes = (text: string) => {
  let bits = '';
  for (const ch of text.replace(/=+$/, ''))
    bits += 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567'.indexOf(ch).toString(2).padStart(5, '0');
  return Buffer.from((bits.match(/.{8}/g) ?? []).map((b) => Number.parseInt(b, 2)));
};

/** Whether `d` (32 bytes) is the private scalar of the P-256 public key (x, y): it signs what the public key verifies. */
function isPrivateKeyOf(d: Buffer, publicJwk: { x: string; y: string }): boolean {
  try {
    const key = createPrivateKey({
      key: { kty: 'EC', crv: 'P-256', x: publicJwk.x, y: publicJwk.y, d: d.toString('base64url') },
      format: 'jwk',
    });
    const message = Buffer.from('signed by a copy of the database');
    const publicKey = createPublicKey({ key: { kty: 'EC', crv: 'P-256', ...publicJwk }, format: 'jwk' });
    return verify('sha256', message, publicKey, sign('sha256', message, key));
  } catch {
    return false;
  }
}

const pgSkip = await postgresUnavailable();
const backends: Backend[] = [
  {
    name: 'embedded database',
    skip: undefined,
    async setUp() {
      const dir = await procs.migratedDataDir();
      return {
        env: { DATA_DIR: dir },
        // The embedded database has one user at a time: the server stops, the copy is read, the server starts again.
        async withDatabase(stop, work) {
          await stop();
          const database = await openPglite(dir);
          try {
            return await work(async (query, params = []) => [...(await database.sql.unsafe(query, params as never[]))]);
          } finally {
            await database.close();
          }
        },
      };
    },
  },
  {
    name: 'PostgreSQL',
    skip: pgSkip,
    async setUp() {
      const database = await migratedPostgresDatabase();
      const sql = postgres(database.url, { max: 1, onnotice: () => {} });
      cleanups.push(async () => {
        await sql.end();
        await database.drop();
      });
      return {
        env: { DATABASE_URL: database.url, FACTOR_ENCRYPTION_KEY: TEST_FACTOR_KEY },
        withDatabase: (_stop, work) =>
          work(async (query, params = []) => [...(await sql.unsafe(query, params as never[]))]),
      };
    },
  },
];

/** A deployment: a server process, the CLI, a token of every scope on `default`, and its database read as a copy. */
async function deploy(backend: Backend) {
  const token = mintToken();
  const setup = await backend.setUp();
  const env: Record<string, string> = {
    ...setup.env,
    ...TEST_HASHES,
    ...GENEROUS_LIMITS,
    API_TOKENS: token,
    WEBHOOK_ALLOW_PRIVATE: 'true',
  };
  let server: Running = procs.server(env);
  await server.ready;
  const stop = async () => {
    server.child.kill('SIGTERM');
    await server.exited;
  };
  const deployment = {
    env,
    client: () => createClient({ baseUrl: server.baseUrl, token }),
    cli: (args: string[], vars: Record<string, string> = {}) => procs.cli(args, { ...env, ...vars }),
    /** Reads (or changes) the database as a copy of it would, then has the server running again. */
    async copy<T>(work: (sql: Sql) => Promise<T>): Promise<T> {
      let stopped = false;
      const result = await setup.withDatabase(async () => {
        stopped = true;
        await stop();
      }, work);
      if (stopped) await deployment.restart(false);
      return result;
    },
    /** A new server process on the same database (the old one stopped first unless it is already). */
    async restart(running = true) {
      if (running) await stop();
      server = procs.server(env);
      await server.ready;
    },
    server: () => server,
  };
  return deployment;
}

/** An account with a password and a confirmed TOTP factor; its secret. */
async function withTotp(client: ReturnType<typeof createClient>, email: string, password: string) {
  const created = await client.POST('/api/1/user/create', { body: { email, name: 'Ada', password } });
  expect(created.response.status, JSON.stringify(created.error)).toBe(201);
  const userId = created.data!.result._userId;
  const added = (await client.POST('/api/1/user/factor/totp', { body: { _userId: userId } })).data!.result;
  const confirmed = await client.POST('/api/1/user/factor/confirm', {
    body: { _userId: userId, factorId: added.factorId, code: totpAt(added.secret, nowSeconds()) },
  });
  expect(confirmed.response.status).toBe(200);
  return { userId, secret: added.secret, recoveryCodes: confirmed.data!.result.recoveryCodes ?? [] };
}

/**
 * The account's second-factor generation, as the server's login-ticket.ts computes it: what a
 * copy of the database gives anyone who read the (published) source.
 */
const GENERATION = `select
  (select coalesce(max(last_step), 0)::text || ':' || coalesce(floor(extract(epoch from max(last_used_at)) * 1000), 0)::text
     from user_factors where user_id = $1)
  || ':' || (select count(*)::text from recovery_codes where user_id = $1 and used_at is not null)
  || ':' || coalesce((select left(md5(coalesce(password_hash, '')), 12) from users where id = $1), '') as g`;

/** Every value of every table of the public schema, as text (a row's JSON). */
async function everyRow(sql: Sql): Promise<{ table: string; text: string }[]> {
  const tables = await sql(`select tablename from pg_tables where schemaname = 'public' order by tablename`);
  const all: { table: string; text: string }[] = [];
  for (const { tablename } of tables) {
    const found = await sql(`select row_to_json(t)::text as row from "${tablename as string}" t`);
    for (const r of found) all.push({ table: tablename as string, text: r.row as string });
  }
  return all;
}

/** Each string in a JSON row's values (nested too), and each run of base64/base64url/hex characters in them. */
function candidatesOf(rowJson: string): string[] {
  const strings: string[] = [];
  const walk = (v: unknown) => {
    if (typeof v === 'string') strings.push(v);
    else if (Array.isArray(v)) v.forEach(walk);
    else if (v !== null && typeof v === 'object') Object.values(v).forEach(walk);
  };
  const parsed = JSON.parse(rowJson) as Record<string, unknown>;
  for (const value of Object.values(parsed)) {
    walk(value);
    // A jsonb or text column holding JSON: its own strings too.
    if (typeof value === 'string' && /^[[{]/.test(value)) {
      try {
        walk(JSON.parse(value));
      } catch {}
    }
  }
  const runs = strings.flatMap((s) => s.match(/[A-Za-z0-9+/_=-]{16,}/g) ?? []);
  return [...new Set([...strings, ...runs, ...runs.flatMap((r) => r.split(/[._]/))])].filter((s) => s.length >= 16);
}

/** The bytes a stored text may stand for as a key: base64/base64url, hex, or the text itself. */
function keyForms(candidate: string): Buffer[] {
  const forms = [Buffer.from(candidate)];
  if (/^[A-Za-z0-9+/_-]+=*$/.test(candidate)) forms.push(Buffer.from(candidate, 'base64'));
  if (/^(?:[0-9a-f]{2})+$/i.test(candidate)) forms.push(Buffer.from(candidate, 'hex'));
  return forms;
}

/** Populates a deployment through the CLI and the API; answers what it handed out and what the copy's checks need. */
async function populate(d: Awaited<ReturnType<typeof deploy>>) {
  /** What the service handed out in the clear: none may be stored, whole or inside a value. */
  const given = new Map<string, string>();
  /** Keys in bytes: no stored value may be one, in base64, base64url, hex or as it is. */
  const keys = new Map<string, Buffer>();
  const give = (what: string, secret: string | undefined) => {
    expect(secret, what).toEqual(expect.any(String));
    given.set(secret!, what);
  };
  const ok = (answer: { response: Response; error?: unknown }, status = 200) =>
    expect(answer.response.status, `${answer.response.url}: ${JSON.stringify(answer.error)}`).toBe(status);
  const cli = async (args: string[]) => {
    const ran = await d.cli(args);
    expect(ran.code, ran.stderr).toBe(0);
    return ran.stdout;
  };
  // The CLI: tokens, a console link, a webhook, the site's relying party.
  const minted = await cli([
    'token',
    'create',
    '--site',
    'default',
    '--scopes',
    'read,write,verify,impersonate',
    '--label',
    'every table',
  ]);
  const apiToken = /(ua_[A-Za-z0-9_-]{43})/.exec(minted)?.[1];
  give('an API token', apiToken);
  give(
    'a console token',
    /#token=([^\s]+)/.exec(await cli(['console', '--site', 'default', '--as', 'Ada Admin']))?.[1],
  );
  const receiver = await receiverOn(cleanups);
  const whsec = /(whsec_[A-Za-z0-9+/=]+)/.exec(
    await cli(['webhook', 'add', '--site', 'default', '--url', receiver.url]),
  )?.[1];
  give('a webhook secret', whsec);
  receiver.setSecret(whsec!);
  give('a webhook secret (its key)', whsec!.slice('whsec_'.length));
  keys.set('a webhook key', Buffer.from(whsec!.slice('whsec_'.length), 'base64'));
  await cli(['site', 'set', '--site', 'default', '--rp-id', 'localhost', '--origins', 'http://localhost:5173']);
  // A sign-in provider's client secret (issue 59), as the operator gives it: from the environment.
  const providerSecret = `GOCSPX-provider-secret-${Date.now()}`;
  const provider = await d.cli(
    [
      'provider',
      'set',
      '--site',
      'default',
      '--name',
      'google',
      '--client-id',
      'every-table.apps.googleusercontent.com',
    ].concat(['--redirect-uris', 'https://shop.example.com/auth/callback']),
    { PROVIDER_CLIENT_SECRET: providerSecret },
  );
  expect(provider.code, provider.stderr).toBe(0);
  give("a provider's client secret", providerSecret);

  // The API: an account with a password and TOTP, its login in two steps, a session refreshed.
  const api = createClient({ baseUrl: d.server().baseUrl, token: apiToken! });
  const password = 'correct horse battery staple';
  const email = `every-${Date.now()}@example.com`;
  const created = await api.POST('/api/1/user/create', {
    body: { email, name: 'Ada', password },
    headers: { 'Idempotency-Key': `"every-table-${Date.now()}"` },
  });
  ok(created, 201);
  const ada = created.data!.result._userId;
  const added = (await api.POST('/api/1/user/factor/totp', { body: { _userId: ada } })).data!.result;
  give('a TOTP secret', added.secret);
  keys.set('a TOTP secret', base32Bytes(added.secret));
  const confirmed = await api.POST('/api/1/user/factor/confirm', {
    body: { _userId: ada, factorId: added.factorId, code: totpAt(added.secret, nowSeconds()) },
  });
  ok(confirmed);
  for (const code of confirmed.data!.result.recoveryCodes ?? []) give('a recovery code', code);
  const firstStep = await api.POST('/api/1/user/verify', { body: { email, password } });
  expect(firstStep.response.status).toBe(403);
  const loginTicket = (firstStep.error as Problem & { ticket: string }).ticket;
  give('a second-step ticket', loginTicket);
  const secondStep = await api.POST('/api/1/user/factor/verify', {
    body: { ticket: loginTicket, code: totpAt(added.secret, nowSeconds() + 30), session: {} },
  });
  ok(secondStep);
  const session = secondStep.data!.result.session!;
  give('a session token', session.token);
  give('an access token', session.accessToken);
  const refreshed = await api.POST('/api/1/session/refresh', { body: { token: session.token } });
  ok(refreshed);
  give('a refreshed session token', refreshed.data!.result.session.token);

  // Another account: a passkey, its login; its tickets; an identity; an organization and an invitation.
  const bea = (
    await api.POST('/api/1/user/create', { body: { email: `bea-${Date.now()}@example.com`, name: 'Bea', password } })
  ).data!.result._userId;
  const authenticator = new SoftAuthenticator('http://localhost:5173');
  const registration = (await api.POST('/api/1/user/factor/passkey/options', { body: { _userId: bea } })).data!.result
    .options;
  const registered = await api.POST('/api/1/user/factor/passkey', {
    body: { _userId: bea, response: authenticator.register(registration) },
  });
  ok(registered, 201);
  for (const code of registered.data!.result.recoveryCodes ?? []) give('a recovery code', code);
  const request = (await api.POST('/api/1/user/passkey/options', { body: { _userId: bea } })).data!.result.options;
  const byPasskey = await api.POST('/api/1/user/passkey/verify', {
    body: { response: authenticator.assert(request), session: {} },
  });
  ok(byPasskey);
  give('a session token (passkey)', byPasskey.data!.result.session!.token);
  for (const purpose of ['verify_email', 'reset_password', 'login'] as const) {
    const issued = await api.POST('/api/1/user/ticket', { body: { _userId: bea, purpose } as never });
    ok(issued, 201);
    give(`a ${purpose} ticket`, issuedTicket(issued.data!.result));
  }
  ok(await api.POST('/api/1/user/identity/link', { body: { _userId: bea, provider: 'github', subject: '583231' } }));
  ok(await api.POST('/api/1/org/roles', { body: { roles: [{ role: 'member', permissions: ['read'] }] } }));
  const org = (await api.POST('/api/1/org/create', { body: { name: 'Acme' } })).data!.result.orgId;
  ok(await api.POST('/api/1/org/member/add', { body: { orgId: org, _userId: bea, roles: ['member'] } }));
  const invited = await api.POST('/api/1/org/invitation/create', {
    body: { orgId: org, email: 'carol@example.com', roles: ['member'] },
  });
  ok(invited, 201);
  give('an invitation ticket', issuedTicket(invited.data!.result));
  const impersonated = await api.POST('/api/1/session/impersonate', {
    body: { _userId: bea, actor: 'grace@support.example.com', reason: 'Ticket 4821' },
  });
  ok(impersonated, 201);
  give('an impersonation session token', impersonated.data!.result.session.token);
  // The webhook has had its deliveries (the deliveries table holds rows).
  await waitUntil('a delivery', () => receiver.received.length > 0);

  // The deployment's key, which the copy does not have: not in it either.
  const ring = d.env.FACTOR_ENCRYPTION_KEY ?? readFileSync(join(d.env.DATA_DIR!, 'factor-key'), 'utf8');
  for (const [i, entry] of ring.trim().split(',').entries())
    keys.set(`the deployment key ${i}`, Buffer.from(entry.split(':')[1]!, 'base64'));

  // The account whose ticket a copy would forge (G7): a password and TOTP, confirmed at this step, not signed in since.
  const victimEmail = `victim-${Date.now()}@example.com`;
  const victim = await withTotp(api, victimEmail, password);
  give("the victim's TOTP secret", victim.secret);
  keys.set("the victim's TOTP secret", base32Bytes(victim.secret));
  for (const code of victim.recoveryCodes) give('a recovery code', code);
  return { given, keys, loginTicket, receiver, whsec: whsec!, api, victim };
}

describe.each(backends)('what a copy of the database gives away, on the $name (issue 57)', (backend) => {
  if (backend.skip) return void it.skip(`(skipped: ${backend.skip})`, () => {});
  let d: Awaited<ReturnType<typeof deploy>>;
  let world: Awaited<ReturnType<typeof populate>>;
  beforeAll(async () => {
    d = await deploy(backend);
    world = await populate(d);
  }, 120_000);
  afterAll(async () => {
    d?.server().child.kill('SIGTERM');
    await d?.server().exited;
  });

  it('keeps nothing in any table that it handed out, nor a key that signs, opens or mints without the deployment key (every table)', async () => {
    const { given, keys, loginTicket } = world;
    const copy = await d.copy(async (sql) => ({
      rows: await everyRow(sql),
      signing: (await sql('select public_jwk from signing_keys')).map((r) => r.public_jwk as { x: string; y: string }),
      serviceKeys: (await sql('select name from service_keys order by name')).map((r) => r.name as string),
    }));
    const tables = new Set(copy.rows.map((r) => r.table));
    for (const table of [
      'users',
      'user_factors',
      'recovery_codes',
      'sessions',
      'session_replaced_tokens',
      'tickets',
      'api_tokens',
      'webhook_endpoints',
      'webhook_deliveries',
      'signing_keys',
      'providers',
      'user_identities',
      'orgs',
      'org_memberships',
      'org_invitations',
      'idempotency_keys',
      'events',
      'audit_log',
    ])
      expect(tables, `the copy has rows of ${table}`).toContain(table);
    expect(copy.signing.length).toBeGreaterThan(0);
    const [ticketBody, ticketSignature] = loginTicket.split('.');
    let tried = 0;
    for (const { table, text } of copy.rows) {
      for (const [secret, what] of given) expect(text.includes(secret), `${table} holds ${what}`).toBe(false);
      for (const candidate of candidatesOf(text)) {
        for (const form of keyForms(candidate)) {
          tried++;
          for (const [what, key] of keys) expect(form.equals(key), `${table} holds ${what}: ${candidate}`).toBe(false);
          if (form.length === 32)
            for (const jwk of copy.signing)
              expect(isPrivateKeyOf(form, jwk), `${table} holds a signing key's private key`).toBe(false);
          for (const message of [`second_factor\n${ticketBody}`, ticketBody!])
            expect(
              createHmac('sha256', form).update(message).digest('base64url') === ticketSignature,
              `${table} holds the ticket key: ${candidate}`,
            ).toBe(false);
        }
      }
    }
    expect(tried).toBeGreaterThan(100);
    // The one key left in the clear signs list cursors (accounts/listing.ts), which give nothing:
    // a cursor only places a page of the site its token already reads (its scope names the site
    // and the filters); forging one skips no check. Any other key kept here fails this test.
    expect(copy.serviceKeys.filter((name) => name !== 'cursor')).toEqual([]);
  }, 60_000);

  it('mints no second-step ticket: a ticket forged with any stored value is refused (G7)', async () => {
    const { victim } = world;
    // From the copy: the victim's generation (as login-ticket.ts computes it), and a ticket signed
    // with each stored value of a key's size, as the issue's attacker made them.
    const forged = await d.copy(async (sql) => {
      const [{ g }] = (await sql(GENERATION, [victim.userId])) as [{ g: string }];
      const body = Buffer.from(JSON.stringify({ u: victim.userId, s: 'default', e: Date.now() + 240_000, g })).toString(
        'base64url',
      );
      const tickets = new Set<string>();
      for (const { text } of await everyRow(sql))
        for (const candidate of candidatesOf(text))
          for (const key of keyForms(candidate))
            if (key.length === 32)
              tickets.add(`${body}.${createHmac('sha256', key).update(`second_factor\n${body}`).digest('base64url')}`);
      return [...tickets];
    });
    expect(forged.length).toBeGreaterThan(10);
    const api = d.client();
    const answers = new Set<number>();
    for (const ticket of forged) {
      const { response } = await api.POST('/api/1/user/factor/verify', {
        body: { ticket, code: totpAt(victim.secret, nowSeconds() + 30) },
      });
      answers.add(response.status);
      if (response.status === 200) break;
    }
    expect([...answers]).toEqual([422]);
  }, 60_000);

  it('forges no webhook delivery: the stored secret signs nothing, and one stored in the clear before is sealed at start and still signs (G6)', async () => {
    const { receiver, whsec } = world;
    const write = async (tag: string) => {
      const created = await d.client().POST('/api/1/user/create', {
        body: { email: `${tag}-${Date.now()}@example.com`, name: 'Ada', password: 'correct horse battery staple' },
      });
      expect(created.response.status, JSON.stringify(created.error)).toBe(201);
      return created.data!.result._userId;
    };
    // What a receiver accepts: a delivery signed with the secret the CLI printed.
    const forge = (key: string) => {
      const body = JSON.stringify({ type: 'user.deleted', subject: world.victim.userId });
      const id = `msg_${Date.now()}`;
      const at = new Date();
      const headers = { 'webhook-id': id, 'webhook-timestamp': String(Math.floor(at.getTime() / 1000)) };
      try {
        const signature = new Webhook(key).sign(id, at, body);
        new Webhook(whsec).verify(body, { ...headers, 'webhook-signature': signature });
        return true;
      } catch {
        return false;
      }
    };
    expect(forge(whsec)).toBe(true);
    // A secret stored in the clear, as `webhook add` stored it before (issue 57), for a second receiver.
    const before = await receiverOn(cleanups);
    const oldSecret = 'whsec_c3RvcmVkIGluIHRoZSBjbGVhciBiZWZvcmUgNTcu';
    before.setSecret(oldSecret);
    const stored = await d.copy(async (sql) => {
      const endpoints = await sql('select secret from webhook_endpoints');
      await sql(
        `insert into webhook_endpoints (site, url, types, secret, fanned_seq)
         values ('default', $1, array['user.*'], $2, coalesce((select last from event_sequences where site = 'default'), 0))`,
        [before.url, oldSecret],
      );
      return endpoints.map((e) => e.secret as string);
    });
    expect(stored).toHaveLength(1);
    for (const value of stored) expect(forge(value), 'the stored value signs a delivery').toBe(false);
    // The next start seals it.
    await d.restart();
    const sealed = await d.copy(async (sql) =>
      (await sql('select secret from webhook_endpoints')).map((r) => r.secret as string),
    );
    expect(sealed).toHaveLength(2);
    const oldKey = Buffer.from(oldSecret.slice('whsec_'.length), 'base64');
    for (const value of sealed) {
      expect(value).not.toContain(oldSecret.slice('whsec_'.length));
      expect(forge(value)).toBe(false);
      for (const candidate of candidatesOf(JSON.stringify({ value })))
        for (const key of keyForms(candidate)) expect(key.equals(oldKey), candidate).toBe(false);
    }
    // Both endpoints still deliver, each signed with its own secret.
    const next = await write('g6-after');
    await waitUntil('the next write delivered to both endpoints', () =>
      [receiver, before].every((r) => r.received.some((e) => e.event.subject === next)),
    );
    expect(receiver.counts().refused + before.counts().refused).toBe(0);
  }, 60_000);
});
