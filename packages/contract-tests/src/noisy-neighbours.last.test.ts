// One site cannot hurt another (issue 26): two sites side by side on one server, "evil" spending
// what every site shares (hashing time, long-polls, the database) and "shop" going about its
// business; each test asserts what shop sees, and that evil is bounded.
import { randomBytes } from 'node:crypto';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { bigAccounts } from './big-accounts.ts';
import { type PrivatePostgres, privatePostgres, privatePostgresUnavailable } from './faults/private-postgres.ts';
import { checkedClient } from './harness.ts';
import { heavyReads, hoarder, type PostLoop, postLoops } from './heavy-reader.ts';
import {
  embeddedServer,
  freshPostgresDatabase,
  PRODUCTION_HASHES,
  postgresUnavailable,
  type ServerOptions,
  serverTarget,
  type Target,
} from './targets.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  await Promise.all(cleanups.splice(0).map((c) => c()));
});

// Production's hashes throughout: what a flood of them costs the other sites is the subject.
async function embedded(options: ServerOptions): Promise<Target> {
  const target = await embeddedServer({ env: { ...PRODUCTION_HASHES, ...options.env } });
  cleanups.push(() => target.close());
  return target;
}

const median = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)]!;
/**
 * `length` characters a and b at random (xorshift, the same text each call), which patterns that
 * defeat RE2's DFA keep meeting new states in (a text with a short period lets it cache them all).
 */
function randomAB(length: number): string {
  let seed = 2463534242;
  const bit = () => {
    seed = (seed ^ (seed << 13)) >>> 0;
    seed = (seed ^ (seed >>> 17)) >>> 0;
    seed = (seed ^ (seed << 5)) >>> 0;
    return seed & 1;
  };
  return Array.from({ length }, () => (bit() ? 'a' : 'b')).join('');
}
/** passlib's adapted base64 (no padding, '.' for '+'), as its PBKDF2 hashes are written. */
const b64 = (n: number) => randomBytes(n).toString('base64').replaceAll('=', '').replaceAll('+', '.');

describe('costly imported hashes', () => {
  it("keep shop's logins quick while evil runs wrong verifies against PBKDF2 hashes of 5,000,000 rounds", async () => {
    const target = await embedded({
      env: { HASH_CONCURRENCY: '2', RATE_LIMIT_HASH: 'off', VERIFY_LIMIT: '1000/15m', RATE_LIMIT: '100000/60s' },
    });
    const evil = checkedClient(
      target.baseUrl,
      (await target.createToken({ site: 'evil', scopes: ['write', 'verify'], label: 'evil' })).token,
    );
    const shop = checkedClient(
      target.baseUrl,
      (await target.createToken({ site: 'shop', scopes: ['write', 'verify'], label: 'shop' })).token,
    );
    // Each check takes about 1.5 s of a core: within import's limits (10,000,000 rounds).
    const users = Array.from({ length: 16 }, (_, i) => ({
      email: `bomb.${i}@example.com`,
      name: 'Bomb',
      passwordHash: `$pbkdf2-sha512$5000000$${b64(16)}$${b64(64)}`,
    }));
    const imported = await evil.POST('/api/1/user/import', { body: { users } });
    expect(imported.data?.result.created).toBe(16);
    const email = 'shopper@example.com';
    const password = 'the shop customer passphrase';
    expect(
      (await shop.POST('/api/1/user/create', { body: { email, password, name: 'Shopper' } })).response.status,
    ).toBe(201);
    const login = async () => {
      const started = performance.now();
      const { response } = await shop.POST('/api/1/user/verify', { body: { email, password } });
      return { status: response.status, ms: performance.now() - started };
    };
    const quiet: number[] = [];
    for (let i = 0; i < 5; i++) quiet.push((await login()).ms);

    // Eight loops of wrong verifies, each against its own account, abandoned at the end.
    const stop = new AbortController();
    const loops = Array.from({ length: 8 }, async (_, loop) => {
      for (let n = 0; !stop.signal.aborted; n++) {
        await evil
          .POST('/api/1/user/verify', {
            body: { email: users[(loop + 8 * n) % 16]!.email, password: 'a wrong guess' },
            signal: stop.signal,
          })
          .catch(() => {});
      }
    });
    try {
      await new Promise((r) => setTimeout(r, 500));
      const attacked = [];
      for (let i = 0; i < 10; i++) attacked.push(await login());
      expect(attacked.map((a) => a.status)).toEqual(Array(10).fill(200));
      // Before the fix each login waited behind evil's checks: about a second, and 503s.
      expect(median(attacked.map((a) => a.ms))).toBeLessThan(Math.max(250, 8 * median(quiet)));
    } finally {
      stop.abort();
      await Promise.all(loops);
    }
  }, 180_000);
});

describe('costly imported hashes past the deadline (issue 41, F8)', () => {
  it('count as failures (after VERIFY_LIMIT late verifies, 429) and stop using a core when their request ends', async () => {
    const target = await embedded({
      env: {
        HASH_CONCURRENCY: '2',
        RATE_LIMIT_HASH: 'off',
        VERIFY_LIMIT: '3/15m',
        RATE_LIMIT: '100000/60s',
        REQUEST_TIMEOUT_MS: '500',
      },
    });
    const evil = checkedClient(
      target.baseUrl,
      (await target.createToken({ site: 'evil', scopes: ['write', 'verify'], label: 'evil' })).token,
    );
    const shop = checkedClient(
      target.baseUrl,
      (await target.createToken({ site: 'shop', scopes: ['write', 'verify'], label: 'shop' })).token,
    );
    // import's limit, 10,000,000 rounds of SHA-512: seconds of a core, far past the deadline.
    const bomb = {
      email: 'late.bomb@example.com',
      name: 'Bomb',
      passwordHash: `$pbkdf2-sha512$10000000$${b64(16)}$${b64(64)}`,
    };
    expect((await evil.POST('/api/1/user/import', { body: { users: [bomb] } })).data?.result.created).toBe(1);
    const email = 'patient.shopper@example.com';
    const password = 'the patient shop customer passphrase';
    expect(
      (await shop.POST('/api/1/user/create', { body: { email, password, name: 'Shopper' } })).response.status,
    ).toBe(201);
    const login = async () => {
      const started = performance.now();
      const { response } = await shop.POST('/api/1/user/verify', { body: { email, password } });
      return { status: response.status, ms: performance.now() - started };
    };
    const quiet: number[] = [];
    for (let i = 0; i < 5; i++) quiet.push((await login()).ms);

    // Three at once, each past the deadline (one checking, two waiting for the costly lane).
    const guess = () => evil.POST('/api/1/user/verify', { body: { email: bomb.email, password: 'a wrong guess' } });
    const late = await Promise.all([guess(), guess(), guess()]);
    expect(late.map((r) => r.error?.code)).toEqual(Array(3).fill('service_unavailable'));
    // Each counted: the account is locked before any further check (before: two were taken back).
    const locked = await guess();
    expect(locked.response.status).toBe(429);
    expect(locked.error?.code).toBe('too_many_attempts');

    // The check that was running was stopped with its request: shop's logins are as quick as before.
    const after: number[] = [];
    for (let i = 0; i < 5; i++) after.push((await login()).ms);
    console.log(
      `[noisy-neighbours] late costly verifies: shop's login p50 ${Math.round(median(quiet))} ms quiet, ${Math.round(median(after))} ms just after`,
    );
    expect(median(after)).toBeLessThan(Math.max(250, 3 * median(quiet) + 20));
  }, 180_000);
});

describe('long-polls', () => {
  it('holds at most LONG_POLLS_PER_TOKEN waiting per token and LONG_POLLS_PER_SITE per site: one more is 429 too_many_long_polls at once', async () => {
    const target = await embedded({ env: { LONG_POLLS_PER_TOKEN: '2', LONG_POLLS_PER_SITE: '3' } });
    const token = async (site: string) =>
      checkedClient(target.baseUrl, (await target.createToken({ site, scopes: ['events'], label: site })).token);
    const [evil1, evil2, shop] = [await token('evil'), await token('evil'), await token('shop')];
    const stop = new AbortController();
    const poll = (client: typeof shop, wait = 20) =>
      client.GET('/api/1/events', { params: { query: { wait } }, signal: stop.signal }).catch(() => undefined);
    /** The status of a long-poll that is answered at once, or "waiting" if it is still waiting after 300 ms. */
    const statusSoon = async (client: typeof shop) => {
      const answer = poll(client).then((r) => r?.response.status);
      return Promise.race([answer, new Promise<string>((r) => setTimeout(() => r('waiting'), 300))]);
    };
    try {
      expect(await statusSoon(evil1)).toBe('waiting');
      expect(await statusSoon(evil1)).toBe('waiting');
      const refused = await evil1.GET('/api/1/events', { params: { query: { wait: 20 } } });
      expect(refused.response.status).toBe(429);
      expect(refused.error?.code).toBe('too_many_long_polls');
      expect(refused.response.headers.get('retry-after')).toBe('1');
      // The site's third place goes to its other token; its fourth to no one.
      expect(await statusSoon(evil2)).toBe('waiting');
      expect((await evil2.GET('/api/1/events', { params: { query: { wait: 20 } } })).error?.code).toBe(
        'too_many_long_polls',
      );
      // A read without wait is never refused for it, and shop long-polls as usual.
      expect((await evil2.GET('/api/1/events', { params: { query: { wait: 0 } } })).response.status).toBe(200);
      expect(await statusSoon(shop)).toBe('waiting');
    } finally {
      stop.abort();
    }
    // The places come back when the long-polls end (here, abandoned by their client).
    await expect
      .poll(async () => (await evil1.GET('/api/1/events', { params: { query: { wait: 1 } } })).response.status, {
        timeout: 5_000,
      })
      .toBe(200);
  }, 180_000);
  it("keep shop's reads quick while evil asks for 600 long-polls at once (most refused, 32 waiting)", async () => {
    // Found by attack (issue 26): 1,500 waiting polls of one token, each re-reading every second,
    // took another site's get p50 from 4 ms to 130 ms, with spikes of seconds.
    const target = await embedded({ env: {} });
    const evil = checkedClient(
      target.baseUrl,
      (await target.createToken({ site: 'evil', scopes: ['events'], label: 'evil' })).token,
    );
    const shop = checkedClient(
      target.baseUrl,
      (await target.createToken({ site: 'shop', scopes: ['read', 'write'], label: 'shop' })).token,
    );
    const created = await shop.POST('/api/1/user/create', {
      body: { email: 'reader@example.com', password: 'a reader passphrase', name: 'Reader' },
    });
    const _userId = created.data!.result._userId;
    const read = async () => {
      const started = performance.now();
      const { response } = await shop.GET('/api/1/user/get', { params: { query: { _userId } } });
      return { status: response.status, ms: performance.now() - started };
    };
    const quiet: number[] = [];
    for (let i = 0; i < 20; i++) quiet.push((await read()).ms);
    const stop = new AbortController();
    const statuses: number[] = [];
    const polls = Array.from({ length: 600 }, () =>
      evil
        .GET('/api/1/events', { params: { query: { wait: 30 } }, signal: stop.signal })
        .then((r) => statuses.push(r.response.status))
        .catch(() => {}),
    );
    try {
      // The refusals come at once; what is left is waiting.
      await expect.poll(() => statuses.length, { timeout: 10_000 }).toBeGreaterThanOrEqual(600 - 32);
      expect(statuses.every((s) => s === 429)).toBe(true);
      await new Promise((r) => setTimeout(r, 1_500)); // a re-read of every waiting poll, at least
      const attacked = [];
      for (let i = 0; i < 20; i++) attacked.push(await read());
      expect(attacked.map((a) => a.status)).toEqual(Array(20).fill(200));
      expect(median(attacked.map((a) => a.ms))).toBeLessThan(Math.max(50, 5 * median(quiet)));
    } finally {
      stop.abort();
      await Promise.all(polls);
    }
  }, 180_000);
});

describe('imports', () => {
  it('count every row against the hash budget, given hashes too, and against the site’s imports, every token of it together', async () => {
    const target = await embedded({ env: { RATE_LIMIT_HASH: '6/60s', RATE_LIMIT_IMPORT: '5/1h' } });
    const token = async (site: string) =>
      checkedClient(target.baseUrl, (await target.createToken({ site, scopes: ['write'], label: site })).token);
    const rows = (n: number, tag: string) =>
      Array.from({ length: n }, (_, i) => ({
        email: `${tag}.${i}@example.com`,
        name: 'Imported',
        passwordHash: `$2b$10$${'a'.repeat(53)}`,
      }));
    const [first, second, other] = [await token('evil'), await token('evil'), await token('shop')];
    const three = await first.POST('/api/1/user/import', { body: { users: rows(3, 'one') } });
    expect(three.response.status).toBe(200);
    // Before the fix: a call with given hashes counted one hash, whatever its rows.
    expect(three.response.headers.get('ratelimit')).toMatch(/"hash";r=3;/);
    expect(three.response.headers.get('ratelimit')).toMatch(/"import";r=2;/);
    const over = await second.POST('/api/1/user/import', { body: { users: rows(3, 'two') } });
    expect(over.response.status).toBe(429);
    expect(over.error?.code).toBe('rate_limited');
    expect(over.response.headers.get('ratelimit-policy')).toMatch(/"import";q=5;w=3600/);
    // Nothing of the refused call was written; another site imports as usual.
    expect((await target.sql("select count(*)::int as n from users where site = 'evil'"))[0]!.n).toBe(3);
    expect((await other.POST('/api/1/user/import', { body: { users: rows(3, 'shop') } })).response.status).toBe(200);
  }, 180_000);

  it('stop at MAX_ACCOUNTS_PER_SITE, as creates do: 403 account_limit_reached, nothing written, other sites unaffected', async () => {
    const target = await embedded({ env: { MAX_ACCOUNTS_PER_SITE: '3' } });
    const token = async (site: string) =>
      checkedClient(target.baseUrl, (await target.createToken({ site, scopes: ['write'], label: site })).token);
    const [evil, shop] = [await token('evil'), await token('shop')];
    const create = (client: typeof evil, i: number) =>
      client.POST('/api/1/user/create', {
        body: { email: `full.${i}@example.com`, password: `a long passphrase ${i}`, name: 'Full' },
      });
    for (let i = 0; i < 3; i++) expect((await create(evil, i)).response.status).toBe(201);
    const fourth = await create(evil, 3);
    expect(fourth.response.status).toBe(403);
    expect(fourth.error?.code).toBe('account_limit_reached');
    const imported = await evil.POST('/api/1/user/import', {
      body: { users: [{ email: 'more@example.com', name: 'More', password: 'a long passphrase more' }] },
    });
    expect(imported.response.status).toBe(403);
    expect(imported.error?.code).toBe('account_limit_reached');
    expect((await target.sql("select count(*)::int as n from users where site = 'evil'"))[0]!.n).toBe(3);
    expect((await create(shop, 0)).response.status).toBe(201);
  }, 180_000);
});

/**
 * A PostgreSQL cluster of this file's own, started by this process and so at its scheduling
 * priority, where the machine's binaries allow: `./pnpmw test` runs this file at a raised priority
 * beside the system tier (scripts/run-tests.ts), and the machine's shared PostgreSQL, at the
 * normal one, shared the CPU with that tier. On the shared server the victim tests' bounds read
 * the other tests' load as well as evil's: in a clean-clone run that took 1,079 s (480–550 s on
 * a quicker machine), shop's login p50 under evil's lists read 121 ms against a bound of 105, and
 * /healthz 113 ms (2026-11-29). One cluster for the file, a new database in it for each server;
 * without the binaries (a machine with PostgreSQL elsewhere), TEST_DATABASE_URL's server.
 */
let cluster: Promise<PrivatePostgres> | undefined;
afterAll(async () => {
  await (await cluster)?.remove();
});

/** A server on a new database (of the file's own cluster, else of TEST_DATABASE_URL's PostgreSQL), dropped on close. */
async function onPostgres(options: ServerOptions): Promise<Target> {
  if (privatePostgresUnavailable() === undefined) cluster ??= privatePostgres();
  const database = await freshPostgresDatabase(cluster === undefined ? undefined : (await cluster).url);
  const target = await serverTarget({ DATABASE_URL: database.url }, () => database.drop(), {
    ...options,
    env: { ...PRODUCTION_HASHES, ...options.env },
  });
  cleanups.push(() => target.close());
  return target;
}
const postgresSkip = privatePostgresUnavailable() === undefined ? undefined : await postgresUnavailable();

/**
 * The victim tests' bounds are absolute times (the issue's: 3× a quiet p50 + 20 ms, /healthz under
 * 100 ms), measured on the machine that runs the suite: a burst of other work there (a neighbour
 * process, the OS) can spoil one measurement. Each runs twice more, on a fresh server, before it
 * counts as failed; a server that breaks the bound fails every time. (Twice since stop 69: in one
 * clean-clone run of two on the same code the metadata-schema victim missed its bound by 21% and
 * then by 3%, passing in the other; its quiet p50 is of 15 logins.)
 */
const VICTIM = { retry: 2 };

describe.each([
  { database: 'the embedded database', start: embedded, skip: undefined },
  { database: 'PostgreSQL', start: onPostgres, skip: postgresSkip },
])('heavy reads on $database', VICTIM, ({ start, skip }) => {
  /**
   * Shop's login (production hash parameters) quiet, then while evil's heavy reads of `url` run
   * in 8 loops; /healthz timed every 50 ms through the attack. Asserts the bounds: the
   * login p50 within 3× its quiet p50 (+20 ms), every login answered, /healthz never 100 ms.
   */
  async function loginsHoldUnder(target: Target, url: string, token: string) {
    const shop = checkedClient(
      target.baseUrl,
      (await target.createToken({ site: 'shop', scopes: ['write', 'verify'], label: 'shop' })).token,
    );
    const email = 'shopper@example.com';
    const password = 'the shop customer passphrase';
    expect(
      (await shop.POST('/api/1/user/create', { body: { email, password, name: 'Shopper' } })).response.status,
    ).toBe(201);
    const login = async () => {
      const started = performance.now();
      const { response } = await shop.POST('/api/1/user/verify', { body: { email, password } });
      return { status: response.status, ms: performance.now() - started };
    };
    for (let i = 0; i < 3; i++) await login(); // warm
    const quiet: number[] = [];
    for (let i = 0; i < 15; i++) quiet.push((await login()).ms);

    // The attacker's loops in a thread of their own: its clients' work is not the server's.
    const attacker = heavyReads(url, token, 8);
    const stop = new AbortController();
    const health: number[] = [];
    const healthLoop = (async () => {
      while (!stop.signal.aborted) {
        const started = performance.now();
        await (await fetch(`${target.baseUrl}/healthz`)).arrayBuffer();
        health.push(performance.now() - started);
        await new Promise((r) => setTimeout(r, 50));
      }
    })();
    const attacked: { status: number; ms: number }[] = [];
    try {
      await new Promise((r) => setTimeout(r, 1_000));
      for (let i = 0; i < 15; i++) attacked.push(await login());
    } finally {
      stop.abort();
      await healthLoop;
    }
    const evilAnswers = await attacker.stop();
    const said = `quiet p50 ${median(quiet).toFixed(0)} ms, attacked p50 ${median(attacked.map((a) => a.ms)).toFixed(0)} ms, /healthz max ${Math.max(...health).toFixed(0)} ms, evil's answers ${JSON.stringify(evilAnswers)}`;
    console.log(`[noisy-neighbours] ${cluster === undefined ? '' : "on the file's own PostgreSQL: "}${said}`);
    expect(
      attacked.map((a) => a.status),
      said,
    ).toEqual(Array(15).fill(200));
    // The attack ran: evil's reads were answered (or refused) meanwhile.
    expect(
      Object.entries(evilAnswers).some(([status, n]) => Number(status) > 0 && n > 0),
      said,
    ).toBe(true);
    expect(median(attacked.map((a) => a.ms)), said).toBeLessThan(3 * median(quiet) + 20);
    expect(Math.max(...health), said).toBeLessThan(100);
  }

  it.skipIf(skip !== undefined)(
    "keep shop's login p50 within 3× quiet (+20 ms) and /healthz under 100 ms while evil lists 1,000 accounts of 63 KiB in 8 loops",
    async () => {
      // Found by attack (issue 41, F2): four such lists at once took another site's login p50 from
      // 29 ms to 798 ms, sixteen ×68. Before the fix here: p50 71 → 963 ms, /healthz 314 ms.
      const target = await start({ env: {} });
      await bigAccounts(target, 'evil', 200, 63);
      const evil = (await target.createToken({ site: 'evil', scopes: ['read'], label: 'evil' })).token;
      await loginsHoldUnder(target, `${target.baseUrl}/api/1/user/list?limit=1000`, evil);
    },
    120_000,
  );

  it.skipIf(skip !== undefined)(
    "keep shop's login p50 within 3× quiet (+20 ms) and /healthz under 100 ms while evil exports 200 accounts of 63 KiB in 8 loops",
    async () => {
      // Found by attack (issue 41, F2): eight exports at once, another site's login ×13. Before the
      // fix here: p50 96 → 790 ms, /healthz 607 ms.
      const target = await start({ env: {} });
      await bigAccounts(target, 'evil', 200, 63);
      const evil = (await target.createToken({ site: 'evil', scopes: ['export'], label: 'evil' })).token;
      await loginsHoldUnder(target, `${target.baseUrl}/api/1/user/export`, evil);
    },
    120_000,
  );

  // On the embedded database too: its one connection is every site's, and a person's-data read
  // that read its events' data in its snapshot held it for a dozen-plus reads, shop's queries
  // waiting behind each (measured: p50 32 → 300 ms). Now the snapshot reads no event's data.
  it.skipIf(skip !== undefined)(
    "keep shop's login p50 within 3× quiet (+20 ms) and /healthz under 100 ms while evil reads a person's data of 6 MB in 8 loops",
    async () => {
      // Found by attack (issue 41, F2): eight such answers at once, another site's login ×8.7.
      const target = await start({ env: {} });
      // 100 events of 62 KiB each, the most the answer holds.
      const _userId = await hoarder(
        target.baseUrl,
        (await target.createToken({ site: 'evil', scopes: ['write'], label: 'evil' })).token,
      );
      const token = (await target.createToken({ site: 'evil', scopes: ['export'], label: 'evil reader' })).token;
      const url = `${target.baseUrl}/api/1/user/data?_userId=${_userId}`;
      // Before the fix, each answer was 6 MB: the 100 events, each with the metadata of then.
      expect(
        (await (await fetch(url, { headers: { authorization: `Bearer ${token}` } })).arrayBuffer()).byteLength,
      ).toBeGreaterThan(1_000_000);
      await loginsHoldUnder(target, url, token);
    },
    180_000,
  );
});

describe("a site's own metadata schema", VICTIM, () => {
  // Issue 41, F1: a site's schema is checked on the event loop every site shares. Found by
  // attack: a pattern of `^(a+)+$` over 31 characters stalled the server 27 s (/healthz too);
  // `uniqueItems` over a 64 KiB array of small objects cost 0.9–1.5 s a check; a dry-run import
  // of 30 such rows held every site for 40 s. Production hash parameters throughout (shop's
  // logins run argon2id as deployed).
  it("keep shop's logins within 3× their quiet p50 (+20 ms) and /healthz under 100 ms while evil's writes and dry-run imports check costly metadata", async () => {
    const target = await embedded({ env: {} });
    const tokens: Record<string, string> = {};
    const token = async (site: string, scopes: ('read' | 'write' | 'verify')[]) => {
      tokens[site] = (await target.createToken({ site, scopes, label: site })).token;
      return checkedClient(target.baseUrl, tokens[site]);
    };
    const evil = await token('evil', ['read', 'write']);
    const hoarder = await token('hoarder', ['read', 'write']);
    const thrasher = await token('thrasher', ['read', 'write']);
    const shop = await token('shop', ['write', 'verify']);
    // evil's schema passes `metadata-schema set` (RE2 runs the pattern in linear time); hoarder's
    // was stored before set refused it (uniqueItems over untyped items), as an older server let it.
    const schemas: Record<string, unknown> = {
      evil: { properties: { code: { type: 'string', pattern: '^(a+)+$' } } },
      hoarder: { properties: { tags: { type: 'array', uniqueItems: true } } },
      // Allowed by set, but RE2's time has a constant: patterns that defeat its DFA cost about
      // 3 µs a character each (10.5 s a check over 60 KB); stopped after SCHEMA_CHECK_MS (250 ms), in the schema worker.
      thrasher: {
        properties: {
          x: { type: 'string', allOf: Array.from({ length: 20 }, (_, i) => ({ pattern: `[ab]*a[ab]{${20 + i}}$` })) },
        },
      },
    };
    for (const [site, schema] of Object.entries(schemas)) {
      await target.sql('insert into metadata_schemas (site, schema) values ($1, $2::jsonb)', [
        site,
        JSON.stringify(schema),
      ]);
    }
    const costlyCode = { code: `${'a'.repeat(27)}!` }; // about 2 s a check under backtracking
    // Every pattern matches, and only at the very end: each runs over the whole text, which is
    // random (xorshift), so that RE2's DFA keeps meeting new states (a text with a short period
    // lets it cache them all).
    const costlyText = {
      x: `${randomAB(60_000)}${'a'.repeat(41)}`,
    };
    const costlyTags = { tags: Array.from({ length: 7000 }, () => ({ a: 1 })) }; // 56 KB of equal objects
    const email = 'shopper@example.com';
    const password = 'the shop customer passphrase';
    expect(
      (await shop.POST('/api/1/user/create', { body: { email, password, name: 'Shopper' } })).response.status,
    ).toBe(201);
    const login = async () => {
      const started = performance.now();
      const { response } = await shop.POST('/api/1/user/verify', { body: { email, password } });
      return { status: response.status, ms: performance.now() - started };
    };
    // A write whose metadata the pattern checks, and a dry-run import of 30 such rows; thrasher's
    // and hoarder's writes. Each %N% is a fresh word (postLoops).
    const row = (prefix: string, metadata: unknown) => ({
      email: `${prefix}.%N%@example.com`,
      password: 'an evil passphrase',
      name: 'Evil',
      metadata,
    });
    const costly: PostLoop[] = [
      { path: '/api/1/user/create', token: tokens.evil!, body: JSON.stringify(row('c', costlyCode)) },
      {
        path: '/api/1/user/import',
        token: tokens.evil!,
        body: JSON.stringify({ dryRun: true, users: Array.from({ length: 30 }, (_, i) => row(`i${i}`, costlyCode)) }),
      },
      { path: '/api/1/user/create', token: tokens.thrasher!, body: JSON.stringify(row('t', costlyText)) },
      { path: '/api/1/user/create', token: tokens.hoarder!, body: JSON.stringify(row('h', costlyTags)) },
    ];
    // A server that has served each request once (its code compiled and warm), as in production:
    // a first request's one-off costs are not what is measured. Sent by the sites' clients, which
    // check each answer against the spec.
    const clients: Record<string, typeof evil> = {
      [tokens.evil!]: evil,
      [tokens.thrasher!]: thrasher,
      [tokens.hoarder!]: hoarder,
    };
    const word = () => Math.random().toString(36).slice(2);
    await Promise.all(
      costly.map(({ path, token, body }) =>
        clients[token]!.POST(path as '/api/1/user/create', { body: JSON.parse(body.replaceAll('%N%', word)) }),
      ),
    );
    const quiet: number[] = [];
    for (let i = 0; i < 9; i++) quiet.push((await login()).ms);

    // The attackers' loops in a thread of their own (postLoops): their clients' work is not the server's.
    const attack = postLoops(target.baseUrl, costly);
    const answers = attack.answers;
    const stop = new AbortController();
    // /healthz, asked every 20 ms throughout: how long each waited.
    const health: number[] = [];
    const probe = (async () => {
      while (!stop.signal.aborted) {
        const started = performance.now();
        const answer = await fetch(`${target.baseUrl}/healthz`, { signal: stop.signal }).catch(() => undefined);
        if (answer !== undefined) {
          await answer.arrayBuffer();
          health.push(performance.now() - started);
        }
        await new Promise((r) => setTimeout(r, 20));
      }
    })();
    try {
      // The attacks under way, each answered at least once (thrasher's after its check's deadline).
      await expect.poll(() => answers.length, { timeout: 30_000 }).toBeGreaterThanOrEqual(3);
      const attacked = [];
      for (let i = 0; i < 9; i++) attacked.push(await login());
      expect(attacked.map((a) => a.status)).toEqual(Array(9).fill(200));
      // Before the fix each check of evil's held the event loop for seconds: logins and /healthz waited behind it.
      expect(median(attacked.map((a) => a.ms))).toBeLessThanOrEqual(3 * median(quiet) + 20);
      expect(Math.max(...health)).toBeLessThan(100);
    } finally {
      stop.abort();
      await Promise.all([attack.stop(), probe]);
    }
    // What evil's checks answered: its pattern is refused as a mismatch (RE2's answer, in linear
    // time), hoarder's stored schema refuses all metadata until its operator sets it again.
    // (An import's rows take their turns with thrasher's checks: it may not have finished.)
    expect(answers.filter((status) => status !== 200 && status !== 400)).toEqual([]);
    const late = await thrasher.POST('/api/1/user/create', {
      body: { email: 't@example.com', password: 'an evil passphrase', name: 'Evil', metadata: costlyText },
    });
    expect(late.error).toMatchObject({
      code: 'invalid_metadata',
      errors: [{ pointer: '/metadata', message: expect.stringMatching(/could not be checked .* within 250 ms/) }],
    });
    const refused = await hoarder.POST('/api/1/user/create', {
      body: { email: 'h@example.com', password: 'an evil passphrase', name: 'Evil', metadata: { tags: [] } },
    });
    expect(refused.response.status).toBe(400);
    expect(refused.error).toMatchObject({
      code: 'invalid_metadata',
      errors: [
        { pointer: '/metadata', message: expect.stringMatching(/must be set again by its operator.*uniqueItems/) },
      ],
    });
  }, 180_000);
});

describe.each([
  { database: 'the embedded database', start: embedded, skip: undefined },
  { database: 'PostgreSQL', start: onPostgres, skip: postgresSkip },
])("one site's waiting writes on $database (issue 57, G1)", VICTIM, ({ start, skip }) => {
  /**
   * Shop's reads and writes (get, org/member/check, update of its own account), quiet, then while
   * evil's 24 loops of `attack` run (in a thread of their own). Asserts the bound: each p50
   * within 3× its quiet p50 (+20 ms), every answer 200, and that evil's requests were answered.
   */
  async function shopHoldsUnder(target: Target, attack: (evil: string) => Promise<PostLoop[]>) {
    const shopToken = (await target.createToken({ site: 'shop', scopes: ['read', 'write'], label: 'shop' })).token;
    const shop = checkedClient(target.baseUrl, shopToken);
    await shop.POST('/api/1/org/roles', { body: { roles: [{ role: 'member', permissions: ['read'] }] } });
    const created = await shop.POST('/api/1/user/create', {
      body: { email: 'shopper@example.com', password: 'the shop customer passphrase', name: 'Shopper' },
    });
    const _userId = created.data!.result._userId;
    const orgId = (await shop.POST('/api/1/org/create', { body: { name: 'Shop' } })).data!.result.orgId;
    const added = await shop.POST('/api/1/org/member/add', { body: { orgId, _userId, roles: ['member'] } });
    expect(added.error, JSON.stringify(added.error)).toBeUndefined();
    let n = 0;
    const probes = {
      get: () => shop.GET('/api/1/user/get', { params: { query: { _userId } } }),
      check: () => shop.GET('/api/1/org/member/check', { params: { query: { orgId, _userId, permission: 'read' } } }),
      update: () => shop.POST('/api/1/user/update', { body: { _userId, metadata: { n: n++ } } }),
    };
    const measure = async (rounds: number) => {
      const times: Record<string, number[]> = { get: [], check: [], update: [] };
      const statuses: number[] = [];
      for (let i = 0; i < rounds; i++) {
        for (const [name, probe] of Object.entries(probes)) {
          const started = performance.now();
          const { response } = await probe();
          times[name]!.push(performance.now() - started);
          statuses.push(response.status);
        }
      }
      return { times, statuses };
    };
    await measure(3); // warm
    const quiet = await measure(15);
    const evil = (await target.createToken({ site: 'evil', scopes: ['read', 'write'], label: 'evil' })).token;
    const loops = await attack(evil);
    const attacker = postLoops(target.baseUrl, loops);
    let attacked: Awaited<ReturnType<typeof measure>>;
    try {
      await expect.poll(() => attacker.answers.length, { timeout: 30_000 }).toBeGreaterThanOrEqual(24);
      attacked = await measure(15);
    } finally {
      await attacker.stop();
    }
    const evilAnswers: Record<number, number> = {};
    for (const status of attacker.answers) evilAnswers[status] = (evilAnswers[status] ?? 0) + 1;
    const said = Object.keys(probes)
      .map(
        (name) =>
          `${name} p50 ${median(quiet.times[name]!).toFixed(1)} → ${median(attacked.times[name]!).toFixed(1)} ms`,
      )
      .join(', ');
    console.log(`[noisy-neighbours] waiting writes: ${said}; evil's answers ${JSON.stringify(evilAnswers)}`);
    expect(attacked.statuses, said).toEqual(Array(attacked.statuses.length).fill(200));
    for (const name of Object.keys(probes))
      expect(median(attacked.times[name]!), `${name}: ${said}`).toBeLessThanOrEqual(
        3 * median(quiet.times[name]!) + 20,
      );
    // Nothing of evil's answered 5xx; what was refused was refused as the spec says.
    expect(
      Object.keys(evilAnswers).filter((status) => Number(status) >= 500),
      JSON.stringify(evilAnswers),
    ).toEqual([]);
    return evilAnswers;
  }

  it.skipIf(skip !== undefined)(
    "keep shop's reads and writes within 3× quiet (+20 ms) while evil sends 24 org/roles at once that leave out a role 20,000 members hold",
    async () => {
      // Found by attack (issue 57, G1): 200,000 memberships, 24 such calls, each scanning them
      // under the site's lock (~85 ms) before its 409: shop's member/check 3 → 553 ms, get 2 → 700 ms.
      const target = await start({ env: {} });
      const answers = await shopHoldsUnder(target, async (evil) => {
        const client = checkedClient(target.baseUrl, evil);
        const roles = [
          { role: 'member', permissions: ['read'] },
          { role: 'admin', permissions: ['read', 'write'] },
        ];
        await client.POST('/api/1/org/roles', { body: { roles } });
        const orgId = (await client.POST('/api/1/org/create', { body: { name: 'Evil' } })).data!.result.orgId;
        await bigAccounts(target, 'evil', 20_000, 0, 'member');
        await target.sql(
          `insert into org_memberships (org_id, user_id, site, roles)
           select $1, id, 'evil', array['member'] from users where site = 'evil'`,
          [orgId],
        );
        const body = JSON.stringify({ roles: [{ role: 'admin', permissions: ['read'] }] });
        return Array.from({ length: 24 }, () => ({ path: '/api/1/org/roles', token: evil, body }));
      });
      expect(answers[409], JSON.stringify(answers)).toBeGreaterThan(0);
    },
    180_000,
  );

  it.skipIf(skip !== undefined)(
    "keep shop's reads and writes within 3× quiet (+20 ms) while evil sends 24 updates of one account at once",
    async () => {
      // Found by attack (issue 57, G1): each update waits on the account's row in its own
      // transaction, holding a connection: shop's get 25×, member/check 29×.
      const target = await start({ env: {} });
      const answers = await shopHoldsUnder(target, async (evil) => {
        const client = checkedClient(target.baseUrl, evil);
        const created = await client.POST('/api/1/user/create', {
          body: { email: 'one@example.com', password: 'an evil passphrase', name: 'One' },
        });
        const body = JSON.stringify({ _userId: created.data!.result._userId, metadata: { x: '%N%' } });
        return Array.from({ length: 24 }, () => ({ path: '/api/1/user/update', token: evil, body }));
      });
      expect(answers[200], JSON.stringify(answers)).toBeGreaterThan(0);
    },
    180_000,
  );

  it.skipIf(skip !== undefined)(
    "keep shop's reads and writes within 3× quiet (+20 ms) while evil's 24 loops each update an account of its own",
    async () => {
      // Found by attack (issue 57, G12): 24 workers, each its own account: shop's get 16.6×.
      const target = await start({ env: {} });
      const answers = await shopHoldsUnder(target, async (evil) => {
        const client = checkedClient(target.baseUrl, evil);
        const loops: PostLoop[] = [];
        for (let i = 0; i < 24; i++) {
          const created = await client.POST('/api/1/user/create', {
            body: { email: `own.${i}@example.com`, password: 'an evil passphrase', name: 'Own' },
          });
          const body = JSON.stringify({ _userId: created.data!.result._userId, metadata: { x: '%N%' } });
          loops.push({ path: '/api/1/user/update', token: evil, body });
        }
        return loops;
      });
      expect(answers[200], JSON.stringify(answers)).toBeGreaterThan(0);
    },
    180_000,
  );
});

describe.each([
  { database: 'the embedded database', start: embedded, skip: undefined },
  { database: 'PostgreSQL', start: onPostgres, skip: postgresSkip },
])("one site's schema checks past their deadline on $database (issue 57, G2)", VICTIM, ({ start, skip }) => {
  it.skipIf(skip !== undefined)(
    "keep shop's own schema-checked updates within 3× quiet (+20 ms) while every check of evil's runs into the deadline",
    async () => {
      // Found by attack (issue 57, G2): `[ab]*a[ab]{999}$` (accepted by metadata-schema set) over
      // 60 KB: each of evil's checks hit the 250 ms deadline and restarted the one worker every
      // site's checks share; shop's schema-checked updates 8 → 323 ms p50.
      const target = await start({ env: {} });
      const schemas = {
        shop: { properties: { plan: { type: 'string', pattern: '^[a-z]{1,20}$' } } },
        evil: { properties: { x: { type: 'string', pattern: '[ab]*a[ab]{999}$' } } },
      };
      for (const [site, schema] of Object.entries(schemas))
        await target.sql('insert into metadata_schemas (site, schema) values ($1, $2::jsonb)', [
          site,
          JSON.stringify(schema),
        ]);
      const shopToken = (await target.createToken({ site: 'shop', scopes: ['read', 'write'], label: 'shop' })).token;
      const shop = checkedClient(target.baseUrl, shopToken);
      const created = await shop.POST('/api/1/user/create', {
        body: { email: 'shopper@example.com', password: 'the shop customer passphrase', name: 'Shopper' },
      });
      const _userId = created.data!.result._userId;
      const plans = ['basic', 'plus', 'pro'];
      let n = 0;
      const update = async () => {
        const started = performance.now();
        const { response } = await shop.POST('/api/1/user/update', {
          body: { _userId, metadata: { plan: plans[n++ % 3]! } },
        });
        return { status: response.status, ms: performance.now() - started };
      };
      for (let i = 0; i < 3; i++) await update(); // warm
      const quiet: number[] = [];
      for (let i = 0; i < 15; i++) quiet.push((await update()).ms);

      const evil = (await target.createToken({ site: 'evil', scopes: ['read', 'write'], label: 'evil' })).token;
      const x = `${randomAB(60_000)}${'a'.repeat(1000)}`;
      const body = JSON.stringify({
        email: 'e.%N%@example.com',
        password: 'an evil passphrase',
        name: 'Evil',
        metadata: { x },
      });
      const attacker = postLoops(
        target.baseUrl,
        Array.from({ length: 8 }, () => ({ path: '/api/1/user/create', token: evil, body })),
      );
      const attacked: { status: number; ms: number }[] = [];
      try {
        // Evil's checks under way, each answered (refused at its deadline) at least once.
        await expect.poll(() => attacker.answers.length, { timeout: 30_000 }).toBeGreaterThanOrEqual(2);
        for (let i = 0; i < 15; i++) attacked.push(await update());
      } finally {
        await attacker.stop();
      }
      const said = `shop's update p50 ${median(quiet).toFixed(1)} ms quiet, ${median(attacked.map((a) => a.ms)).toFixed(1)} ms attacked; evil's answers ${JSON.stringify(attacker.answers.slice(0, 40))}`;
      console.log(`[noisy-neighbours] late schema checks: ${said}`);
      expect(
        attacked.map((a) => a.status),
        said,
      ).toEqual(Array(15).fill(200));
      expect(
        attacker.answers.filter((s) => ![400, 429, 503].includes(s)),
        said,
      ).toEqual([]);
      expect(median(attacked.map((a) => a.ms)), said).toBeLessThanOrEqual(3 * median(quiet) + 20);
    },
    180_000,
  );
});
