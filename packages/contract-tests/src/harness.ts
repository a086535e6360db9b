// What every contract suite needs around a target: start and stop it, a client whose every
// response is checked against the spec, and helpers that make unique accounts.

import { createClient, type Problem, type UserAccountsClient } from '@user-accounts/client';
import { afterAll, beforeAll, expect } from 'vitest';
import { createSpecChecker } from './spec-check.ts';
import type { Target, TargetSpec } from './targets.ts';

export const API = '/api/1/user';

export const problemCode = async (response: Response) => ((await response.json()) as Problem).code;

/** A well-formed id that names no account. */
export const GHOST = '0193a1e4-0000-7000-8000-000000000000';

/** A problem without its requestId, to compare two answers that must be the same. */
export const withoutRequestId = (p: Problem | undefined) => ({ ...p, requestId: undefined });

const sharedChecker = createSpecChecker();

/** A client whose every response must conform to the spec (for tests that make their own servers). */
export function checkedClient(baseUrl: string, token: string): UserAccountsClient {
  return createClient({
    baseUrl,
    token,
    fetch: async (request) => {
      const response = await fetch(request);
      expect(await sharedChecker.check(request.method, new URL(request.url).pathname, response)).toEqual([]);
      return response;
    },
  });
}

export interface Harness {
  readonly target: Target;
  readonly client: UserAccountsClient;
  /** A client for another token of the same target (every response checked too). */
  clientFor(token: string): UserAccountsClient;
  /** Rebuilds the client after the target moved (a restart). */
  reconnect(): void;
  /** fetch that checks every response against the spec before the test sees it. */
  checkedFetch(request: Request): Promise<Response>;
  /** A raw request with the target's token, for what a typed client cannot send. */
  raw(path: string, init?: RequestInit): Promise<Response>;
  uniqueEmail(tag?: string): string;
  password(): string;
  createUser(
    fields?: Partial<{ email: string; name: string; phone: string; address: string }>,
    as?: UserAccountsClient,
  ): Promise<{ id: string; email: string; password: string; name: string }>;
  rowOf(id: string): Promise<Record<string, unknown> | undefined>;
  /** Every response body seen, and every password sent: no password or hash may ever leak. */
  readonly bodies: string[];
  readonly passwords: Set<string>;
}

export function useTarget(spec: TargetSpec): Harness {
  let target: Target;
  let client: UserAccountsClient;
  // One checker for the process: its validators are compiled at a schema's first use, once.
  const checker = sharedChecker;
  const bodies: string[] = [];
  const passwords = new Set<string>();
  let seq = 0;

  const checkedFetch = async (sent: Request): Promise<Response> => {
    const request =
      spec.origin === undefined || sent.headers.has('origin')
        ? sent
        : new Request(sent, { headers: [...sent.headers, ['origin', spec.origin]] });
    const response = await fetch(request);
    const path = new URL(request.url).pathname;
    // A listed origin may read every answer of the API, errors included; Node itself answers an
    // oversized header (431) before any of ours runs.
    if (spec.origin !== undefined && path.startsWith('/api/') && response.status !== 431) {
      expect(
        response.headers.get('access-control-allow-origin'),
        `${request.method} ${path} → ${response.status}`,
      ).toBe(spec.origin);
    }
    const violations = await checker.check(request.method, path, response);
    expect(violations, `${request.method} ${path} → ${response.status} conforms to the spec`).toEqual([]);
    // Behind prism proxy: what Prism found wrong with the answer (request violations are the
    // suite's own doing, when it tests invalid input).
    const reported = response.headers.get('sl-violations');
    if (reported !== null) {
      const answerViolations = (JSON.parse(reported) as { location: string[]; message: string }[]).filter(
        (v) => v.location[0] === 'response',
      );
      expect(answerViolations, `${request.method} ${path} → ${response.status}: prism proxy's violations`).toEqual([]);
    }
    bodies.push(await response.clone().text());
    return response;
  };
  const clientFor = (token: string) => createClient({ baseUrl: target.baseUrl, token, fetch: checkedFetch });

  const h: Harness = {
    get target() {
      return target;
    },
    get client() {
      return client;
    },
    clientFor,
    reconnect() {
      client = clientFor(target.token);
    },
    checkedFetch,
    raw: (path, init = {}) =>
      checkedFetch(
        new Request(`${target.baseUrl}${path}`, { ...init, headers: { Authorization: target.token, ...init.headers } }),
      ),
    uniqueEmail: (tag = 'user') => `${tag}.${Date.now()}.${seq++}@Example.com`,
    password() {
      const p = `Tr0ub4dor-${Math.random().toString(36).slice(2)}-${seq++}`;
      passwords.add(p);
      return p;
    },
    async createUser(fields = {}, as = client) {
      const body = { email: h.uniqueEmail(), password: h.password(), name: 'Ada Lovelace', ...fields };
      const { data, error, response } = await as.POST('/api/1/user/create', { body });
      expect(error, JSON.stringify(error)).toBeUndefined();
      expect(response.status).toBe(201);
      return { id: data!.result._userId, ...body };
    },
    rowOf: async (id) => (await target.sql('select * from users where id = $1', [id]))[0],
    bodies,
    passwords,
  };

  beforeAll(async () => {
    target = await spec.start();
    client = clientFor(target.token);
  }, 120_000);
  afterAll(async () => {
    await target?.close();
  });
  return h;
}

type Schemas = import('@user-accounts/client').components['schemas'];
type WithTicket = Schemas['TicketIssued'] | Schemas['InvitationCreated'];
type Sent = Schemas['TicketSent'] | Schemas['InvitationSent'];

/** The ticket of `user/ticket` or `org/invitation/create` made without `send` (narrowed on `status`). */
export function issuedTicket(result: WithTicket | Sent): string {
  if (result.status === 'ticket sent' || result.status === 'invitation sent')
    throw new Error(`expected a ticket in the answer, got ${result.status}`);
  return result.ticket;
}

/** The message's id of `user/ticket` or `org/invitation/create` made with `send` (narrowed on `status`). */
export function sentMessageId(result: WithTicket | Sent): string {
  if (result.status === 'ticket issued' || result.status === 'invitation created')
    throw new Error(`expected a message's id in the answer, got ${result.status}`);
  return result.messageId;
}
