// Load for the fault tests: workers that keep writing (or reading) through a real server and
// record what was acknowledged, so that durability can be checked as sets afterwards.

export const FAULT_TOKEN = 'ua_fault_tests_token_0123456789abcdef0123';

export interface Outcome {
  op: 'get' | 'create' | 'update' | 'delete' | 'readyz' | 'ticket';
  startedAt: number;
  ms: number;
  /** HTTP status, or 0 when no answer came (connection refused or reset, client timeout). */
  status: number;
  code?: string;
  error?: string;
}

/** What the writers were told, per account: the basis of the set checks. */
export interface Acks {
  /** Created and acknowledged (201): id → email. */
  created: Map<string, string>;
  /** Create attempts without an answer: they may or may not exist. */
  createsInDoubt: Set<string>;
  /** Per account: the name of its last acknowledged update, and names sent since without an answer. */
  names: Map<string, { acked: string | undefined; inDoubt: string[] }>;
  /**
   * What begins every name this load sends (its tag): an account none of whose updates was
   * acknowledged may still hold the name it had before the load (its seed's, or an earlier
   * load's on the same accounts), which is not this load's.
   */
  namePrefix?: string;
  deleted: Set<string>;
  deletesInDoubt: Set<string>;
}

export const newAcks = (): Acks => ({
  created: new Map(),
  createsInDoubt: new Set(),
  names: new Map(),
  deleted: new Set(),
  deletesInDoubt: new Set(),
});

export async function call(
  baseUrl: string,
  op: Outcome['op'],
  path: string,
  init: RequestInit & { timeoutMs: number },
  log: Outcome[],
): Promise<{ status: number; body: any }> {
  const startedAt = Date.now();
  const headers: Record<string, string> = { Authorization: FAULT_TOKEN };
  if (init.body !== undefined) headers['Content-Type'] = 'application/json';
  try {
    const response = await fetch(`${baseUrl}${path}`, {
      ...init,
      headers,
      signal: AbortSignal.timeout(init.timeoutMs),
    });
    const text = await response.text();
    let body: any;
    try {
      body = JSON.parse(text);
    } catch {}
    log.push({ op, startedAt, ms: Date.now() - startedAt, status: response.status, code: body?.code });
    return { status: response.status, body };
  } catch (error) {
    log.push({ op, startedAt, ms: Date.now() - startedAt, status: 0, error: String((error as Error).cause ?? error) });
    return { status: 0, body: undefined };
  }
}

export async function createAccounts(baseUrl: string, n: number, tag: string): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const { status, body } = await call(
      baseUrl,
      'create',
      '/api/1/user/create',
      {
        method: 'POST',
        body: JSON.stringify({
          email: `seed.${tag}.${i}@example.com`,
          password: `Seed-password-${tag}-${i}`,
          name: 'Seed',
        }),
        timeoutMs: 10_000,
      },
      [],
    );
    if (status !== 201) throw new Error(`seeding account ${i} answered ${status}`);
    ids.push(body.result._userId);
  }
  return ids;
}

export interface WriteLoad {
  stop(): Promise<void>;
  acks: Acks;
  log: Outcome[];
}

/**
 * Creators, updaters (each owning some accounts, one request at a time per account) and a
 * deleter, until stopped. `base()` gives the server's current address (it may restart).
 */
export function writeLoad(
  base: () => string,
  options: { creators: number; updaters: number; owned: string[]; doomed: string[]; tag: string; timeoutMs: number },
): WriteLoad {
  const acks: Acks = { ...newAcks(), namePrefix: `${options.tag}.` };
  const log: Outcome[] = [];
  let running = true;
  let seq = 0;
  const pause = () => new Promise((r) => setTimeout(r, 20));

  const creator = async (w: number) => {
    while (running) {
      const email = `load.${options.tag}.${w}.${seq++}@example.com`;
      const { status, body } = await call(
        base(),
        'create',
        '/api/1/user/create',
        {
          method: 'POST',
          body: JSON.stringify({ email, password: `Load-password-${seq}-${w}`, name: 'Load' }),
          timeoutMs: options.timeoutMs,
        },
        log,
      );
      if (status === 201) acks.created.set(body.result._userId, email);
      else if (status === 0 || status >= 500) acks.createsInDoubt.add(email);
      if (status === 0) await pause();
    }
  };
  const updater = async (w: number) => {
    const mine = options.owned.filter((_, i) => i % options.updaters === w);
    for (let i = 0; running; i++) {
      const id = mine[i % mine.length]!;
      const name = `${acks.namePrefix}n${w}.${i}`;
      const state = acks.names.get(id) ?? { acked: undefined, inDoubt: [] };
      acks.names.set(id, state);
      const { status } = await call(
        base(),
        'update',
        '/api/1/user/update',
        {
          method: 'POST',
          body: JSON.stringify({ _userId: id, name }),
          timeoutMs: options.timeoutMs,
        },
        log,
      );
      if (status === 200) {
        state.acked = name;
        state.inDoubt = [];
      } else if (status === 0 || status >= 500) {
        state.inDoubt.push(name);
      }
      if (status === 0) await pause();
    }
  };
  const deleter = async () => {
    for (const id of options.doomed) {
      if (!running) break;
      const { status } = await call(
        base(),
        'delete',
        '/api/1/user/delete',
        {
          method: 'DELETE',
          body: JSON.stringify({ _userId: id }),
          timeoutMs: options.timeoutMs,
        },
        log,
      );
      if (status === 200) acks.deleted.add(id);
      else if (status === 0 || status >= 500) acks.deletesInDoubt.add(id);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  const workers = [
    ...Array.from({ length: options.creators }, (_, w) => creator(w)),
    ...Array.from({ length: options.updaters }, (_, w) => updater(w)),
    deleter(),
  ];
  return {
    acks,
    log,
    async stop() {
      running = false;
      await Promise.all(workers);
    },
  };
}

/**
 * Every acknowledged write is there, every acknowledged delete is gone; what was in doubt may
 * have gone either way. `rows` is the accounts table afterwards (id → name).
 */
export function lostWrites(acks: Acks, rows: Map<string, string>): string[] {
  const lost: string[] = [];
  for (const [id, email] of acks.created) {
    if (!rows.has(id) && !acks.deleted.has(id)) lost.push(`acknowledged create of ${email} (${id}) is missing`);
  }
  for (const id of acks.deleted) if (rows.has(id)) lost.push(`acknowledged delete of ${id} did not last`);
  for (const [id, { acked, inDoubt }] of acks.names) {
    const name = rows.get(id);
    if (name === undefined) continue; // deleted by no one: reported above if it was created by the load
    const allowed = [acked ?? 'Seed', ...inDoubt];
    // Nothing of this load acknowledged: the name from before it stands, if it is not this load's.
    const before = acked === undefined && acks.namePrefix !== undefined && !name.startsWith(acks.namePrefix);
    if (!allowed.includes(name) && !before)
      lost.push(`account ${id} is named "${name}", expected one of ${JSON.stringify(allowed)}`);
  }
  return lost;
}

export const acknowledged = (acks: Acks) =>
  acks.created.size + acks.deleted.size + [...acks.names.values()].filter((s) => s.acked !== undefined).length;

/** Counts acknowledged updates too, not only the accounts that got one. */
export const acknowledgedOps = (log: Outcome[]) => log.filter((o) => o.status >= 200 && o.status < 300).length;

/** Acknowledged requests that started at or after `since` (epoch ms): the load is flowing (again). */
export const ackedSince = (log: Outcome[], since: number) =>
  log.filter((o) => o.startedAt >= since && o.status >= 200 && o.status < 300).length;

/**
 * Polls `check` every 50 ms until it is true, or throws `what` after `ms`: what the tests wait for
 * instead of a fixed sleep (a sleep long enough on a loaded machine is too long on a quiet one).
 */
export async function waitUntil(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${ms} ms: ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

export const rowsOf = (rows: { id: string; name: string }[]) =>
  new Map(rows.map((r) => [String(r.id), String(r.name)]));

/** Accounts that exist without the audit row their create wrote in the same transaction, or without a hash. */
export const HALF_WRITTEN = `select u.id from users u where u.origin = 'api' and (u.password_hash is null or not exists
  (select 1 from audit_log a where a.user_id = u.id::text and a.operation = 'create'))`;

/**
 * Outcomes as a failure needs them read: one line per kind (op, status, code, error), with how
 * many and when they started against the given moments (ms after each), rather than hundreds of
 * objects a diff prints as `[Object]`. Empty when `outcomes` is.
 */
export function grouped(outcomes: Outcome[], moments: Record<string, number>): string[] {
  const kinds = new Map<string, Outcome[]>();
  for (const o of outcomes) {
    const kind = `${o.op} ${o.status}${o.code ? ` ${o.code}` : ''}${o.error ? ` (${o.error})` : ''}`;
    kinds.set(kind, [...(kinds.get(kind) ?? []), o]);
  }
  return [...kinds].map(([kind, list]) => {
    const first = Math.min(...list.map((o) => o.startedAt));
    const last = Math.max(...list.map((o) => o.startedAt));
    const when = Object.entries(moments)
      .map(([name, at]) => `${first - at}…${last - at} ms after ${name}`)
      .join(', ');
    return `${kind}: ${list.length}, started ${when}, slowest ${Math.max(...list.map((o) => o.ms))} ms`;
  });
}
