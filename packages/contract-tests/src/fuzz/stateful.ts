// Stateful sequences through the typed client: random interleavings of create, get, update and
// delete, checked against a model of what the accounts must be. Every response is also checked
// against the spec.

import { isDeepStrictEqual } from 'node:util';
import { createClient, type UserAccountsClient } from '@user-accounts/client';
import fc from 'fast-check';
// The model's RFC 7396 merge: an implementation independent of the server's (jsonb_merge_patch, in SQL).
import { apply as mergePatch } from 'json-merge-patch';
import { createSpecChecker } from '../spec-check.ts';
import type { Target } from '../targets.ts';

interface Account {
  id: string;
  email: string;
  name: string;
  phone: string | null;
  address: string | null;
  metadata: Record<string, unknown>;
}

interface Model {
  live: Account[];
  /** Ids of accounts this sequence deleted. */
  gone: string[];
}

interface Real {
  client: UserAccountsClient;
  tag: string;
  seq: { n: number };
}

function fail(message: string): never {
  throw new Error(message);
}

const expectStatus = (what: string, actual: number, expected: number, body?: unknown) => {
  if (actual !== expected) fail(`${what}: expected ${expected}, got ${actual} ${JSON.stringify(body)}`);
};

const strongPassword = fc.string({ unit: 'grapheme-ascii', minLength: 14, maxLength: 30 }).map((s) => `${s}#Zq9`);
// Valid names as the spec defines them (its Name schema, after the trimming its words require).
const nameChecker = createSpecChecker();
const validName = nameChecker.validatorFor(nameChecker.spec.components.schemas.Name);
const names = fc.oneof(
  fc.constantFrom('Ada Lovelace', 'Émilie du Châtelet', 'Ｚｅｎ', '李白', 'O\u2019Brien', 'نیم\u200cفاصله'),
  fc.string({ unit: 'grapheme', minLength: 1, maxLength: 30 }).filter((s) => validName(s.trim())),
);
const phones = fc.option(fc.constantFrom('+44 20 7946 0018', '555-0100', '(01) 234.567'), { nil: null });
// Metadata and its patches over a few keys, so that patches meet what earlier ones left: nested
// objects merge, nulls remove, arrays and scalars replace.
const metaKeys = fc.constantFrom('plan', 'tags', 'org', 'n', 'é');
const metaLeaf = fc.oneof(
  fc.string({ maxLength: 5 }),
  fc.integer(),
  fc.boolean(),
  fc.array(fc.integer(), { maxLength: 3 }),
);
const metaPatch: fc.Arbitrary<Record<string, unknown>> = fc.letrec((tie) => ({
  patch: fc.dictionary(metaKeys, fc.oneof({ depthSize: 'small' }, metaLeaf, fc.constant(null), tie('patch')), {
    maxKeys: 3,
  }),
})).patch as fc.Arbitrary<Record<string, unknown>>;
const addresses = fc.option(fc.constantFrom('1 Main St', "12 St James's Square\nLondon", 'Straße 5\t2. OG'), {
  nil: null,
});

class Create implements fc.AsyncCommand<Model, Real> {
  readonly name: string;
  readonly phone: string | null;
  readonly password: string;
  constructor(name: string, phone: string | null, password: string) {
    this.name = name;
    this.phone = phone;
    this.password = password;
  }
  check = () => true;
  async run(m: Model, r: Real) {
    const email = `seq.${r.tag}.${r.seq.n++}@Example.org`;
    const body = { email, password: this.password, name: this.name, ...(this.phone ? { phone: this.phone } : {}) };
    const { data, response } = await r.client.POST('/api/1/user/create', { body });
    expectStatus('create', response.status, 201, data);
    m.live.push({
      id: data!.result._userId,
      email,
      name: this.name.trim(),
      phone: this.phone,
      address: null,
      metadata: {},
    });
  }
  toString = () => `create(${JSON.stringify(this.name)})`;
}

class CreateTaken implements fc.AsyncCommand<Model, Real> {
  readonly index: number;
  constructor(index: number) {
    this.index = index;
  }
  check = (m: Readonly<Model>) => m.live.length > 0;
  async run(m: Model, r: Real) {
    const account = m.live[this.index % m.live.length]!;
    const { error, response } = await r.client.POST('/api/1/user/create', {
      body: { email: account.email.toUpperCase(), password: 'Another-strong-pass-42', name: 'Twin' },
    });
    expectStatus('create with a taken email', response.status, 409, error);
  }
  toString = () => `createTaken(${this.index})`;
}

class Get implements fc.AsyncCommand<Model, Real> {
  readonly index: number;
  readonly byEmail: boolean;
  constructor(index: number, byEmail: boolean) {
    this.index = index;
    this.byEmail = byEmail;
  }
  check = (m: Readonly<Model>) => m.live.length > 0;
  async run(m: Model, r: Real) {
    const account = m.live[this.index % m.live.length]!;
    const query = this.byEmail ? { email: account.email.toLowerCase() } : { _userId: account.id };
    const { data, error, response } = await r.client.GET('/api/1/user/get', { params: { query } });
    expectStatus('get', response.status, 200, error);
    // Metadata is compared as a value: jsonb keeps its keys in an order of its own.
    const { createdAt: _c, updatedAt: _u, metadata, ...seen } = data!.result;
    if (
      JSON.stringify(seen) !==
        JSON.stringify({
          _userId: account.id,
          email: account.email,
          name: account.name,
          phone: account.phone,
          address: account.address,
          disabled: false,
          // The sequences never suspend an account.
          disabledUntil: null,
          disabledReason: null,
          // The sequences never say a contact is verified.
          emailVerified: false,
          emailVerifiedAt: null,
          phoneVerified: false,
          phoneVerifiedAt: null,
          // The fuzzed server screens no password against a breach corpus.
          passwordBreached: false,
          // The fuzzed server sends no mail of ours.
          emailDeliverable: true,
          // The sequences link no identity.
          identities: [],
        }) ||
      !isDeepStrictEqual(metadata, account.metadata)
    ) {
      fail(`get: ${JSON.stringify(seen)} differs from the model ${JSON.stringify(account)}`);
    }
  }
  toString = () => `get(${this.index}, ${this.byEmail ? 'email' : 'id'})`;
}

type Patch = {
  name?: string;
  phone?: string | null;
  address?: string | null;
  password?: string;
  metadata?: Record<string, unknown>;
};

class Update implements fc.AsyncCommand<Model, Real> {
  readonly index: number;
  readonly patch: Patch;
  constructor(index: number, patch: Patch) {
    this.index = index;
    this.patch = patch;
  }
  check = (m: Readonly<Model>) => m.live.length > 0 && Object.keys(this.patch).length > 0;
  async run(m: Model, r: Real) {
    const account = m.live[this.index % m.live.length]!;
    const { data, error, response } = await r.client.POST('/api/1/user/update', {
      body: { _userId: account.id, ...this.patch },
    });
    expectStatus('update', response.status, 200, error ?? data);
    if (this.patch.name !== undefined) account.name = this.patch.name.trim();
    if (this.patch.phone !== undefined) account.phone = this.patch.phone;
    if (this.patch.address !== undefined) account.address = this.patch.address;
    if (this.patch.metadata !== undefined)
      account.metadata = mergePatch(structuredClone(account.metadata), this.patch.metadata);
  }
  toString = () => `update(${this.index}, ${JSON.stringify({ ...this.patch, password: this.patch.password && '…' })})`;
}

class Delete implements fc.AsyncCommand<Model, Real> {
  readonly index: number;
  constructor(index: number) {
    this.index = index;
  }
  check = (m: Readonly<Model>) => m.live.length > 0;
  async run(m: Model, r: Real) {
    const [account] = m.live.splice(this.index % m.live.length, 1);
    const { error, response } = await r.client.DELETE('/api/1/user/delete', { body: { _userId: account!.id } });
    expectStatus('delete', response.status, 200, error);
    m.gone.push(account!.id);
  }
  toString = () => `delete(${this.index})`;
}

/** Each operation on an account already deleted: 404, whichever it is. */
class TouchGone implements fc.AsyncCommand<Model, Real> {
  readonly index: number;
  readonly operation: 'get' | 'update' | 'delete';
  constructor(index: number, operation: 'get' | 'update' | 'delete') {
    this.index = index;
    this.operation = operation;
  }
  check = (m: Readonly<Model>) => m.gone.length > 0;
  async run(m: Model, r: Real) {
    const id = m.gone[this.index % m.gone.length]!;
    const { response } =
      this.operation === 'get'
        ? await r.client.GET('/api/1/user/get', { params: { query: { _userId: id } } })
        : this.operation === 'update'
          ? await r.client.POST('/api/1/user/update', { body: { _userId: id, name: 'Ghost' } })
          : await r.client.DELETE('/api/1/user/delete', { body: { _userId: id } });
    expectStatus(`${this.operation} of a deleted account`, response.status, 404);
  }
  toString = () => `${this.operation}Gone(${this.index})`;
}

const commands = [
  fc.tuple(names, phones, strongPassword).map(([n, p, pw]) => new Create(n, p, pw)),
  fc.nat().map((i) => new CreateTaken(i)),
  fc.tuple(fc.nat(), fc.boolean()).map(([i, e]) => new Get(i, e)),
  fc
    .tuple(
      fc.nat(),
      fc.record(
        { name: names, phone: phones, address: addresses, password: strongPassword, metadata: metaPatch },
        { requiredKeys: [] },
      ),
    )
    .map(([i, p]) => new Update(i, p)),
  fc.nat().map((i) => new Delete(i)),
  fc
    .tuple(fc.nat(), fc.constantFrom('get' as const, 'update' as const, 'delete' as const))
    .map(([i, o]) => new TouchGone(i, o)),
];

export async function runSequences(target: Target, options: { runs: number; seed: number }): Promise<void> {
  if (options.runs === 0) return;
  const checker = createSpecChecker();
  const client = createClient({
    baseUrl: target.baseUrl,
    token: target.token,
    fetch: async (request) => {
      const response = await fetch(request);
      const violations = await checker.check(request.method, new URL(request.url).pathname, response);
      if (violations.length > 0) fail(violations.join('\n'));
      return response;
    },
  });
  let run = 0;
  const details = await fc.check(
    fc.asyncProperty(fc.commands(commands, { maxCommands: 14 }), async (cmds) => {
      const real: Real = { client, tag: `${options.seed}.${run++}`, seq: { n: 0 } };
      await fc.asyncModelRun(() => ({ model: { live: [], gone: [] }, real }), cmds);
    }),
    { seed: options.seed, numRuns: options.runs, endOnFailure: true },
  );
  if (details.failed) {
    throw new Error(
      `fuzz: sequence ${details.numRuns} failed (seed ${options.seed}): ${String(details.counterexample?.[0] ?? '')}\n${(details.errorInstance as Error | undefined)?.message ?? 'no error recorded'}`,
    );
  }
}
