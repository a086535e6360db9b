// What the spec says a request deserves, decided from the spec alone: the operation's schema and
// the rules its description states in words (trimming, NFC, exactly one of _userId/email, ...).
// It answers "must be refused" or "may succeed"; the runner holds the server to it.

import { operations } from '@user-accounts/server/operations';
import type { ValidateFunction } from 'ajv/dist/2020.js';
import type { SpecChecker } from '../spec-check.ts';

export interface Verdict {
  /** Why the spec requires a 4xx, or undefined when the request may succeed. */
  invalid: string | undefined;
}

export interface Sent {
  method: string;
  path: string;
  query: [string, string][];
  headers: Record<string, string>;
  /** The body as sent, or undefined when none was. */
  text: string | undefined;
  auth: 'token' | 'none' | 'wrong';
}

const BODY_LIMIT = 64 * 1024;

/**
 * The rules an operation's description states in words, beyond its schema and the rules every
 * operation shares (the spec's info.description). An operation without words of its own has none.
 */
const WORD_RULES: Record<string, (fields: Record<string, unknown>) => string | undefined> = {
  // get's words: exactly one of _userId, email, or provider with subject (issue 44).
  getUser: (query) => {
    const ways = ['_userId' in query, 'email' in query, 'provider' in query || 'subject' in query].filter(Boolean);
    return ways.length !== 1 || 'provider' in query !== 'subject' in query
      ? 'not exactly one of _userId, email, provider with subject'
      : undefined;
  },
  createUser: (body) => metadataBroken(body) ?? phonelessVerified(body, true),
  createUserFromIdentity: (body) => metadataBroken(body) ?? phonelessVerified(body, true),
  updateUser: (body) => metadataBroken(body) ?? phonelessVerified(body, false),
  // ticket's words: exactly one of _userId or email; newEmail with change_email only; expiresIn
  // within the purpose's maximum (7 days, 24 hours for reset_password, 1 hour for verify_phone).
  issueTicket: (body) => {
    if ('_userId' in body === 'email' in body) return 'not exactly one of _userId, email';
    if ((body.purpose === 'change_email') !== 'newEmail' in body)
      return 'newEmail without change_email, or none with it';
    const max = body.purpose === 'reset_password' ? 86_400 : body.purpose === 'verify_phone' ? 3_600 : 604_800;
    return typeof body.expiresIn === 'number' && body.expiresIn > max
      ? 'expiresIn over the purpose maximum'
      : undefined;
  },
  // redeem's rule (in its schema's allOf too since issue 41): password with reset_password only; _userId with verify_phone.
  redeemTicket: (body) => {
    if ((body.purpose === 'reset_password') !== 'password' in body)
      return 'password without reset_password, or none with it';
    return body.purpose === 'verify_phone' && !('_userId' in body) ? 'verify_phone without _userId' : undefined;
  },
  // disable's words: a suspension's end later than now (Date, as the server, refuses a leap second).
  disableUser: (body) =>
    typeof body.until === 'string' && !(Date.parse(body.until) > Date.now()) ? 'until not later than now' : undefined,
  listUsers: (query) => instantsExist(query) ?? metadataFilterBroken(query),
  // Organizations' words (issue 45): get by exactly one of orgId or slug; metadata as an account's;
  // a role set names each role once.
  getOrg: (query) => ('orgId' in query === 'slug' in query ? 'not exactly one of orgId, slug' : undefined),
  createOrg: (body) => metadataBroken(body),
  updateOrg: (body) => metadataBroken(body),
  setOrgRoles: (body) => {
    if (!Array.isArray(body.roles)) return undefined;
    const names = body.roles.map((r) => (r as { role?: unknown } | null)?.role);
    return new Set(names).size < names.length ? 'a role named twice' : undefined;
  },
  countUsers: (query) => instantsExist(query) ?? metadataFilterBroken(query),
};

/**
 * Metadata's words (its schema's description): an object of at most 16 levels of objects and
 * arrays and at most 65,536 bytes of compact JSON in UTF-8, no string or key holding U+0000 or an
 * unpaired surrogate.
 */
function metadataBroken(fields: Record<string, unknown>): string | undefined {
  if (!('metadata' in fields)) return undefined;
  const value = fields.metadata;
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return 'metadata is not an object';
  if (depthOf(value) > 16) return 'metadata nested over 16 levels';
  if (Buffer.byteLength(JSON.stringify(value)) > 65_536) return 'metadata over 64 KiB';
  const stack: unknown[] = [value];
  while (stack.length > 0) {
    const v = stack.pop();
    const texts = typeof v === 'string' ? [v] : v !== null && typeof v === 'object' ? Object.keys(v) : [];
    if (texts.some((t) => t.includes('\u0000') || !t.isWellFormed()))
      return 'metadata holds U+0000 or a lone surrogate';
    if (v !== null && typeof v === 'object') stack.push(...Object.values(v));
  }
  return undefined;
}

/** create's and update's words: a phone said verified needs a phone (create's, or update's not cleared). */
function phonelessVerified(body: Record<string, unknown>, creating: boolean): string | undefined {
  const noPhone = body.phone === null || (creating && body.phone === undefined);
  return body.phoneVerified === true && noPhone ? 'phoneVerified without a phone' : undefined;
}

/** list's and count's `metadata`: a JSON object within metadata's words. */
function metadataFilterBroken(query: Record<string, unknown>): string | undefined {
  if (typeof query.metadata !== 'string') return undefined;
  try {
    return metadataBroken({ metadata: JSON.parse(query.metadata) });
  } catch {
    return 'metadata is not JSON';
  }
}

/** list's and count's words: a created bound is an instant from year 1 on, without a leap second. */
function instantsExist(query: Record<string, unknown>): string | undefined {
  for (const name of ['createdAfter', 'createdBefore']) {
    const text = query[name];
    if (typeof text !== 'string') continue;
    const at = new Date(text);
    if (Number.isNaN(at.getTime()) || at.getUTCFullYear() < 1) return `${name} is no instant`;
  }
  return undefined;
}

/**
 * The arrays whose rows the spec says are checked one by one and answered at their index (in a
 * 200), so that only the request's own shape can make it a 4xx.
 */
const ROWS_ANSWERED_ONE_BY_ONE: Record<string, string> = { importUsers: 'users' };

/** The spec's words: an integer in a query is written in decimal digits, a boolean as true or false. */
function typedQueryValue(text: string, type: string | undefined): unknown {
  if (type === 'integer' && /^(?:0|[1-9][0-9]{0,14})$/.test(text)) return Number(text);
  if (type === 'boolean' && (text === 'true' || text === 'false')) return text === 'true';
  return text;
}

function isJson(type: string | undefined): boolean {
  if (type === undefined) return false;
  const [media, ...params] = type.split(';').map((s) => s.trim().toLowerCase());
  // A quoted parameter value is the same value (RFC 9110).
  const charsetOk = (p: string) =>
    !p.startsWith('charset=') || p.replace(/^charset="(.*)"$/, 'charset=$1') === 'charset=utf-8';
  return media === 'application/json' && params.every(charsetOk);
}

/** How deep arrays and objects nest in a parsed JSON value (walked with a stack, not recursion). */
function depthOf(value: unknown): number {
  let max = 0;
  const stack: [unknown, number][] = [[value, 0]];
  while (stack.length > 0) {
    const [v, d] = stack.pop()!;
    if (v !== null && typeof v === 'object') {
      max = Math.max(max, d + 1);
      for (const child of Object.values(v)) stack.push([child, d + 1]);
    }
  }
  return max;
}

const illFormed = (value: Record<string, unknown>) =>
  Object.values(value).some((v) => typeof v === 'string' && !v.isWellFormed());

export function createOracle(checker: SpecChecker) {
  const { spec } = checker;
  const idempotencyKey = checker.validatorFor(spec.components.parameters.IdempotencyKey.schema);
  // Each operation of the table, with its validators compiled from the spec.
  const known = operations.map((op) => {
    // Each parameter as declared, in place or by reference.
    const parameters = ((spec.paths[op.path][op.method.toLowerCase()].parameters ?? []) as { $ref?: string }[]).map(
      (p) => (p.$ref === undefined ? p : spec.components.parameters[p.$ref.split('/').pop()!]),
    );
    const query = new Map(
      parameters
        .filter((p) => p.in === 'query')
        .map((p) => [p.name as string, checker.validatorFor(p.schema)] as const),
    );
    let schema = 'body' in op.request ? spec.components.schemas[op.request.body] : undefined;
    const rows = ROWS_ANSWERED_ONE_BY_ONE[op.name];
    if (schema !== undefined && rows !== undefined) {
      schema = { ...schema, properties: { ...schema.properties, [rows]: { ...schema.properties[rows], items: {} } } };
    }
    const body: ValidateFunction | undefined = schema === undefined ? undefined : checker.validatorFor(schema);
    const queryTypes = new Map(
      parameters
        .filter((p) => p.in === 'query')
        .map((p) => [p.name as string, p.schema?.type as string | undefined] as const),
    );
    const requiredQuery = parameters
      .filter((p) => p.in === 'query' && p.required === true)
      .map((p) => p.name as string);
    return { op, query, queryTypes, requiredQuery, body, words: WORD_RULES[op.name] };
  });

  return function verdict(sent: Sent): Verdict {
    const atPath = known.filter((k) => k.op.path === sent.path);
    if (atPath.length === 0) return { invalid: 'no such path' };
    const operation = atPath.find(
      (k) => k.op.method === sent.method || (sent.method === 'HEAD' && k.op.method === 'GET'),
    );
    if (operation === undefined) return { invalid: 'method not allowed' };
    if (sent.auth !== 'token') return { invalid: 'no valid token' };

    if (operation.body === undefined) {
      const names = sent.query.map(([k]) => k);
      if (new Set(names).size !== names.length) return { invalid: 'repeated query parameter' };
      const fields: Record<string, string> = {};
      for (const [name, value] of sent.query) {
        const validate = operation.query.get(name);
        if (!validate) return { invalid: `unknown query parameter ${name}` };
        const v = name === 'email' || name === 'name' ? value.trim() : value;
        if (!v.isWellFormed() || !validate(typedQueryValue(v, operation.queryTypes.get(name)))) {
          return { invalid: `bad ${name}` };
        }
        fields[name] = v;
      }
      const missing = operation.requiredQuery.find((name) => !(name in fields));
      if (missing !== undefined) return { invalid: `no ${missing}` };
      return { invalid: operation.words?.(fields) };
    }

    if (!isJson(sent.headers['Content-Type'])) return { invalid: 'not application/json' };
    const text = sent.text ?? '';
    if (Buffer.byteLength(text) > (operation.op.bulk?.bodyBytes ?? BODY_LIMIT)) return { invalid: 'body too large' };
    let value: unknown;
    try {
      // A UTF-8 decoder drops a leading byte order mark.
      value = JSON.parse(text.replace(/^\ufeff/, ''));
    } catch {
      return { invalid: 'not JSON' };
    }
    if (depthOf(value) > 32) return { invalid: 'nested more than 32 levels' };
    if (value === null || typeof value !== 'object' || Array.isArray(value)) return { invalid: 'not an object' };
    const fields = { ...(value as Record<string, unknown>) };
    // The spec's words: email and name trimmed, password normalized to NFC, before the schema.
    for (const key of ['email', 'name'])
      if (typeof fields[key] === 'string') fields[key] = (fields[key] as string).trim();
    if (typeof fields.password === 'string') fields.password = fields.password.normalize('NFC');
    if (illFormed(fields)) return { invalid: 'unpaired surrogate' };
    const key = sent.headers['Idempotency-Key'];
    if (operation.op.idempotent && key !== undefined && !idempotencyKey(key)) return { invalid: 'bad Idempotency-Key' };
    const words = operation.words?.(fields);
    if (words !== undefined) return { invalid: words };
    if (!operation.body(fields)) return { invalid: 'breaks the schema' };
    return { invalid: undefined };
  };
}
