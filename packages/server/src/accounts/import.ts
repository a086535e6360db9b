// Bringing accounts over from another system: the checks and writes shared by `POST import` and
// `cli import`. Each row is checked on its own and answered at its index; only the rows that
// pass every check are written, in one transaction per call (or CLI batch).

import type { components } from '@user-accounts/client';
import { and, eq, inArray, sql } from 'drizzle-orm';
import { assertWellFormedStrings, normalizeFields, toFieldErrors, type Validators } from '../contract/validation.ts';
import type { Db } from '../db/client.ts';
import { userFactors, userIdentities, users } from '../db/schema.ts';
import type { ApiError, FieldError } from '../errors.ts';
import { keysOf } from '../factors/factors.ts';
import { uuidv7 } from '../kernel/ids.ts';
import { holdsEmailOf } from '../kernel/in-reach.ts';
import { type KeyRing, seal } from '../kernel/secret-box.ts';
import { type FirebaseScrypt, firebaseStored, readHash } from '../passwords/foreign.ts';
import { type PasswordHasher, weakPasswordReason } from '../passwords/hasher.ts';
import {
  BREACHED_DETAIL,
  type BreachedPasswords,
  breachCheckUnavailable,
  breachedFieldError,
  judgeNewPassword,
} from '../passwords/screening.ts';
import { phoneVerifiedFault, verifiedAtCreate } from './contacts.ts';
import { metadataFault, siteSchemaOf } from './metadata.ts';
import { checkSiteSchema } from './schema-checks.ts';

type Schemas = components['schemas'];
export type ImportItem = Schemas['ImportItem'];
export type ImportResult = Schemas['ImportUsersResponse']['result'];
type ItemError = Schemas['ImportItemError'];

/** A row that passed the checks that need no data, normalized as create normalizes. */
interface Accepted {
  index: number;
  row: Schemas['ImportUser'];
  /** The stored hash: the one given, or ours of the plain password (once hashed). */
  passwordHash?: string;
  /** The id of the row's imported TOTP factor, when it has one (known before the write, for its event). */
  factorId?: string;
}

/** Where the rows go: the site's accounts, checked with the spec's validators. */
export interface ImportTarget {
  db: Db;
  hasher: PasswordHasher;
  validators: Validators;
  site: string;
  /** Aborts when the request is gone: hashes still waiting for their turn are not computed. */
  signal?: AbortSignal;
  /** Breached-password screening of plain passwords (BREACHED_PASSWORDS_URL); undefined: off. */
  breachedPasswords?: BreachedPasswords | undefined;
  /** FACTOR_ENCRYPTION_KEY's keys, for rows with a `totp` secret; undefined when not configured. */
  factorKeys?: KeyRing | undefined;
}

/** A factor an import enabled, for its audit row and user.factor_added event. */
export interface ImportedFactor {
  userId: string;
  factor: { factorId: string; type: 'totp' };
}

/** Range requests one import has out at once: one site's share of them (passwords/breached.ts). */
const IMPORT_SCREEN_CONCURRENCY = 4;

const rowError = (index: number, code: ItemError['code'], message: string, errors: FieldError[]): ImportItem => ({
  index,
  error: { code, message, errors: errors.slice(0, 20) },
});

const at = (index: number, errors: FieldError[]) =>
  errors.map((e) => ({ ...e, pointer: `/users/${index}${e.pointer}`.slice(0, 64) }));

/** The rows' own checks, in order: shape, schema, password rules, hash format, a repeated email. */
export function checkRows(
  rows: unknown[],
  validators: Validators,
  firebase?: FirebaseScrypt,
): { items: (ImportItem | undefined)[]; accepted: Accepted[] } {
  const items: (ImportItem | undefined)[] = [];
  const accepted: Accepted[] = [];
  const seen = new Map<string, number>();
  const seenIdentities = new Map<string, number>();
  for (const [index, raw] of rows.entries()) {
    const checked = checkRow(raw, validators, firebase);
    if ('code' in checked) {
      items[index] = rowError(index, checked.code, checked.message, at(index, checked.errors));
      continue;
    }
    // Each identity once in the request: in this row, or an earlier one.
    const inRow = new Set<string>();
    const repeated = (checked.identities ?? []).findIndex((identity) => {
      const key = identityKeyOf(identity);
      const again = seenIdentities.has(key) || inRow.has(key);
      inRow.add(key);
      return again;
    });
    if (repeated >= 0) {
      items[index] = rowError(index, 'identity_taken', 'This identity is given more than once in this import.', [
        { pointer: `/users/${index}/identities/${repeated}`, code: 'conflict', message: 'is given more than once' },
      ]);
      continue;
    }
    for (const identity of checked.identities ?? []) seenIdentities.set(identityKeyOf(identity), index);
    const email = checked.email.toLowerCase();
    const first = seen.get(email);
    if (first !== undefined) {
      items[index] = rowError(index, 'email_taken', 'An earlier row of this import has this email.', [
        { pointer: `/users/${index}/email`, code: 'conflict', message: `is the email of row ${first}` },
      ]);
      continue;
    }
    seen.set(email, index);
    accepted.push({
      index,
      row: checked,
      ...(checked.passwordHash !== undefined && { passwordHash: checked.passwordHash }),
      ...(checked.totp !== undefined && { factorId: uuidv7() }),
    });
  }
  return { items, accepted };
}

/** One row, normalized as create normalizes and checked, or why it is refused (pointers within the row). */
function checkRow(raw: unknown, validators: Validators, firebase?: FirebaseScrypt): Schemas['ImportUser'] | ItemError {
  const refused = (code: ItemError['code'], message: string, errors: FieldError[]): ItemError => ({
    code,
    message,
    errors,
  });
  if (raw === null || typeof raw !== 'object' || Array.isArray(raw)) {
    return refused('invalid_request', 'The row must be a JSON object.', [
      { pointer: '', code: 'invalid_type', message: 'must be an object' },
    ]);
  }
  const fields = raw as Record<string, unknown>;
  try {
    normalizeFields(fields);
    const totp = fields.totp;
    if (totp !== null && typeof totp === 'object' && !Array.isArray(totp))
      assertWellFormedStrings(totp as Record<string, unknown>, '/totp');
  } catch (error) {
    return refused('invalid_request', 'The row contains malformed text.', (error as ApiError).errors ?? []);
  }
  // Exactly one of password or passwordHash; neither for an account that signs in only through
  // its identities (issue 44).
  const both = Object.hasOwn(fields, 'password') && Object.hasOwn(fields, 'passwordHash');
  const neither = !Object.hasOwn(fields, 'password') && !Object.hasOwn(fields, 'passwordHash');
  if (both || (neither && !Object.hasOwn(fields, 'identities'))) {
    return refused('invalid_request', 'Give exactly one of password or passwordHash, or neither with identities.', [
      { pointer: '/password', code: 'required', message: 'or passwordHash is required, not both' },
    ]);
  }
  if (!validators.importRow(fields)) {
    return refused('invalid_request', 'The row is not valid.', toFieldErrors(validators.importRow.errors));
  }
  const row = fields as Schemas['ImportUser'];
  const phoneless = phoneVerifiedFault(row, true);
  if (phoneless !== undefined)
    return refused('invalid_request', 'A phone cannot be verified without one.', [phoneless]);
  if (row.metadata !== undefined) {
    const fault = metadataFault(row.metadata, '/metadata');
    if (fault !== undefined) return refused('invalid_request', 'The metadata is not valid.', [fault]);
  }
  if (row.totp !== undefined) {
    const secret = totpSecretOf(row.totp.secret);
    if (secret === undefined) {
      return refused('invalid_request', 'The TOTP secret is not base32 of whole bytes.', [
        { pointer: '/totp/secret', code: 'invalid_format', message: 'must be base32 (RFC 4648) of whole bytes' },
      ]);
    }
    row.totp = { ...row.totp, secret };
  }
  if (row.password !== undefined) {
    const reason = weakPasswordReason(row.password, { email: row.email, name: row.name });
    if (reason !== undefined) {
      return refused('weak_password', "The password is too common or too close to the account's details.", [
        { pointer: '/password', code: 'weak_password', message: reason },
      ]);
    }
  }
  if (row.passwordHash !== undefined) {
    const { passwordSalt, ...rest } = row;
    if (passwordSalt !== undefined && firebase === undefined) {
      return refused(
        'invalid_password_hash',
        "A passwordSalt is for a Firebase hash, with the request's firebaseScrypt.",
        [{ pointer: '/passwordSalt', code: 'not_allowed', message: "needs the request's firebaseScrypt parameters" }],
      );
    }
    // A Firebase hash is kept with what its verify needs: the project's parameters and the salt.
    const stored =
      passwordSalt === undefined ? row.passwordHash : firebaseStored(firebase!, passwordSalt, row.passwordHash);
    const check = readHash(stored);
    if (typeof check === 'string') {
      return refused('invalid_password_hash', 'The password hash cannot be used.', [
        { pointer: '/passwordHash', code: 'invalid_format', message: check },
      ]);
    }
    return { ...rest, passwordHash: stored };
  }
  return row;
}

/**
 * A TOTP secret as the schema let it through (base32 letters, either case, `=` padding), in the
 * form our own secrets have (upper case, unpadded), or undefined when it is not whole bytes: 5 bits
 * a character leave 0, 2, 4, 5 or 7 characters over 8 (RFC 4648 section 6), and padding, when
 * given, fills the last group of 8 exactly.
 */
export function totpSecretOf(given: string): string | undefined {
  const secret = given.replace(/=+$/, '').toUpperCase();
  if (!/^[A-Z2-7]+$/.test(secret) || ![0, 2, 4, 5, 7].includes(secret.length % 8)) return undefined;
  if (secret.length !== given.length && given.length % 8 !== 0) return undefined;
  return secret;
}

/** An identity's key within one site: provider and subject, told apart whatever their characters. */
const identityKeyOf = (identity: { provider: string; subject: string }) =>
  JSON.stringify([identity.provider, identity.subject]);

const identityTaken = (index: number, j: number): ImportItem =>
  rowError(index, 'identity_taken', 'An account of this site already has this identity.', [
    { pointer: `/users/${index}/identities/${j}`, code: 'conflict', message: 'is already linked to an account' },
  ]);

/** The accepted rows with an identity an account of the site already has: the row's index and the identity's. */
async function identitiesTaken(db: Db, site: string, accepted: Accepted[]): Promise<Map<number, number>> {
  const wanted = accepted.flatMap((a) => a.row.identities ?? []);
  if (wanted.length === 0) return new Map();
  const held = await db
    .select({ provider: userIdentities.provider, subject: userIdentities.subject })
    .from(userIdentities)
    .where(
      // The providers named too: the lookup walks user_identities_site_provider_subject_key, not
      // every identity of the site.
      and(
        eq(userIdentities.site, site),
        inArray(userIdentities.provider, [...new Set(wanted.map((i) => i.provider))]),
        inArray(
          userIdentities.subject,
          wanted.map((i) => i.subject),
        ),
      ),
    );
  const heldKeys = new Set(held.map(identityKeyOf));
  const taken = new Map<number, number>();
  for (const a of accepted) {
    const j = (a.row.identities ?? []).findIndex((i) => heldKeys.has(identityKeyOf(i)));
    if (j >= 0) taken.set(a.index, j);
  }
  return taken;
}

const emailTaken = (index: number): ImportItem =>
  rowError(index, 'email_taken', 'An account with this email already exists.', [
    { pointer: `/users/${index}/email`, code: 'conflict', message: 'is already in use' },
  ]);

/**
 * The accepted rows whose email an account in reach of the site already has. A row out of reach
 * (another writer's) is no conflict: the imported account stands beside it, as create's would.
 */
async function alreadyTaken(db: Db, site: string, accepted: Accepted[]): Promise<Set<number>> {
  if (accepted.length === 0) return new Set();
  const emails = accepted.map((a) => a.row.email.toLowerCase());
  const rows = await db
    .select({ email: sql<string>`lower(${users.email})` })
    .from(users)
    .where(and(holdsEmailOf(site), inArray(sql`lower(${users.email})`, emails)));
  const taken = new Set(rows.map((r) => r.email));
  return new Set(accepted.filter((a) => taken.has(a.row.email.toLowerCase())).map((a) => a.index));
}

/**
 * The rows whose plain password the breach corpus knows. A few at a time, as many as one site's
 * share of range requests, so that each row's timeout is its own request's and not a wait behind
 * the other rows. A row the corpus could not answer for fails the call with 503 when the operator
 * chose closed (nothing written), and goes on otherwise.
 */
async function breachedRows(target: ImportTarget, rows: Accepted[]): Promise<Set<number>> {
  const found = new Set<number>();
  if (target.breachedPasswords === undefined) return found;
  const queue = rows.filter((a) => a.row.password !== undefined);
  let unavailable = false;
  const worker = async () => {
    for (let next = queue.shift(); next !== undefined && !unavailable; next = queue.shift()) {
      const verdict = await judgeNewPassword(target.breachedPasswords, next.row.password!, target.site, target.signal);
      if (verdict === 'breached') found.add(next.index);
      if (verdict === 'unavailable') unavailable = true;
    }
  };
  await Promise.all(Array.from({ length: IMPORT_SCREEN_CONCURRENCY }, worker));
  if (unavailable) throw breachCheckUnavailable();
  return found;
}

/**
 * Hashes the plain passwords in the site's turn of the shared hasher, as many at once as it has
 * slots: enough to keep them busy, never enough to fill the shared waiting room by itself.
 */
async function hashPasswords(
  hasher: PasswordHasher,
  site: string,
  rows: Accepted[],
  signal: AbortSignal | undefined,
): Promise<void> {
  const queue = rows.filter((a) => a.passwordHash === undefined && a.row.password !== undefined);
  // Once one hash fails (the queue full: 503), the call fails: the others stop taking work.
  let failed = false;
  const worker = async () => {
    for (let next = queue.shift(); next !== undefined && !failed; next = queue.shift()) {
      try {
        next.passwordHash = await hasher.hash(next.row.password!, site, signal);
      } catch (error) {
        failed = true;
        throw error;
      }
    }
  };
  await Promise.all(Array.from({ length: hasher.concurrency }, worker));
}

/**
 * Inserts the rows; a row whose email another writer took since it was checked (a concurrent
 * import or create) is skipped by the unique index, never doubled. Returns the ids by row index.
 * The rows go in in the order of their lowercase emails, whatever the caller's order: two imports
 * of the same emails then wait for each other's unique-index entries in one order, never in a
 * cycle that PostgreSQL would break by rolling one back (deadlock_detected; the unit of work
 * would run it again, kernel/unit-of-work.ts, but need not).
 */
export async function insertRows(
  tx: Db,
  site: string,
  given: Accepted[],
  factorKeys?: KeyRing,
  lost?: Set<number>,
): Promise<Map<number, string>> {
  if (given.length === 0) return new Map();
  const key = (a: Accepted) => a.row.email.toLowerCase();
  const rows = given.toSorted((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
  const ids = rows.map(() => uuidv7());
  const inserted = await tx
    .insert(users)
    .values(
      rows.map((a, i) => ({
        id: ids[i]!,
        site,
        email: a.row.email,
        name: a.row.name,
        phone: a.row.phone ?? null,
        address: a.row.address ?? null,
        ...verifiedAtCreate(a.row),
        metadata: a.row.metadata ?? {},
        passwordHash: a.passwordHash ?? null,
        origin: 'api',
      })),
    )
    .onConflictDoNothing()
    .returning({ id: users.id });
  const written = new Set(inserted.map((r) => r.id));
  // The TOTP factors of the accounts written, enabled at once (their owners use them already);
  // no recovery codes (see the spec's import). The secret sealed as factor/totp seals it.
  const factors = rows.flatMap((a, i) =>
    a.row.totp === undefined || !written.has(ids[i]!)
      ? []
      : [
          {
            id: a.factorId!,
            userId: ids[i]!,
            type: 'totp',
            label: a.row.totp.label ?? null,
            secret: seal(factorKeys!, a.row.totp.secret, a.factorId!),
            enabledAt: sql`now()`,
          },
        ],
  );
  if (factors.length > 0) await tx.insert(userFactors).values(factors);
  // The identities of the accounts written. One a concurrent write linked since the check is
  // refused by the unique index (DO NOTHING): its account is taken back, and its row said
  // identity_taken (`lost`), so that no account arrives without a way in it was meant to have.
  const identities = rows.flatMap((a, i) =>
    written.has(ids[i]!)
      ? (a.row.identities ?? []).map((identity) => ({
          id: uuidv7(),
          site,
          userId: ids[i]!,
          provider: identity.provider,
          subject: identity.subject,
          email: identity.email ?? null,
          emailVerified: identity.emailVerified ?? false,
        }))
      : [],
  );
  if (identities.length > 0) {
    const linked = await tx
      .insert(userIdentities)
      .values(identities)
      .onConflictDoNothing()
      .returning({ id: userIdentities.id });
    const linkedIds = new Set(linked.map((r) => r.id));
    const short = new Set(identities.filter((i) => !linkedIds.has(i.id)).map((i) => i.userId));
    if (short.size > 0) {
      await tx.delete(users).where(inArray(users.id, [...short]));
      for (const [i, a] of rows.entries()) {
        if (short.has(ids[i]!)) {
          written.delete(ids[i]!);
          lost?.add(a.index);
        }
      }
    }
  }
  return new Map(rows.flatMap((a, i) => (written.has(ids[i]!) ? [[a.index, ids[i]!] as const] : [])));
}

/** The TOTP factors an import enabled, by the accounts it created: for the audit rows and events. */
function factorsOf(rows: Accepted[], created: Map<number, string>): ImportedFactor[] {
  return rows.flatMap((a) => {
    const userId = created.get(a.index);
    return userId === undefined || a.factorId === undefined
      ? []
      : [{ userId, factor: { factorId: a.factorId, type: 'totp' as const } }];
  });
}

/**
 * Checks and imports one batch. `write` runs the insert in the caller's transaction (the
 * request's runWrite, or the CLI's) and returns the created ids by row index. A dry run checks
 * the emails in use too, and hashes and writes nothing.
 */
export async function importRows(
  target: ImportTarget,
  rows: unknown[],
  options: {
    dryRun: boolean;
    /** The Firebase project's parameters, for rows with a Firebase hash and salt. */
    firebase?: FirebaseScrypt | undefined;
    /**
     * Told how many rows are about to be written, before any is hashed: each costs a hash, now
     * (a plain password) or at its first verify (a given hash), and each fills the database.
     */
    beforeWriting?: (count: number) => Promise<void>;
    /**
     * Runs `insert` in the caller's transaction; `resultOf` is the answer once it is known what was
     * created, `factorsOf` the TOTP factors it enabled (for their audit rows and events).
     */
    write: (
      insert: (tx: Db) => Promise<Map<number, string>>,
      resultOf: (created: Map<number, string>) => ImportResult,
      factorsOf: (created: Map<number, string>) => ImportedFactor[],
    ) => Promise<Map<number, string>>;
  },
): Promise<ImportResult> {
  const { items, accepted: wellFormed } = checkRows(rows, target.validators, options.firebase);
  // A secret is never stored in the clear: without the key, a call that brings one is refused
  // whole (503, as factor/totp), dry run included, rather than its accounts arriving without it.
  const factorKeys = wellFormed.some((a) => a.row.totp !== undefined)
    ? keysOf({ db: target.db, factorKeys: target.factorKeys })
    : undefined;
  // The site's metadata schema, if it has one: a row without metadata is held to it as {}.
  const schema = await siteSchemaOf(target.db, target.site);
  const accepted: typeof wellFormed = [];
  // Each row is checked in the schema worker, in turn with other sites' checks (schema-checks.ts,
  // issue 41), and the checks stop once the request's deadline has passed or its caller went away.
  for (const checked of wellFormed) {
    const { index, row } = checked;
    target.signal?.throwIfAborted();
    const faults =
      schema === undefined
        ? []
        : await checkSiteSchema(target.site, schema, row.metadata ?? {}, '/metadata', target.signal);
    if (faults.length > 0) {
      items[index] = rowError(
        index,
        'invalid_metadata',
        "The account's metadata does not match the site's metadata schema.",
        at(index, faults),
      );
    } else accepted.push(checked);
  }
  const taken = await alreadyTaken(target.db, target.site, accepted);
  for (const index of taken) items[index] = emailTaken(index);
  // An identity an account of the site has already (issue 44): the row is refused, never merged.
  for (const [index, j] of await identitiesTaken(target.db, target.site, accepted)) {
    if (taken.has(index)) continue;
    items[index] = identityTaken(index, j);
    taken.add(index);
  }
  // Plain passwords the breach corpus knows (BREACHED_PASSWORDS_URL) fail their row, as a weak one does.
  const unclaimed = accepted.filter((a) => !taken.has(a.index));
  const breached = await breachedRows(target, unclaimed);
  for (const index of breached) {
    items[index] = rowError(index, 'breached', BREACHED_DETAIL, [breachedFieldError(`/users/${index}/password`)]);
  }
  const fresh = accepted.filter((a) => !taken.has(a.index) && !breached.has(a.index));
  // The answer, once the written rows are known: the caller may keep it with the write (an
  // Idempotency-Key's answer is kept in the write's transaction, see kernel/unit-of-work.ts).
  const lost = new Set<number>();
  const resultOf = (created: Map<number, string> | undefined): ImportResult => {
    const all = [...items] as ImportItem[];
    for (const a of fresh) {
      const id = created?.get(a.index);
      all[a.index] =
        created === undefined
          ? { index: a.index, status: 'user would be created' }
          : id === undefined
            ? lost.has(a.index)
              ? identityTaken(a.index, 0)
              : emailTaken(a.index)
            : { index: a.index, _userId: id, status: 'user created' };
    }
    const failed = all.filter((item) => 'error' in item).length;
    return {
      status: created === undefined ? 'import checked' : 'import done',
      created: all.length - failed,
      failed,
      items: all,
    };
  };
  if (options.dryRun) return resultOf(undefined);
  await options.beforeWriting?.(fresh.length);
  await hashPasswords(target.hasher, target.site, fresh, target.signal);
  return resultOf(
    await options.write(
      (tx) => insertRows(tx, target.site, fresh, factorKeys, lost),
      resultOf,
      (created) => factorsOf(fresh, created),
    ),
  );
}
